"""Connection plumbing shared by the SQLite store's tables: the writer, the reader pool, transactions.

Short statements run inline on the writer connection (a thread hop costs more than the statement);
reads that grow with the data run on pooled reader connections in a worker thread, which WAL lets
run beside the writer. Every write transaction is ``BEGIN IMMEDIATE``, so processes sharing the
file queue on the busy timeout instead of failing to upgrade a read lock.

Short writes go through ``_write``: with group commit on (the default) the writes of concurrent
callers are coalesced into one transaction, a savepoint each (``run_batch``); with it off each is
its own transaction, as before. Either way a write returns only after its ``COMMIT``. The batch runs
inline on the event loop's thread too: a writer thread would hand the GIL back and forth with the
loop on every statement, which costs more than the statements themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar, cast

from repertory.errors import StoreError, StoreFull
from repertory.storage.group_commit import Failed, GroupCommit
from repertory.storage.history_cache import DEFAULT_HISTORY_CACHE_BYTES, HistoryCache
from repertory.storage.sqlite._wal import WalKeeper

__all__ = [
    "Durability",
    "SqliteBase",
    "Write",
    "connect",
    "db_errors",
    "is_full",
    "run_batch",
    "store_error",
    "transaction",
    "use_wal",
]

Durability = Literal["normal", "full"]
_T = TypeVar("_T")
_BUSY_TIMEOUT_MS = 10_000
_CLOSE_WAIT_SECONDS = 30.0  # close() waits this long at most for reads still running on threads


def is_full(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's ``SQLITE_FULL``: the disk (or ``PRAGMA max_page_count``) left no room.

    SQLite answers it at the statement or the ``COMMIT`` that needed the space, and has then
    rolled the transaction back itself (``in_transaction`` is false): nothing of it landed.
    """
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, sqlite3.Error) and isinstance(code, int) and code & 0xFF == sqlite3.SQLITE_FULL


def store_error(action: str, exc: BaseException) -> StoreError:
    """The typed error a failed sqlite3 call becomes: ``StoreFull`` for a full disk, else ``StoreError``."""
    kind = StoreFull if is_full(exc) else StoreError
    return kind(f"sqlite: {action} failed: {exc}")


@contextlib.contextmanager
def db_errors(action: str) -> Iterator[None]:
    """Turn sqlite3's exceptions into ``StoreError`` (``StoreFull`` for a full disk) naming what we were doing."""
    try:
        yield
    except sqlite3.Error as exc:
        raise store_error(action, exc) from exc


def use_wal(conn: sqlite3.Connection, target: str) -> None:
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise StoreError(f"sqlite: could not switch {target!r} to WAL (got {mode!r})")
    conn.execute("PRAGMA journal_size_limit = 67108864")


