"""``PostgresSessionStore``: the cluster store, for when one machine is outgrown.

psycopg 3 (async) with a connection pool. A commit is one call of a server-side function (see
``_pg_schema``), so it costs one round trip however many guards it checks, and several processes
on several machines can share the database safely: the thread head is compare-and-set under a row
lock and a resume token is redeemed by a conditional check in the same transaction. With group
commit (the default) concurrent commits share that round trip and transaction (``_pg_group``).

Failures are bounded and clear: an unreachable server, a refused login or a missing database raise
``StoreError`` at open within ``connect_timeout``; a server restart mid-run makes the commits in
flight raise ``StoreError`` (each one landed whole or not at all) and the pool reconnects. The
password never appears in a message: every error text is passed through ``redact``.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from repertory.core.budget import SpendDelta
from repertory.core.history import MessageHistory
from repertory.core.ids import now_ms
from repertory.core.state import RunState, RunStatus, ThreadState
from repertory.core.store import StoreAliases
from repertory.core.tree import SessionEvent, SessionRecord, TurnRecord
from repertory.errors import StoreError
from repertory.storage.commit_plan import check_head_move, plan_commit_async, plan_head_move_async
from repertory.storage.group_commit import take_switch
from repertory.storage.history_cache import DEFAULT_HISTORY_CACHE_BYTES
from repertory.storage.history_gc import base_namers, head_move_pins
from repertory.storage.lineage import decode_lineage
from repertory.storage.postgres._budget_tables import PgBudgetTables, lone_spend_sql, spend_arrays, spend_params
from repertory.storage.postgres._group import COMMIT_SQL, PgCommitWriter
from repertory.storage.postgres._inbox_tables import PgInboxTables
from repertory.storage.postgres._memory_tables import PgMemoryTables
from repertory.storage.postgres._time_tables import PgTimeTables
from repertory.storage.postgres._tree_tables import PgTreeTables, event_arrays, merged_session, merged_turn
from repertory.storage.postgres.connection import normalise_url, redact
from repertory.storage.postgres.schema import (
    MIGRATION_LOCK,
    MIGRATIONS,
    SCHEMA,
    SCHEMA_VERSION,
)
from repertory.storage.queries import runs_query
from repertory.storage.readback import read_record, read_records

__all__ = ["COMMIT_SQL", "LINEAGE_SQL", "UPSERT_RUN", "PostgresSessionStore", "event_arrays", "redact"]

# ``COMMIT_SQL`` (a lone commit), ``LINEAGE_SQL``, ``UPSERT_RUN`` and ``event_arrays`` are public so
# ``benchmarks.store`` can time raw psycopg loops that run exactly the store's statements.


LINEAGE_SQL = """
WITH RECURSIVE lineage(id, parent_id, entry_id, depth, created_at) AS (
    SELECT id, parent_id, entry_id, depth, created_at FROM repertory.history_revisions WHERE id = %s
    UNION ALL
    SELECT r.id, r.parent_id, r.entry_id, r.depth, r.created_at
    FROM repertory.history_revisions AS r JOIN lineage AS l ON r.id = l.parent_id
)
SELECT l.id, l.parent_id, l.entry_id, l.depth, l.created_at, e.created_at, e.message
FROM lineage AS l JOIN repertory.history_entries AS e ON e.id = l.entry_id
"""

_HOLDS_REVISION = "SELECT 1 FROM repertory.history_revisions WHERE id = %s"

UPSERT_RUN = """
INSERT INTO repertory.runs (run_id, thread_id, status, updated_at, write_seq, token, state)
VALUES (%s, %s, %s, %s, nextval('repertory.runs_write_seq'), %s, %s)
ON CONFLICT (run_id) DO UPDATE SET
    thread_id = excluded.thread_id, status = excluded.status, updated_at = excluded.updated_at,
    write_seq = excluded.write_seq, token = excluded.token, state = excluded.state
