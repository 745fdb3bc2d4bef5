"""Connection plumbing shared by the SQLite store's tables: the writer, the reader pool, transactions.

Short statements run inline on the writer connection (a thread hop costs more than the statement);
reads that grow with the data run on pooled reader connections in a worker thread, which WAL lets
run beside the writer. Every write transaction is ``BEGIN IMMEDIATE``, so processes sharing the
file queue on the busy timeout instead of failing to upgrade a read lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import Literal, TypeVar

from repertory.errors import StoreError

__all__ = ["Durability", "SqliteBase", "connect", "db_errors", "use_wal"]

Durability = Literal["normal", "full"]
_T = TypeVar("_T")
_BUSY_TIMEOUT_MS = 10_000


@contextlib.contextmanager
def db_errors(action: str) -> Iterator[None]:
    """Turn sqlite3's exceptions into ``StoreError`` naming what we were doing."""
    try:
        yield
    except sqlite3.Error as exc:
        raise StoreError(f"sqlite: {action} failed: {exc}") from exc


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


class SqliteBase:
    """The writer connection, the reader pool, transactions and closing."""

    def __init__(self, path: str, writer: sqlite3.Connection, durability: Durability, memory: bool) -> None:
        self.path = path
        self.durability: Durability = durability
        self._writer = writer
        self._memory = memory
        self._readers: list[sqlite3.Connection] = []
        self._all_readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._closed = False

    # -- plumbing ---------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("store is closed")

    def _acquire_reader(self) -> sqlite3.Connection:
        with self._readers_lock:
            if self._readers:
                return self._readers.pop()
        conn = connect(self.path, uri=False, durability=self.durability, wal=True)
        with self._readers_lock:
            self._all_readers.append(conn)
        return conn

    def _release_reader(self, conn: sqlite3.Connection) -> None:
        with self._readers_lock:
            self._readers.append(conn)

    async def _read(self, action: str, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run a read that grows with the data: off the event loop, on a pooled reader connection."""
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

    def _transaction(self, action: str, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``fn`` in one ``BEGIN IMMEDIATE`` transaction on the writer; roll back on any error."""
        self._check_open()
        conn = self._writer
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

    # -- lifecycle --------------------------------------------------------------------------------

    async def close(self) -> None:
        """Close every connection; later calls raise ``StoreError``. Closing twice is harmless."""
        if self._closed:
            return
        self._closed = True
        with self._readers_lock:
            readers, self._all_readers, self._readers = self._all_readers, [], []
        for conn in readers:
            conn.close()
        self._writer.close()
