"""The export reader of ``SqliteSessionStore``: one read transaction on a pooled reader connection.

Positions, per table:

- ``events`` and ``revisions`` are rowid tables, and SQLite gives a new row a rowid one above the
  largest committed one (writers are serialised), so "rowid above the last position" is exact
  until a deletion takes a table's newest rows and the next rows reuse their rowids. Each such
  deletion records the rowid its table fell back to (``rowid_fallbacks``, schema version 8); a
  position carries the number of the last deletion it saw (``deletions``) and the next scan starts
  at the lowest fallback recorded after it, where every row is new (the deletion took every row
  above it).
- ``entries`` are kept in two places (``repertory.storage.sqlite._history``): inline in the
  revision that wrote them, and in ``history_entry_rows``; the position is a rowid for each.
- ``runs``, ``threads``, ``sessions`` and ``turns`` change in place and carry only clocks
  (``runs.write_seq`` in microseconds, ``updated_at`` in milliseconds). A scan reads ``LAG`` behind
  the highest clock value it saw last time, since a writer in another process stamps a row before it
  waits for the write lock, and flags those rows for re-reading; the exporter's fingerprints keep an
  unchanged re-read row from being written twice.

Reads run on a worker thread (they grow with the data); for ``":memory:"`` they run inline on the
store's own connection, which only that one thread uses.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

from pydantic import JsonValue

from repertory.storage.export._readers import Page, RevisionRow, TableScan, reader_for
from repertory.storage.sqlite import SqliteSessionStore, db_errors
from repertory.storage.sqlite.schema import ROWID_SCANNED, ROWID_TOPS

__all__ = ["SqliteExportReader"]

PAGE = 20_000
LAG_MS = 600_000  # ten minutes behind the last clock position (the busy timeout is ten seconds)
_T = TypeVar("_T")

_LINEAGE = """
WITH RECURSIVE lineage(id, parent_id, entry_id, depth, created_at) AS (
    SELECT id, parent_id, entry_id, depth, created_at FROM history_revisions WHERE id = ? AND id IS NOT ?
    UNION ALL
    SELECT r.id, r.parent_id, r.entry_id, r.depth, r.created_at
    FROM history_revisions AS r JOIN lineage AS l ON r.id = l.parent_id WHERE r.id IS NOT ?
)
SELECT id, parent_id, entry_id, depth, created_at FROM lineage
"""

# table -> (its highest clock, its rows above ``?`` with the clock as last column, clock units per millisecond)
_CLOCKED: dict[str, tuple[str, str, int]] = {
    "runs": ("SELECT MAX(write_seq) FROM runs", "SELECT run_id, state, write_seq FROM runs WHERE write_seq > ?", 1000),
    "threads": (
        "SELECT MAX(updated_at) FROM threads",
        "SELECT t.thread_id, t.head, t.created_at, t.updated_at, COALESCE(r.depth, 0), t.updated_at "
        "FROM threads AS t LEFT JOIN history_revisions AS r ON r.id = t.head WHERE t.updated_at > ?",
        1,
    ),
    "sessions": (
        "SELECT MAX(COALESCE(json_extract(record, '$.updated_at'), 0)) FROM sessions",
        "SELECT session_id, record, COALESCE(json_extract(record, '$.updated_at'), 0) AS u FROM sessions WHERE u > ?",
        1,
    ),
    "turns": (
        "SELECT MAX(COALESCE(json_extract(record, '$.updated_at'), 0)) FROM turns",
        "SELECT submission_id, record, COALESCE(json_extract(record, '$.updated_at'), 0) AS u FROM turns WHERE u > ?",
        1,
    ),
}


class SqliteExportReader:
    """Reads one SQLite store inside a single read transaction (a consistent snapshot)."""

    backend = "sqlite"

    def __init__(self, store: SqliteSessionStore) -> None:
        self._store = store
        memory = store.in_memory
        self.source = f"sqlite::memory:{id(store)}" if memory else f"sqlite:{store.path}"
        self._inline = memory
        self._conn: sqlite3.Connection | None = None
        # One statement at a time on the connection, whichever worker thread runs it (a page is
        # fetched ahead while the exporter converts the last one).
        self._lock = threading.Lock()

    async def _call(self, fn: Callable[[], _T]) -> _T:
        def work() -> _T:
            with self._lock, db_errors("export"):
                return fn()

        if self._inline:
            return work()
        return await asyncio.to_thread(work)

    @property
    def conn(self) -> sqlite3.Connection:
        assert self._conn is not None, "use the reader inside 'async with'"
        return self._conn

    async def __aenter__(self) -> SqliteExportReader:
        self._conn = await self._call(self._store.lend_connection)
        if self._inline:
            # One connection shared with the store's writes: no transaction of our own, and every
            # scan reads its rows in one go, so no write can land between its position and its rows.
            return self

        def begin() -> None:
            self.conn.execute("BEGIN")
            self.conn.execute("SELECT 1 FROM repertory_meta LIMIT 1").fetchall()  # pins the snapshot

        await self._call(begin)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._inline:
            self._store.give_back(conn)
            return

        def end() -> None:
            try:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            finally:
                self._store.give_back(conn)

        await self._call(end)

    def _scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        row = self.conn.execute(sql, params).fetchone()
        return None if row is None else row[0]

    async def _pages(self, sql: str, params: Sequence[Any], shape: Callable[[list[Any]], Page]) -> AsyncIterator[Page]:
        if self._inline:
            rows = await self._call(lambda: self.conn.execute(sql, params).fetchall())
            if rows:
                yield shape(rows)
            return
        cursor = await self._call(lambda: self.conn.execute(sql, params))
        try:
            while rows := await self._call(lambda: cursor.fetchmany(PAGE)):
                yield shape(rows)
        finally:
            cursor.close()

    async def scan(self, table: str, position: JsonValue) -> TableScan:
        """Rows since ``position``: rowids for append-only tables, clocks for mutable ones."""
        if table == "entries":
            return await self._scan_entries(position)
        if table == "revisions":
            return await self._scan_revisions(position)
        if table == "events":
            marks = await self._marks(position)
            at, top = marks.start("events", _pair(position, "events", "events")[0]), marks.tops["events"]
            sql = (
                "SELECT session_id, seq, submission_id, type, at, data FROM events "
                "WHERE rowid > ? AND rowid <= ? ORDER BY rowid"
            )
            return TableScan(marks.position(events=top), self._pages(sql, (at, top), lambda rows: Page(rows)))
        prev = int(position) if isinstance(position, int) else 0
        top_sql, rows_sql, per_ms = _CLOCKED[table]
        top = await self._call(lambda: self._scalar(top_sql))
        new = max(prev, int(top or 0))
        lag = LAG_MS * per_ms
        floor = prev - lag if prev else -(2**62)
        horizon = new - lag

        def shape(rows: list[Any]) -> Page:
            return Page([tuple(r[:-1]) for r in rows], [r[-1] is not None and r[-1] > horizon for r in rows])

        return TableScan(new, self._pages(rows_sql, (floor,), shape))

    async def _marks(self, position: JsonValue) -> _Marks:
        """The rowid tables' tops in this snapshot, and where they fell back since ``position``'s last deletion."""
        seen = position.get("deletions", 0) if isinstance(position, dict) else 0

        def read() -> _Marks:
            tops = dict(zip(ROWID_SCANNED, (int(v) for v in self.conn.execute(ROWID_TOPS).fetchone()), strict=True))
            last = int(self._scalar("SELECT COALESCE(MAX(seq), 0) FROM rowid_fallbacks"))
            fell = self.conn.execute(
                "SELECT tbl, MIN(fell_to) FROM rowid_fallbacks WHERE seq > ? GROUP BY tbl",
                (seen if isinstance(seen, int) else 0,),
            )
            return _Marks(tops, {t: int(v) for t, v in fell}, last)

        return await self._call(read)

    async def _scan_entries(self, position: JsonValue) -> TableScan:
        """Messages inline in revisions above the last position, then entry rows above it that are no copies.

        A copy (``copy_of``) repeats a message its revision holds inline, which this scan writes
        from the revision; a copy whose revision was deleted is a copy no more. A position taken
        before schema version 7 is an entry rowid: every inline message is newer than it.
        """
        marks = await self._marks(position)
        rows_at, revisions_at = _pair(position, "rows", "revisions")
        rows_at, revisions_at = (
            marks.start("history_entry_rows", rows_at),
            marks.start("history_revisions", revisions_at),
        )
        rows_top, revisions_top = marks.tops["history_entry_rows"], marks.tops["history_revisions"]
        sql = (
            "SELECT entry_id, entry_created_at, message FROM history_revisions "
            "WHERE rowid > ? AND rowid <= ? AND message IS NOT NULL "
            "UNION ALL SELECT id, created_at, message FROM history_entry_rows "
            "WHERE rowid > ? AND rowid <= ? AND copy_of IS NULL"
        )
        params = (revisions_at, revisions_top, rows_at, rows_top)
        return TableScan(marks.position(rows=rows_top, revisions=revisions_top), self._pages(sql, params, Page))

    async def _scan_revisions(self, position: JsonValue) -> TableScan:
        """Revisions above the last rowid position (revisions are a rowid table since schema version 7).

        A position taken before that is an entry rowid (the revisions of then were found through
        their entries): the migrated rows are read that way, every row written since is new. A row
        both ways finds (a deletion fell below the migrated rows) is read once (``UNION``).
        """
        marks = await self._marks(position)
        top = marks.tops["history_revisions"]
        columns = "r.id, r.parent_id, r.entry_id, r.depth, r.created_at"
        if isinstance(position, dict) or position is None:
            at = marks.start("history_revisions", _pair(position, "revisions", "revisions")[0])
            sql = f"SELECT {columns} FROM history_revisions AS r WHERE r.rowid > ? AND r.rowid <= ?"
            params: tuple[Any, ...] = (at, top)
        else:
            migrated = int(
                await self._call(
                    lambda: self._scalar(
                        "SELECT COALESCE((SELECT value FROM repertory_meta WHERE key = 'revisions_migrated_v7'), 0)"
                    )
                )
            )
            sql = (
                f"SELECT {columns} FROM history_revisions AS r JOIN history_entry_rows AS e ON e.id = r.entry_id "
                "WHERE r.rowid <= ? AND e.rowid > ? "
                f"UNION SELECT {columns} FROM history_revisions AS r WHERE r.rowid > ? AND r.rowid <= ?"
            )
            since = marks.start("history_revisions", migrated)
            params = (migrated, int(position) if isinstance(position, int) else 0, since, top)
        return TableScan(marks.position(revisions=top), self._pages(sql, params, Page))

    async def lineage(self, revision_id: str, stop: str | None) -> list[RevisionRow]:
        """One recursive query from ``revision_id`` back to (not including) ``stop``."""
        rows = await self._call(lambda: self.conn.execute(_LINEAGE, (revision_id, stop, stop)).fetchall())
        rows.sort(key=lambda r: -r[3])
        return [(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    async def entries(self, entry_ids: Sequence[str]) -> list[tuple[str, int, str]]:
        """Point reads by id in ``history_entry_rows``, then one pass over the revisions for the rest.

        Revisions have no index on entry ids (a step would pay for it), so an entry held inline is
        found by a scan; the exporter asks only for entries its own files lack (a fork's prefix it
        never wrote), which is rare.
        """
        wanted = list(dict.fromkeys(entry_ids))
        found: dict[str, tuple[str, int, str]] = {}

        def read() -> None:
            for i in range(0, len(wanted), 500):
                chunk = wanted[i : i + 500]
                marks = ",".join("?" * len(chunk))
                sql = f"SELECT id, created_at, message FROM history_entry_rows WHERE id IN ({marks})"
                for r in self.conn.execute(sql, chunk):
                    found[r[0]] = (r[0], r[1], r[2])
            rest = [e for e in wanted if e not in found]
            if rest:
                sql = (
                    "SELECT entry_id, entry_created_at, message FROM history_revisions "
                    "WHERE message IS NOT NULL AND entry_id IN (SELECT value FROM json_each(?))"
                )
                for r in self.conn.execute(sql, (json.dumps(rest),)):
                    found.setdefault(r[0], (r[0], r[1], r[2]))

        await self._call(read)
        return [found[e] for e in wanted if e in found]


@dataclass(frozen=True, slots=True)
class _Marks:
    """One snapshot's rowid tops, the lowest rowid each table fell back to since a position, the last deletion."""

    tops: dict[str, int]
    fell: dict[str, int]
    deletions: int

    def start(self, table: str, at: int) -> int:
        """Where a scan of ``table`` positioned at rowid ``at`` resumes: below a fallback since."""
        return min(at, self.fell.get(table, at))

    def position(self, **rowids: int) -> JsonValue:
        """A scan's new position: its rowids and the last deletion this snapshot holds."""
        return {**rowids, "deletions": self.deletions}


def _pair(position: JsonValue, first: str, second: str) -> tuple[int, int]:
    """Two rowid positions from a scan's position: a dict of them, or a pre-version-7 int (the first; the second 0)."""
    if isinstance(position, dict):
        a, b = position.get(first, 0), position.get(second, 0)
        return (a if isinstance(a, int) else 0), (b if isinstance(b, int) else 0)
    return (position if isinstance(position, int) else 0), 0


@reader_for.register
def _(store: SqliteSessionStore) -> SqliteExportReader:
    return SqliteExportReader(store)