def connect(target: str, *, uri: bool, durability: Durability, wal: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(target, uri=uri, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        if wal:
            use_wal(conn, target)
        conn.execute(f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}")
    except BaseException:
        conn.close()
        raise
    return conn


def transaction(conn: sqlite3.Connection, action: str, fn: Callable[[sqlite3.Connection], _T]) -> _T:
    """Run ``fn`` in one ``BEGIN IMMEDIATE`` transaction; roll back on any error."""
    with db_errors(action):
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn(conn)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    return result


@dataclass(slots=True)
class Write:
    """One short write handed to the writer: its statements, and what it is (for error messages)."""

    action: str
    fn: Callable[[sqlite3.Connection], object]


def run_batch(conn: sqlite3.Connection, batch: Sequence[Write]) -> list[object | Failed]:
    """Run writes in one transaction; one outcome per write, each delivered after ``COMMIT``.

    The happy path runs every write straight through, with no savepoint: a ``SAVEPOINT`` and its
    ``RELEASE`` are two statements per member (a turn's three writes would pay six), paid for a
    failure that almost never comes. When a write does raise, the whole transaction is rolled back
    and the batch runs again with each write in its own savepoint (``_run_isolated``), so the
    failing write fails alone with its own error (a guard's ``CommitConflict``, or ``StoreError``
    for a failed statement) and the others commit. Running a write twice is safe because a write is
    a function of the database and of rows serialised before it was queued: it has no effect
    outside its statements, and the rollback took those back. A lone write is a plain transaction.
    """
    if len(batch) == 1:
        only = batch[0]
        try:
            return [transaction(conn, only.action, only.fn)]
        except Exception as exc:
            return [Failed(exc)]
    try:
        conn.execute("BEGIN IMMEDIATE")
    except Exception as exc:  # busy past the timeout, a closed database: nothing ran
        return [Failed(store_error(w.action, exc)) for w in batch]
    try:
        outcomes: list[object | Failed] = [write.fn(conn) for write in batch]
    except Exception:
        _roll_back(conn)
        return _run_isolated(conn, batch)
    except BaseException:
        _roll_back(conn)
        raise
    return _end(conn, batch, outcomes, "COMMIT")


def _run_isolated(conn: sqlite3.Connection, batch: Sequence[Write]) -> list[object | Failed]:
    """The batch again, each write in its own savepoint: a write that raises is rolled back and fails alone.

    If SQLite itself ended the transaction (a full disk, an I/O error) or ``COMMIT`` fails, nothing
    was committed and every write fails.
    """
    outcomes: list[object | Failed] = []
    try:
        conn.execute("BEGIN IMMEDIATE")
        for write in batch:
            conn.execute("SAVEPOINT member")
            try:
                outcomes.append(write.fn(conn))
            except Exception as exc:
                if not conn.in_transaction:
                    raise
                conn.execute("ROLLBACK TO member")
                outcomes.append(Failed(store_error(write.action, exc) if isinstance(exc, sqlite3.Error) else exc))
            conn.execute("RELEASE member")
    except Exception as exc:
        _roll_back(conn)
        return [Failed(store_error(w.action, exc)) for w in batch]
    except BaseException:
        _roll_back(conn)
        raise
    return _end(conn, batch, outcomes, "ROLLBACK" if all(isinstance(o, Failed) for o in outcomes) else "COMMIT")


def _end(
    conn: sqlite3.Connection, batch: Sequence[Write], outcomes: list[object | Failed], statement: str
) -> list[object | Failed]:
    """End a batch's transaction with ``statement``; if that fails, nothing was committed and every write fails."""
    try:
        conn.execute(statement)
    except Exception as exc:
        _roll_back(conn)
        return [Failed(store_error(w.action, exc)) for w in batch]
    except BaseException:
        _roll_back(conn)
        raise
    return outcomes


def _roll_back(conn: sqlite3.Connection) -> None:
    """Roll back the open transaction, if SQLite has not already ended it."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


class SqliteBase:
    """The writer connection, the reader pool, transactions, group commit and closing."""

    def __init__(
        self,
        path: str,
        writer: sqlite3.Connection,
        durability: Durability,
        memory: bool,
        group_commit: bool = True,
        history_cache_bytes: int = DEFAULT_HISTORY_CACHE_BYTES,
    ) -> None:
        self.path = path
        self.history_cache = HistoryCache(history_cache_bytes)
        self.durability: Durability = durability
        self.group_commit = group_commit
        self._group: GroupCommit[Write, object] | None = GroupCommit(self._flush) if group_commit else None
        self._writer = writer
        self._memory = memory
        self._readers: list[sqlite3.Connection] = []
        self._all_readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._readers_idle = threading.Condition(self._readers_lock)
        self._reading = 0  # reads running on worker threads now
        self._closed = False
        self._wal = None if memory or path == ":memory:" else WalKeeper(path)

    @property
    def writer_connection(self) -> sqlite3.Connection:
        """The connection every write goes through (and short reads), for tests and tools that look under the store.

        The one way to see a ``":memory:"`` database from outside the store, and to install
        connection-local hooks (temp triggers, a trace callback) that the store's own writes then
        run through: the seam the ``repertory.testing.conformance`` probes use. It is used on the
        event loop's thread like the store uses it; a statement run on it while a store write is in
        flight joins that write's transaction, so a caller uses it only between the store's calls.
        """
        return self._writer

    # -- for readers and tests outside the store ----------------------------------------------------

    @property
    def in_memory(self) -> bool:
        """True for a ``:memory:`` database: one connection, used inline, which reads and writes share."""
        return self._memory

    @property
    def group_writer(self) -> GroupCommit[Write, object] | None:
        """The group-commit queue short writes go through (``None`` with group commit off).

        Its ``batches`` and ``members`` count the transactions it committed and the writes in them.
        """
        return self._group

    @property
    def wal_keeper(self) -> WalKeeper | None:
        """What keeps a file store's write-ahead log bounded (``None`` for ``:memory:``)."""
        return self._wal

    def pragma(self, name: str) -> object:
        """The writer connection's ``PRAGMA name`` (``journal_mode``, ``synchronous``): what commits run with."""
        if not name.isidentifier():
            raise ValueError(f"not a pragma name: {name!r}")
        self._check_open()
        with db_errors(f"PRAGMA {name}"):
            row = self._writer.execute(f"PRAGMA {name}").fetchone()
        return None if row is None else row[0]

    def trace_writes(self, callback: Callable[[str], None] | None) -> None:
        """Call ``callback`` with every statement the writer connection runs; ``None`` stops.

        SQLite's own trace hook: it shows what a commit costs (its transactions and savepoints).
        """
        self._writer.set_trace_callback(callback)

    def lend_connection(self) -> sqlite3.Connection:
        """A connection for a long read of one's own (many statements), until ``give_back(conn)``.

        A file store lends a pooled reader connection (this may open one: call it off the event
        loop), which WAL lets read beside the writer in a snapshot per transaction. A ``:memory:``
        store (``in_memory``) lends its one connection, which the store's own writes share: use it
        inline, on the event loop's thread, and open no transaction on it. ``StoreError`` once closed.
        """
        if self._memory:
            self._check_open()
            return self._writer
        return self._acquire_reader()

    def give_back(self, conn: sqlite3.Connection) -> None:
        """Return a connection ``lend_connection`` lent (the pool keeps it for the next read)."""
        if conn is not self._writer:
            self._release_reader(conn)

    async def read(self, action: str, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run a read that grows with the data, ``fn(conn)``: off the event loop, on a pooled reader connection.

        Every long read of the store's own goes through here; a ``:memory:`` store runs it inline on
        its one connection. sqlite3's errors come out as ``StoreError`` naming ``action``.
        """
        self._check_open()
        if self._memory:
            with db_errors(action):
                return fn(self._writer)

        def work() -> _T:
            with db_errors(action):
                conn = self._acquire_reader()
                try:
                    return fn(conn)
                finally:
                    self._release_reader(conn)

        return await asyncio.to_thread(work)

    # -- diagnostics ------------------------------------------------------------------------------

    @property
    def group_commit_counts(self) -> tuple[int, int] | None:
        """(batches, writes in them) committed through group commit so far; ``None`` with it off.

        Writes per batch is how far concurrent commits coalesced (``benchmarks.group_commit`` reads it).
        """
        return None if self._group is None else (self._group.batches, self._group.members)

    @property
    def connections(self) -> list[sqlite3.Connection]:
        """The writer connection, then every reader connection opened so far: for measurements only.

        A benchmark sets trace callbacks or pragmas on them (``benchmarks.store``, ``benchmarks.sessions``);
        a statement sent through them bypasses the store's guards and group commit.
        """
        with self._readers_lock:
            return [self._writer, *self._all_readers]

    # -- plumbing ---------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("store is closed")

    def _acquire_reader(self) -> sqlite3.Connection:
        with self._readers_lock:
            if self._closed:
                raise StoreError("store is closed")
            self._reading += 1
            if self._readers:
                return self._readers.pop()
        try:
            conn = connect(self.path, uri=False, durability=self.durability, wal=True)
        except BaseException:
            self._release_reader(None)
            raise
        with self._readers_lock:
            self._all_readers.append(conn)
        return conn

    def _release_reader(self, conn: sqlite3.Connection | None) -> None:
        with self._readers_lock:
            if conn is not None:
                self._readers.append(conn)
            self._reading -= 1
            if self._reading == 0:
                self._readers_idle.notify_all()

    def _wait_for_readers(self, seconds: float) -> None:
        # A read whose caller was cancelled still runs on its thread: closing its connection under it
        # crashed the process (SIGSEGV in the recovery benchmark), so close() waits for it first.
        with self._readers_lock:
            self._readers_idle.wait_for(lambda: self._reading == 0, timeout=seconds)

    async def _write(self, action: str, fn: Callable[[sqlite3.Connection], _T], *, atomic: bool = True) -> _T:
        """Run a short write: alone and at once, or queued into a group-commit batch when writes come together.

        A write runs alone when group commit is off, or on but nothing else is writing (a lone
        session pays no queue and no hop). ``atomic=False`` marks a single statement, which alone
        needs no explicit transaction (SQLite's autocommit makes it one).
        """
        self._check_open()
        group = self._group
        if group is None or group.alone_now():  # a lone write: its own transaction, at once
            if atomic:
                result = transaction(self._writer, action, fn)
            else:
                with db_errors(action):
                    result = fn(self._writer)
        else:
            result = cast(_T, await group.submit(Write(action, fn)))
        if self._wal is not None:
            self._wal.after_write()
        return result

    async def _flush(self, batch: Sequence[Write]) -> list[object | Failed]:
        return run_batch(self._writer, batch)

    # -- lifecycle --------------------------------------------------------------------------------

    async def close(self) -> None:
        """Close every connection; later calls raise ``StoreError``. Closing twice is harmless."""
        if self._closed:
            return
        self._closed = True
        if self._group is not None:
            await self._group.drain()  # writes queued before close() still commit
        if self._wal is not None:
            await self._wal.close()
        await asyncio.to_thread(self._wait_for_readers, _CLOSE_WAIT_SECONDS)
        with self._readers_lock:
            readers, self._all_readers, self._readers = self._all_readers, [], []
        for conn in readers:
            conn.close()
        self._writer.close()
