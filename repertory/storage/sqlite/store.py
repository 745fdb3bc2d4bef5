"""``SqliteSessionStore``: the embedded default store, one SQLite file in WAL mode.

Why it is shaped this way (measured): a commit in WAL with
``synchronous=NORMAL`` costs ~80 us, less than one hop to a worker thread, so short statements
(commits, single-row reads) run inline on the event loop's thread. Reads that grow with the data
(a whole history, a run listing) go to a worker thread on a reader connection of their own, which
WAL lets run beside the writer. Writes take ``BEGIN IMMEDIATE`` so two processes sharing a file
queue on the busy timeout instead of failing with "database is locked" on lock upgrade.

Group commit (on by default): concurrent commits and short writes share one transaction (run
straight through; a savepoint each only when one of them failed), so the per-transaction cost
(``COMMIT``, the WAL pages, the sync with ``"full"``) is paid once per batch; each write keeps
its own guards and its own error, and returns only after the batch committed. See
``_group_commit``.

Durability: ``"normal"`` (WAL + ``synchronous=NORMAL``) survives a process crash and may lose the
last commits on power loss; ``"full"`` (``synchronous=FULL``) syncs every commit and survives
power loss too.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from repertory.core.budget import SpendDelta
from repertory.core.history import MessageHistory
from repertory.core.ids import now_ms
from repertory.core.state import RunState, RunStatus, ThreadState
from repertory.core.store import DeletedRows, StoreAliases
from repertory.core.tree import SessionEvent, SessionRecord, TurnRecord
from repertory.errors import CommitConflict, StoreError
from repertory.storage.commit_plan import (
    check_event_sessions,
    check_head_move,
    check_stored_state,
    plan_commit,
    plan_head_move,
)
from repertory.storage.history_cache import DEFAULT_HISTORY_CACHE_BYTES
from repertory.storage.history_gc import commit_pins, head_move_pins
from repertory.storage.lineage import decode_lineage
from repertory.storage.queries import runs_query
from repertory.storage.readback import read_record, read_records
from repertory.storage.sqlite._budget_tables import SpendStatement, SqliteBudgetTables, spend_statement
from repertory.storage.sqlite._delete import delete_sessions
from repertory.storage.sqlite._history import INSERT_REVISIONS, HistoryRows, history_rows, write_history
from repertory.storage.sqlite._inbox_tables import SqliteInboxTables
from repertory.storage.sqlite._memory_tables import SqliteMemoryTables
from repertory.storage.sqlite._time_tables import SqliteTimeTables
from repertory.storage.sqlite._tree_tables import (
    INSERT_PIN,
    SqliteTreeTables,
    insert_events,
    write_session,
    write_turn,
)
from repertory.storage.sqlite.connection import Durability, connect, db_errors, store_error, use_wal
from repertory.storage.sqlite.schema import check_file, ensure_schema

__all__ = [
    "INSERT_REVISIONS",
    "LINEAGE_SQL",
    "UPSERT_RUN",
    "UPSERT_THREAD",
    "Durability",
    "SqliteSessionStore",
    "run_row",
]

# The statements and row shape of a commit are public so ``benchmarks.store`` can time a raw sqlite3
# loop that runs exactly them: a benchmark that drifts from the store's SQL would measure nothing.

LINEAGE_SQL = """
WITH RECURSIVE lineage(id, parent_id, entry_id, depth, created_at, entry_created_at, message) AS (
    SELECT id, parent_id, entry_id, depth, created_at, entry_created_at, message FROM history_revisions WHERE id = ?
    UNION ALL
    SELECT r.id, r.parent_id, r.entry_id, r.depth, r.created_at, r.entry_created_at, r.message
    FROM history_revisions AS r JOIN lineage AS l ON r.id = l.parent_id
)
SELECT l.id, l.parent_id, l.entry_id, l.depth, l.created_at,
       COALESCE(l.entry_created_at, e.created_at), COALESCE(l.message, e.message)
