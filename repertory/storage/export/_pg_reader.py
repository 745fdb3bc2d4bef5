"""The export reader of ``PostgresSessionStore``: one ``REPEATABLE READ`` read-only transaction.

Every table's position is a transaction id. PostgreSQL stamps each row version with the id of the
transaction that wrote it (``xmin``; an ``UPDATE`` writes a new version), and a snapshot tells which
ids may still commit later: every id below the snapshot's ``xmin`` has finished. So a scan takes the
rows whose ``xmin`` is at or above the previous position, and the new position is this snapshot's
``xmin``. Rows written by transactions that finished while an older one was still running sit at or
above the new position too; they are flagged for re-reading, and the exporter's fingerprints keep
them from being written twice. This is exact for inserts and updates alike, on every table.

``xmin`` is 32 bits and wraps; the full 64-bit id of a visible row is rebuilt from the snapshot's
``xmax`` (a visible row is always less than 2^31 transactions older than it).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from types import TracebackType
from typing import Any

import psycopg
from pydantic import JsonValue

from repertory.storage.export._readers import Page, RevisionRow, TableScan, reader_for
from repertory.storage.postgres import PostgresSessionStore

__all__ = ["PgExportReader"]

PAGE = 20_000


def _xid(alias: str) -> str:
    """The 64-bit transaction id of a row version, from its 32-bit ``xmin`` and the snapshot's ``xmax``."""
    return (
        f"(%(xmax)s::bigint - ((%(xmax)s::bigint %% 4294967296) - {alias}.xmin::text::bigint + 4294967296) "
        f"%% 4294967296)"
    )


_TABLES: dict[str, tuple[str, str]] = {  # table -> (select list, from clause); alias ``t`` is the row
    "sessions": ("t.session_id, t.record", "repertory.sessions AS t"),
    "threads": (
        "t.thread_id, t.head, t.created_at, t.updated_at, COALESCE(h.depth, 0)",
        "repertory.threads AS t LEFT JOIN repertory.history_revisions AS h ON h.id = t.head",
    ),
    "runs": ("t.run_id, t.state", "repertory.runs AS t"),
    "entries": ("t.id, t.created_at, t.message", "repertory.history_entries AS t"),
    "revisions": ("t.id, t.parent_id, t.entry_id, t.depth, t.created_at", "repertory.history_revisions AS t"),
    "turns": ("t.submission_id, t.record", "repertory.turns AS t"),
    "events": ("t.session_id, t.seq, t.submission_id, t.type, t.at, t.data", "repertory.events AS t"),
}

_LINEAGE = """
WITH RECURSIVE lineage(id, parent_id, entry_id, depth, created_at) AS (
    SELECT id, parent_id, entry_id, depth, created_at FROM repertory.history_revisions
    WHERE id = %(rev)s AND id IS DISTINCT FROM %(stop)s
    UNION ALL
    SELECT r.id, r.parent_id, r.entry_id, r.depth, r.created_at
    FROM repertory.history_revisions AS r JOIN lineage AS l ON r.id = l.parent_id
    WHERE r.id IS DISTINCT FROM %(stop)s
)
SELECT id, parent_id, entry_id, depth, created_at FROM lineage
"""


class PgExportReader:
    """Reads one PostgreSQL store inside a single read-only snapshot on one pooled connection."""

    backend = "postgres"

    def __init__(self, store: PostgresSessionStore) -> None:
        self._store = store
        self.source = f"postgres:{store.url}"
        self._stack: contextlib.AsyncExitStack | None = None
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._xmin = 0
        self._xmax = 0
        self._cursors = 0

    @contextlib.contextmanager
    def _errors(self) -> Any:
        try:
            yield
        except psycopg.Error as exc:
            raise self._store.failure("export", exc) from None

    @property
    def conn(self) -> psycopg.AsyncConnection[Any]:
        assert self._conn is not None, "use the reader inside 'async with'"
        return self._conn

    async def __aenter__(self) -> PgExportReader:
        stack = contextlib.AsyncExitStack()
        try:
            self._conn = await stack.enter_async_context(self._store.connection("export"))
            with self._errors():
                await stack.enter_async_context(self._conn.transaction())
                await self._conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                cur = await self._conn.execute(
                    "SELECT pg_snapshot_xmin(s)::text::bigint, pg_snapshot_xmax(s)::text::bigint "
                    "FROM pg_current_snapshot() AS s"
                )
                row = await cur.fetchone()
        except BaseException:
            await stack.aclose()
            raise
        assert row is not None
        self._xmin, self._xmax = int(row[0]), int(row[1])
        self._stack = stack
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        stack, self._stack, self._conn = self._stack, None, None
        if stack is not None:
            with self._errors():
                await stack.aclose()

    async def _pages(self, sql: str, params: dict[str, Any], shape: Callable[[list[Any]], Page]) -> AsyncIterator[Page]:
        self._cursors += 1
        with self._errors():
            async with self.conn.cursor(name=f"repertory_export_{self._cursors}") as cur:
                await cur.execute(sql, params)
                while rows := await cur.fetchmany(PAGE):
                    yield shape(rows)

    async def scan(self, table: str, position: JsonValue) -> TableScan:
        """Row versions written by transactions at or after ``position``; the new position is the snapshot's xmin."""
        select, source = _TABLES[table]
        prev = int(position) if isinstance(position, int) else 0
        sql = f"SELECT {select}, {_xid('t')} >= %(xmin)s FROM {source}"
        if prev:
            sql += f" WHERE {_xid('t')} >= %(prev)s"
        params = {"xmax": self._xmax, "xmin": self._xmin, "prev": prev}

        def shape(rows: list[Any]) -> Page:
            return Page([tuple(r[:-1]) for r in rows], [bool(r[-1]) for r in rows])

        return TableScan(self._xmin, self._pages(sql, params, shape))

    async def lineage(self, revision_id: str, stop: str | None) -> list[RevisionRow]:
        """One recursive query from ``revision_id`` back to (not including) ``stop``."""
        with self._errors():
            cur = await self.conn.execute(_LINEAGE, {"rev": revision_id, "stop": stop})
            rows = await cur.fetchall()
        rows.sort(key=lambda r: -r[3])
        return [(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    async def entries(self, entry_ids: Sequence[str]) -> list[tuple[str, int, str]]:
        """Point reads by id."""
        with self._errors():
            cur = await self.conn.execute(
                "SELECT id, created_at, message FROM repertory.history_entries WHERE id = ANY(%s)", (list(entry_ids),)
            )
            return [(r[0], r[1], r[2]) for r in await cur.fetchall()]


@reader_for.register
def _(store: PostgresSessionStore) -> PgExportReader:
    return PgExportReader(store)