"""

_PING_AFTER_IDLE_S = 1.0

# A checkpoint carrying a turn's or a session's rewrite (``commit_session(turn=, session=)``): the
# rows locked and read together, then written by the same statement as the commit function's call
# (data-modifying CTEs), so the lot is two round trips in one transaction.
_LOCK_TURN_AND_SESSION = (
    "SELECT (SELECT record FROM repertory.turns WHERE submission_id = %s FOR UPDATE), "
    "(SELECT record FROM repertory.sessions WHERE session_id = %s FOR UPDATE)"
)
_REWRITE_TURN = "t AS (UPDATE repertory.turns SET status = %s, record = %s WHERE submission_id = %s)"
_REWRITE_SESSION = "s AS (UPDATE repertory.sessions SET record = %s WHERE session_id = %s)"


# When each pooled connection last went back to its pool. Kept beside the connections rather than
# as an attribute stuck onto psycopg's objects; weak, so a connection the pool drops is forgotten.
_RETURNED_AT: weakref.WeakKeyDictionary[psycopg.AsyncConnection[Any], float] = weakref.WeakKeyDictionary()


async def _mark_returned(conn: psycopg.AsyncConnection[Any]) -> None:
    _RETURNED_AT[conn] = time.monotonic()


async def _check_if_idle(conn: psycopg.AsyncConnection[Any]) -> None:
    """Ping a pooled connection only if it sat idle: a busy one just proved itself.

    Pinging every checkout costs a round trip per commit (-16% to -21% measured); a connection
    idle for a second may have outlived a server restart, so that one is checked and replaced.
    """
    returned = _RETURNED_AT.get(conn, 0.0)
    if time.monotonic() - returned > _PING_AFTER_IDLE_S:
        await AsyncConnectionPool.check_connection(conn)


class PostgresSessionStore(
    PgCommitWriter, PgTreeTables, PgMemoryTables, PgTimeTables, PgInboxTables, PgBudgetTables, StoreAliases
):
    """A ``TreeStore`` in a PostgreSQL database (tables in the ``repertory`` schema)."""

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 16,
        connect_timeout: float = 5.0,
        pool_timeout: float = 10.0,
        group_commit: bool | None = None,
        history_cache_bytes: int = DEFAULT_HISTORY_CACHE_BYTES,
    ) -> PostgresSessionStore:
        """Connect, migrate the schema, and open a pool of up to ``max_size`` connections.

        ``pool_timeout`` bounds how long a call waits for a pooled connection (for instance while
        the server restarts) before it raises ``StoreError``. ``group_commit`` (default on; also
        ``?group_commit=off`` in the URL, which the argument overrides) sends concurrent commits
        to the server together, one transaction and one round trip per batch (``_pg_group``).
        ``history_cache_bytes`` is the budget of decoded history kept for ``load_history``
        (``repertory.storage.history_cache``; 0 turns it off).
        """
        url, in_url = take_switch(url, "group_commit")
        grouped = group_commit if group_commit is not None else in_url if in_url is not None else True
        conninfo, password = normalise_url(url, connect_timeout)
        try:
            # One direct connection first: it fails with the server's own reason (refused login,
            # missing database), which a pool would hide behind a timeout.
            conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise StoreError(
                f"postgres: cannot connect to {redact(url, password)}: {redact(str(exc), password)}"
            ) from None
        try:
            async with conn:
                await _migrate(conn)
        except psycopg.Error as exc:
            raise StoreError(f"postgres: preparing the schema failed: {redact(str(exc), password)}") from None
        pool = AsyncConnectionPool(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            open=False,
            timeout=pool_timeout,
            kwargs={"autocommit": True},
            check=_check_if_idle,
            reset=_mark_returned,
            reconnect_timeout=max(pool_timeout, 30.0),
            name="repertory",
        )
        try:
            await pool.open(wait=True, timeout=connect_timeout + pool_timeout)
        except (PoolTimeout, psycopg.Error) as exc:
            await pool.close()
            raise StoreError(
                f"postgres: cannot open a pool to {redact(url, password)}: {redact(str(exc), password)}"
            ) from None
        return cls(pool, conninfo, password, grouped, history_cache_bytes)

    # -- runs and threads -------------------------------------------------------------------------

    async def load_run(self, run_id: str) -> RunState | None:
        """A copy of the run's checkpoint, or ``None``."""
        async with self.connection("load_run") as conn:
            cur = await conn.execute("SELECT state FROM repertory.runs WHERE run_id = %s", (run_id,))
            row = await cur.fetchone()
        return None if row is None else read_record(RunState, row[0], what="run", row_id=run_id)

    async def list_runs(
        self, thread_id: str | None = None, *, statuses: Sequence[RunStatus] | None = None, limit: int | None = None
    ) -> list[RunState]:
        """Runs newest-updated first, ties broken by most recent write; optionally filtered and capped."""
        sql, params = runs_query(thread_id, statuses, limit, "%s", "repertory.runs")
        async with self.connection("list_runs") as conn:
            cur = await conn.execute(sql, params)
            rows = await cur.fetchall()
        return read_records(RunState, ((r[0], r[1]) for r in rows), what="run")

    async def delete_run(self, run_id: str) -> None:
        """Remove the run row only."""
        async with self.connection("delete_run") as conn:
            await conn.execute("DELETE FROM repertory.runs WHERE run_id = %s", (run_id,))

    async def load_thread(self, thread_id: str) -> ThreadState | None:
        """A copy of the thread head, or ``None``."""
        async with self.connection("load_thread") as conn:
            cur = await conn.execute(
                "SELECT head, created_at, updated_at FROM repertory.threads WHERE thread_id = %s", (thread_id,)
            )
            row = await cur.fetchone()
        if row is None:
            return None
        return ThreadState(thread_id=thread_id, history_revision_id=row[0], created_at=row[1], updated_at=row[2])

    async def save(self, run: RunState) -> None:
        """Write the run row unconditionally."""
        token = None if run.suspended_on is None else run.suspended_on.token
        async with self.connection("save") as conn:
            await conn.execute(
                UPSERT_RUN, (run.run_id, run.thread_id, run.status, run.updated_at, token, run.model_dump_json())
            )

    # -- history ----------------------------------------------------------------------------------

    async def load_history(self, revision_id: str) -> MessageHistory | None:
        """The lineage of ``revision_id``, root first: what the history cache lacks, in one recursive query.

        Whether the head still exists is always asked of the database (a deletion may have
        collected it); when the cache holds the whole lineage that is all that is asked.
        """
        cached = self.history_cache.walk(revision_id)
        missing = cached.missing
        async with self.connection("load_history") as conn:
            rows: list[Any] = []
            if missing is not None:
                cur = await conn.execute(LINEAGE_SQL, (missing,))
                rows = await cur.fetchall()
                if not rows:
                    return None
            if cached.revisions:
                # Asked after the rows: a head that exists now keeps the lineage just read.
                cur = await conn.execute(_HOLDS_REVISION, (revision_id,))
                if await cur.fetchone() is None:
                    return None
        if missing is None:
            return cached.history(revision_id)
        return decode_lineage(revision_id, rows, self.history_cache, cached)

    async def _holds(self, revision_id: str) -> bool:
        async with self.connection("commit_session") as conn:
            cur = await conn.execute(_HOLDS_REVISION, (revision_id,))
            return await cur.fetchone() is not None

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
        """One call of ``repertory_commit`` (alone or in a group-commit batch): guards, delta, run row, head.

        With ``turn`` or ``session`` the call and their rewrites share one transaction of their own,
        outside group commit (the batch function carries commits only): the rows are locked and read
        in one statement and merged here, then the call and both rewrites go as one statement (a
        turn's start and end, so the last checkpoint of a turn is two round trips). ``spend`` rides
        the statement that calls the commit function, whichever it is (``_budget_tables``).
        """
        delta = await plan_commit_async(run, thread, history, base_revision_id, self._holds)
        # An entry the base's lineage names (a compaction's kept message) is stored already: it is
        # not sent, and the commit function records its namers instead of marking it shared.
        again = {} if delta.grows else base_namers(history, base_revision_id, [e.id for e in delta.entries])
        entries = [e for e in delta.entries if e.id not in again] if again else delta.entries
        token = None if run.suspended_on is None else run.suspended_on.token
        params = (
            thread.thread_id, base_revision_id, thread.history_revision_id, thread.created_at, thread.updated_at,
            run.updated_at,
            run.run_id, run.status, token, run.model_dump_json(), redeem_token,
            [e.id for e in entries], [e.created_at for e in entries],
            [e.message.model_dump_json() for e in entries],
            [r.id for r in delta.revisions], [r.parent_id for r in delta.revisions],
            [r.entry_id for r in delta.revisions], [r.depth for r in delta.revisions],
            [r.created_at for r in delta.revisions],
            *event_arrays(events, thread.thread_id),
        )  # fmt: skip
        spent = spend_params(spend)
        if turn is None and session is None:
            await self._write_commit(params, spent)
            return
        if self._closed:
            raise StoreError("store is closed")
        async with self.connection("commit_session") as conn, conn.transaction():
            # The rows to rewrite, locked and read in one statement (their JSON is merged here: the
            # server cannot, a message may hold a NUL), then the commit and both rewrites in another.
            cur = await conn.execute(
                _LOCK_TURN_AND_SESSION,
                (None if turn is None else turn.submission_id, None if session is None else session.session_id),
            )
            row = await cur.fetchone()
            assert row is not None
            rewrites: list[str] = []
            values: list[Any] = []
            if turn is not None:
                if row[0] is None:
                    raise StoreError(f"no turn {turn.submission_id!r} to update")
                merged = merged_turn(row[0], turn)
                rewrites.append(_REWRITE_TURN)
                values += (merged.status, merged.model_dump_json(), turn.submission_id)
            if session is not None:
                if row[1] is None:
                    raise StoreError(f"no session {session.session_id!r} to update")
                rewrites.append(_REWRITE_SESSION)
                values += (merged_session(row[1], session).model_dump_json(), session.session_id)
            if spent is None:
                await conn.execute(f"WITH {', '.join(rewrites)} {COMMIT_SQL}", (*values, *params))
            else:
                await conn.execute(lone_spend_sql(COMMIT_SQL, rewrites), (*values, *params, *spend_arrays([spent])))

    async def move_head(self, thread_id: str, *, history: MessageHistory, base_revision_id: str | None) -> None:
        """One transaction: the thread row locked, its head compared, the revisions it lacks, the new head.

        Rare (forks with open calls, runs from a checkpoint), so it is plain statements rather than
        a server-side function and group commit.
        """
        delta = await plan_head_move_async(history, thread_id, self._holds)
        async with self.connection("move_head") as conn, conn.transaction():
            cur = await conn.execute("SELECT head FROM repertory.threads WHERE thread_id = %s FOR UPDATE", (thread_id,))
            row = await cur.fetchone()
            check_head_move(thread_id, base_revision_id, row is not None, None if row is None else row[0])
            if delta.entries:
                await conn.execute(
                    "INSERT INTO repertory.history_entries (id, created_at, message) "
                    "SELECT * FROM unnest(%s::text[], %s::bigint[], %s::text[]) ON CONFLICT (id) DO NOTHING",
                    (
                        [e.id for e in delta.entries],
                        [e.created_at for e in delta.entries],
                        [e.message.model_dump_json() for e in delta.entries],
                    ),
                )
            if delta.revisions:
                await conn.execute(
                    "INSERT INTO repertory.history_revisions (id, parent_id, entry_id, depth, created_at) "
                    "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::int[], %s::bigint[]) "
                    "ON CONFLICT (id) DO NOTHING",
                    (
                        [r.id for r in delta.revisions],
                        [r.parent_id for r in delta.revisions],
                        [r.entry_id for r in delta.revisions],
                        [r.depth for r in delta.revisions],
                        [r.created_at for r in delta.revisions],
                    ),
                )
            await conn.execute(
                "INSERT INTO repertory.history_pins (revision_id, thread_id) "
                "SELECT unnest(%s::text[]), %s ON CONFLICT DO NOTHING",
                (head_move_pins(delta.revisions, history.revision_id, base_revision_id), thread_id),
            )
            await conn.execute(
                "UPDATE repertory.threads SET head = %s, updated_at = %s WHERE thread_id = %s",
                (history.revision_id, now_ms(), thread_id),
            )


async def _migrate(conn: psycopg.AsyncConnection[Any]) -> None:
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        cur = await conn.execute("SELECT to_regclass('repertory.meta') IS NOT NULL")
        row = await cur.fetchone()
        version = 0
        if row is not None and row[0]:
            cur = await conn.execute("SELECT value FROM repertory.meta WHERE key = 'schema_version'")
            found = await cur.fetchone()
            version = int(found[0]) if found else 0
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"postgres: the database has repertory schema version {version}, newer than this "
                f"repertory understands ({SCHEMA_VERSION}); upgrade repertory"
            )
        for target in range(version + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[target]:
                await conn.execute(statement)
            await conn.execute(
                "INSERT INTO repertory.meta (key, value) VALUES ('schema_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(target),),
            )