FROM lineage AS l LEFT JOIN history_entry_rows AS e ON l.message IS NULL AND e.id = l.entry_id
WHERE l.message IS NOT NULL OR e.id IS NOT NULL
"""
"""A revision's message is in its own row (``message``) or, when another revision named its entry
first, in ``history_entry_rows``; a revision whose message is in neither is left out, as a lineage
with a gap (``decode_lineage`` refuses it)."""

UPSERT_RUN = """
INSERT INTO runs (run_id, thread_id, status, updated_at, write_seq, token, state)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (run_id) DO UPDATE SET
    status = excluded.status, updated_at = excluded.updated_at,
    write_seq = excluded.write_seq, token = excluded.token, state = excluded.state
"""

_HOLDS_REVISION = "SELECT 1 FROM history_revisions WHERE id = ?"
_DEPTH = "SELECT depth FROM history_revisions WHERE id = ?"
INLINE_LINEAGE = 64
"""A lineage of at most this many revisions is read inline, on the event loop: a hop to a worker
thread (~90 us here, with the reader pool's) costs more than such a read (~20 us for two revisions)
and less only for long ones; decoding, which runs on the loop either way, costs about twice the read."""
# A commit's guards ride its writes (no read first): the run row changes only while the stored run
# is not finished, and the head moves only from ``base_revision_id``; a write that changes no row
# is the conflict, and only then is the stored state read, to say which guard refused.
COMMIT_RUN = UPSERT_RUN.rstrip() + "\nWHERE runs.status NOT IN ('done', 'cancelled')\n"
MOVE_THREAD = "UPDATE threads SET head = ?, updated_at = ? WHERE thread_id = ? AND head = ?"
FIRST_HEAD = """
INSERT INTO threads (thread_id, head, created_at, updated_at) VALUES (?, ?, ?, ?)
ON CONFLICT (thread_id) DO UPDATE SET head = excluded.head, updated_at = excluded.updated_at
WHERE threads.head IS NULL
"""
GUARD_READ = (
    "SELECT t.thread_id, t.head, r.status, r.token FROM (SELECT 1) "
    "LEFT JOIN threads AS t ON t.thread_id = ? LEFT JOIN runs AS r ON r.run_id = ?"
)
UPSERT_THREAD = """
INSERT INTO threads (thread_id, head, created_at, updated_at) VALUES (?, ?, ?, ?)
ON CONFLICT (thread_id) DO UPDATE SET head = excluded.head, updated_at = excluded.updated_at
"""


_last_write_seq = 0


def _next_write_seq() -> int:
    """Write order for ``list_runs`` ties: a microsecond clock that never repeats in this process.

    A clock rather than ``MAX(write_seq) + 1`` keeps an index off a row written every step (each
    index is another page in the WAL per commit); across processes it still orders writes by time.
    """
    global _last_write_seq
    _last_write_seq = max(_last_write_seq + 1, time.time_ns() // 1000)
    return _last_write_seq


def run_row(run: RunState) -> tuple[str, str, str, int, int, str | None, str]:
    """The ``runs`` row of a checkpoint, as ``UPSERT_RUN`` takes it (the next write order included)."""
    token = None if run.suspended_on is None else run.suspended_on.token
    return (run.run_id, run.thread_id, run.status, run.updated_at, _next_write_seq(), token, run.model_dump_json())


@dataclass(slots=True, eq=False)
class _CommitWrite:
    """A commit's statements with the rows they write, run by the writer inside its transaction.

    An object rather than a closure: a closure over these values made a cell per value, a
    function per statement group and a tuple of cells, each a tracked object for the cyclic
    collector, and under group commit a write waits in its queue long enough for them to be
    promoted to the oldest generation (issue 21). Measured under the concurrency benchmark's load
    (3,000 sessions, 100 ms model): 378 objects promoted per turn, 50 of them cells, before; 331 after.
    """

    run: RunState
    thread: ThreadState
    base_revision_id: str | None
    redeem_token: str | None
    history_values: HistoryRows
    pins: Sequence[tuple[str, str]]
    run_values: tuple[Any, ...]
    head_sql: str
    head_row: tuple[str | int | None, ...]
    events: Sequence[SessionEvent]
    turn: TurnRecord | None
    session: SessionRecord | None
    spend: SpendStatement | None

    def __call__(self, conn: sqlite3.Connection) -> None:
        tid = self.thread.thread_id
        if self.redeem_token is not None:
            self.check(conn)
        # Sharing is recorded where it is created (``history_gc``); a step that shares nothing,
        # the usual case, writes no row more than before.
        write_history(conn, self.history_values, tid)
        if self.pins:
            conn.executemany(INSERT_PIN, self.pins)
        # The run before the head: a refused head is then read as it was stored (the guards' order).
        if conn.execute(COMMIT_RUN, self.run_values).rowcount == 0:
            self.refuse(conn)
        if conn.execute(self.head_sql, self.head_row).rowcount == 0:
            self.refuse(conn)
        if self.events:
            insert_events(conn, self.events)
        if self.turn is not None:
            write_turn(conn, self.turn)
        if self.session is not None:
            write_session(conn, self.session)
        if self.spend is not None:
            conn.execute(*self.spend)

    def check(self, conn: sqlite3.Connection) -> None:
        """Raise the ``CommitConflict`` of the guard the stored state fails, if one does."""
        run = self.run
        found, head, status, token = conn.execute(GUARD_READ, (self.thread.thread_id, run.run_id)).fetchone()
        check_stored_state(
            run, self.thread, self.base_revision_id, head, found is not None, status, self.redeem_token, token
        )

    def refuse(self, conn: sqlite3.Connection) -> None:
        """Raise the ``CommitConflict`` of the guard the stored state fails (a refused write's reason)."""
        self.check(conn)
        run_id = self.run.run_id
        raise CommitConflict(f"commit of run {run_id!r} refused by the stored state", run_id=run_id)


class SqliteSessionStore(
    SqliteTreeTables, SqliteMemoryTables, SqliteTimeTables, SqliteInboxTables, SqliteBudgetTables, StoreAliases
):
    """A ``TreeStore`` in one SQLite file (or in memory for ``":memory:"``)."""

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        durability: Durability = "normal",
        *,
        group_commit: bool = True,
        history_cache_bytes: int = DEFAULT_HISTORY_CACHE_BYTES,
    ) -> SqliteSessionStore:
        """Open or create the database at ``path`` and make sure its schema is current.

        ``group_commit`` (default on) coalesces concurrent writes into shared transactions; off,
        every write is a transaction of its own (the comparison ``benchmarks.group_commit`` makes).
        ``history_cache_bytes`` is the budget of decoded history kept for ``load_history``
        (``repertory.storage.history_cache``; 0 turns it off).
        Raises ``StoreError`` for a file that is not a SQLite database, a truncated one, another
        application's database, a newer schema, or a folder that cannot be written.
        """
        if durability not in ("normal", "full"):
            raise StoreError(f"durability must be 'normal' or 'full', not {durability!r}")
        target = os.fspath(path)
        memory = target in ("", ":memory:")
        # Absolute, so reader connections opened later name the same file whatever the cwd is then.
        location = ":memory:" if memory else os.path.abspath(target)
        if not memory:
            check_file(target)
            parent = os.path.dirname(location)
            if not os.path.isdir(parent):
                raise StoreError(f"sqlite: folder {parent!r} for database {target!r} does not exist")
        with db_errors(f"opening {target!r}"):
            conn = connect(":memory:" if memory else target, uri=False, durability=durability, wal=False)
        try:
            ensure_schema(conn, repr(target))
            if not memory:
                # Only once the file is known to be ours: WAL mode persists in the file itself.
                use_wal(conn, target)
        except sqlite3.Error as exc:
            conn.close()
            raise store_error(f"preparing {target!r}", exc) from exc
        except BaseException:
            conn.close()
            raise
        return cls(location, conn, durability, memory, group_commit, history_cache_bytes)

    # -- runs and threads -------------------------------------------------------------------------

    async def load_run(self, run_id: str) -> RunState | None:
        """A copy of the run's checkpoint, or ``None``."""
        self._check_open()
        with db_errors("load_run"):
            row = self._writer.execute("SELECT state FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else read_record(RunState, row[0], what="run", row_id=run_id)

    async def list_runs(
        self, thread_id: str | None = None, *, statuses: Sequence[RunStatus] | None = None, limit: int | None = None
    ) -> list[RunState]:
        """Runs newest-updated first, ties broken by most recent write; optionally filtered and capped.

        ``statuses`` and ``limit`` keep the engine's per-turn questions ("which runs of this
        thread are still open?", "which is the latest?") from decoding a thread's whole past; such a
        bounded query runs inline, an unbounded listing on a reader thread.
        """
        sql, params = runs_query(thread_id, statuses, limit, "?")

        def query(conn: sqlite3.Connection) -> list[tuple[str, str]]:
            return conn.execute(sql, params).fetchall()

        if thread_id is not None and (statuses is not None or limit is not None):
            self._check_open()
            with db_errors("list_runs"):
                rows = query(self._writer)
        else:
            rows = await self.read("list_runs", query)
        return read_records(RunState, rows, what="run")

    async def delete_run(self, run_id: str) -> None:
        """Remove the run row only."""
        await self._write(
            "delete_run", lambda conn: conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,)), atomic=False
        )

    async def load_thread(self, thread_id: str) -> ThreadState | None:
        """A copy of the thread head, or ``None``."""
        self._check_open()
        with db_errors("load_thread"):
            row = self._writer.execute(
                "SELECT head, created_at, updated_at FROM threads WHERE thread_id = ?", (thread_id,)
            ).fetchone()
        if row is None:
            return None
        return ThreadState(thread_id=thread_id, history_revision_id=row[0], created_at=row[1], updated_at=row[2])

    async def save(self, run: RunState) -> None:
        """Write the run row unconditionally."""
        row = run_row(run)
        await self._write("save", lambda conn: conn.execute(UPSERT_RUN, row), atomic=False)

    async def delete_sessions(self, session_ids: Sequence[str]) -> DeletedRows:
        """Delete sessions and what is theirs alone, in one write transaction (``TreeStore.delete_sessions``)."""
        ids = list(session_ids)
        if not ids:
            return DeletedRows()
        return await self._write("delete_sessions", lambda conn: delete_sessions(conn, ids))

    # -- history ----------------------------------------------------------------------------------

    async def load_history(self, revision_id: str) -> MessageHistory | None:
        """The lineage of ``revision_id``, root first: what the history cache lacks, in one recursive query.

        Whether the head still exists is always asked of the database (a deletion may have
        collected it); when the cache holds the whole lineage that is all that is asked, inline.
        A lineage shorter than ``INLINE_LINEAGE`` (its depth is read first, one index lookup) is
        read inline too, a longer one on a worker thread (``read``).
        """
        self._check_open()
        cached = self.history_cache.walk(revision_id)
        missing = cached.missing
        if missing is None:
            with db_errors("load_history"):
                held = self._writer.execute(_HOLDS_REVISION, (revision_id,)).fetchone() is not None
            return cached.history(revision_id) if held else None
        with db_errors("load_history"):
            depth = self._writer.execute(_DEPTH, (missing,)).fetchone()
        if depth is None:
            return None  # the lineage's first missing revision is not stored: nor is the lineage

        def query(conn: sqlite3.Connection) -> list[Any] | None:
            rows = conn.execute(LINEAGE_SQL, (missing,)).fetchall()
            # Asked after the rows: a head that exists now keeps the lineage just read.
            if cached.revisions and conn.execute(_HOLDS_REVISION, (revision_id,)).fetchone() is None:
                return None
            return rows

        if depth[0] <= INLINE_LINEAGE:  # a depth counts the revisions down to the root
            with db_errors("load_history"):
                rows = query(self._writer)
        else:
            rows = await self.read("load_history", query)
        if not rows:
            return None
        return decode_lineage(revision_id, rows, self.history_cache, cached)

    def _holds(self, revision_id: str) -> bool:
        row = self._writer.execute(_HOLDS_REVISION, (revision_id,)).fetchone()
        return row is not None

    async def commit_session(
        self,
        *,
        run: RunState,
        thread: ThreadState,
        history: MessageHistory,
        base_revision_id: str | None = None,
        redeem_token: str | None = None,
        events: Sequence[SessionEvent] = (),
        turn: TurnRecord | None = None,
        session: SessionRecord | None = None,
        spend: SpendDelta | None = None,
    ) -> None:
        """One transaction (shared with concurrent commits under group commit): guards, history delta, run row, head.

        The rows are serialised before the write is queued, so the writer holds the lock for the
        statements alone. A step costs one statement per table it writes, reads included: the
        guards ride the writes (``COMMIT_RUN``, ``MOVE_THREAD``, ``FIRST_HEAD``, the events'
        gap check), the history delta is one multi-row insert per table, and ``turn``/``session``
        are one ``UPDATE`` each, and so is ``spend`` (its ledgers', after the guards: a refused
        commit adds nothing; none when it spent nothing). Only a redemption reads first, so the
        token is compared in constant time before anything is written.
        """
        self._check_open()
        check_event_sessions(events, thread.thread_id)
        with db_errors("commit_session"):
            delta = plan_commit(run, thread, history, base_revision_id, self._holds)
        # Serialise before taking the write lock, so the lock is held for the statements alone.
        run_values = run_row(run)
        tid = thread.thread_id
        history_values = history_rows(history, delta, tid, base_revision_id)
        head_row: tuple[str | int | None, ...]
        if base_revision_id is None:
            head_sql, head_row = FIRST_HEAD, (tid, thread.history_revision_id, thread.created_at, thread.updated_at)
        else:
            head_sql, head_row = MOVE_THREAD, (thread.history_revision_id, thread.updated_at, tid, base_revision_id)
        pinned = commit_pins(delta.revisions, history.revision_id, base_revision_id)
        pins = [(revision_id, tid) for revision_id in pinned] if pinned else ()
        write = _CommitWrite(
            run, thread, base_revision_id, redeem_token, history_values, pins, run_values, head_sql, head_row,
            events, turn, session, spend_statement(spend),
        )  # fmt: skip
        await self._write("commit_session", write)

    async def move_head(self, thread_id: str, *, history: MessageHistory, base_revision_id: str | None) -> None:
        """One transaction: compare-and-set on the thread head, the revisions it lacks, the new head."""
        self._check_open()
        with db_errors("move_head"):
            delta = plan_head_move(history, thread_id, self._holds)
        # A head move's revisions have no writer: no deletion collects them (``history_gc``).
        history_values = history_rows(history, delta, None, base_revision_id)
        head, at = history.revision_id, now_ms()
        pins = [(pinned, thread_id) for pinned in head_move_pins(delta.revisions, head, base_revision_id)]

        def apply(conn: sqlite3.Connection) -> None:
            row = conn.execute("SELECT head FROM threads WHERE thread_id = ?", (thread_id,)).fetchone()
            check_head_move(thread_id, base_revision_id, row is not None, None if row is None else row[0])
            write_history(conn, history_values, None)
            conn.executemany(INSERT_PIN, pins)
            conn.execute("UPDATE threads SET head = ?, updated_at = ? WHERE thread_id = ?", (head, at, thread_id))

        await self._write("move_head", apply)
