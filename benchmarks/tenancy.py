"""Tenancy benchmark: a key's page of sessions and its counts among 100,000 sessions, SQLite and PostgreSQL.

Run ``python -m benchmarks.tenancy [--quick] [--out PATH]``; it prints a table and writes
``benchmarks/results/tenancy.json``. Nothing here asserts a speed.

Under ``repertory serve`` with keys, every search, listing and count of the web UI runs as
``TreeStore.page_sessions(owner=)`` / ``session_counts(owner=)``. Since schema version 10 the owner
is a column of ``sessions`` with an index (left out for the operator's sessions); before, the
listing tested each session's JSON newest first until a page was full, which for a tenant with
few sessions meant every session back to the oldest. Each store here holds 100,000 sessions
(``--quick`` 10,000): nine tenants share nine tenths of them, one in ten each ("fair"), the
operator (no owner) a tenth, and one tenant ("small") owns ten of the oldest. A tenth of the
sessions, spread over every owner, rest on a run that waits (suspended) or failed (error), so
the counts have something to count. Timed, 20 times each, median:

- the newest page of 50 for the operator (no owner asked), for "fair" and for "small";
- "small"'s page as the listing found it before the index: the same query with the owner tested
  in the record's JSON (``instr`` / ``strpos`` first, then the field), side by side on the same
  rows: what the index replaced;
- the counts of running, suspended and failed sessions for each of the three.

Sessions are written through the store's ``create_session`` (concurrently, so group commit
batches them); the runs they rest on are inserted as rows, as ``commit_session`` leaves them.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks.harness.cli import in_temp_folder, main_of, suite_entry
from benchmarks.harness.model import BenchModel
from benchmarks.harness.report import RESULTS_DIR, Clock, Report, Row, finish, mode_of, row
from benchmarks.harness.tables import table
from repertory.core.ids import new_id
from repertory.core.state import RunState
from repertory.core.store import TreeStore
from repertory.core.tree import SessionRecord
from repertory.storage.postgres.store import PostgresSessionStore
from repertory.storage.sqlite.store import SqliteSessionStore
from repertory.testing.pg_temp import TemporaryPostgres

__all__ = ["NAME", "PLOTS", "REPORT", "StoreFigures", "TenancyReport", "main", "measure", "run_suite"]

NAME = "tenancy"
PLOTS: list[Any] = []
SESSIONS = 100_000
FAIR_TENANTS = 9
SMALL = 10
PAGE = 50
REPEATS = 20
BATCH = 500


class StoreFigures(BenchModel):
    """One store's figures, milliseconds (medians of ``REPEATS``)."""

    store: str
    sessions: int
    resting_runs: int
    create_seconds: float
    page_operator_ms: float
    page_fair_ms: float
    page_small_ms: float
    page_small_scan_ms: float
    counts_operator_ms: float
    counts_fair_ms: float
    counts_small_ms: float


class TenancyReport(Report):
    """``benchmarks/results/tenancy.json``."""

    stores: list[StoreFigures]

    def summarise(self) -> list[Row]:
        """Per store: the small tenant's page through the index against the scan it replaced, and the counts."""
        rows: list[Row] = []
        for s in self.stores:
            rows.append(
                row(f"{s.store}: a page of a tenant with {SMALL} of {s.sessions:,} sessions", s.page_small_ms, "ms",
                    note=f"{s.page_small_scan_ms:.1f} ms as the listing scanned before the owner index "
                         f"({s.page_small_scan_ms / s.page_small_ms:.0f}x); a tenant with one in ten "
                         f"{s.page_fair_ms:.2f} ms, the operator {s.page_operator_ms:.2f} ms")
            )  # fmt: skip
            rows.append(
                row(f"{s.store}: that tenant's counts, {s.resting_runs:,} sessions resting suspended or failed",
                    s.counts_small_ms, "ms",
                    note=f"one in ten {s.counts_fair_ms:.1f} ms, the operator {s.counts_operator_ms:.1f} ms")
            )  # fmt: skip
        return rows

    def render(self) -> str:
        """A table per figure, a row per store."""
        return table(
            "tenancy: pages of 50 and counts, ms (median of 20)",
            ["store", "sessions", "page: operator", "fair", "small", "small, scanned", "counts: operator",
             "fair", "small"],
            [[s.store, f"{s.sessions:,}", f"{s.page_operator_ms:.2f}", f"{s.page_fair_ms:.2f}",
              f"{s.page_small_ms:.2f}", f"{s.page_small_scan_ms:.1f}", f"{s.counts_operator_ms:.1f}",
              f"{s.counts_fair_ms:.1f}", f"{s.counts_small_ms:.1f}"] for s in self.stores],
        )  # fmt: skip


REPORT = TenancyReport


def _owner(i: int) -> str | None:
    """Session ``i``'s owner (``i`` counts from the oldest)."""
    if i < SMALL:
        return "small"
    return None if i % 10 == FAIR_TENANTS else f"fair-{i % 10}"


async def _fill(store: TreeStore, count: int) -> tuple[list[str], float]:
    """``count`` sessions, oldest first; their ids and the seconds it took."""
    ids: list[str] = []
    started = time.perf_counter()
    for first in range(0, count, BATCH):
        batch = []
        for i in range(first, min(first + BATCH, count)):
            sid = new_id()
            ids.append(sid)
            batch.append(SessionRecord(session_id=sid, agent="a", root_id=sid, owner=_owner(i)))
        await asyncio.gather(*(store.create_session(r) for r in batch))
    return ids, time.perf_counter() - started


def _resting(ids: list[str]) -> list[RunState]:
    """A run on a tenth of the sessions (every tenant's, the small one's ten too), half suspended, half failed."""
    return [
        RunState(run_id=new_id(), thread_id=sid, agent="a", status="suspended" if i % 2 else "error")
        for i, sid in enumerate(ids)
        if i % 100 < 10
    ]


async def _median_ms(call: Callable[[], Awaitable[object]]) -> float:
    await call()  # warm: the page cache and the reader connection
    samples = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1000


async def _figures(
    label: str, store: Any, ids: list[str], seconds: float, runs: int, scan: Callable[[], Awaitable[object]]
) -> StoreFigures:
    return StoreFigures(
        store=label,
        sessions=len(ids),
        resting_runs=runs,
        create_seconds=round(seconds, 2),
        page_operator_ms=await _median_ms(lambda: store.page_sessions(limit=PAGE)),
        page_fair_ms=await _median_ms(lambda: store.page_sessions(limit=PAGE, owner="fair-3")),
        page_small_ms=await _median_ms(lambda: store.page_sessions(limit=PAGE, owner="small")),
        page_small_scan_ms=await _median_ms(scan),
        counts_operator_ms=await _median_ms(lambda: store.session_counts()),
        counts_fair_ms=await _median_ms(lambda: store.session_counts(owner="fair-3")),
        counts_small_ms=await _median_ms(lambda: store.session_counts(owner="small")),
    )  # fmt: skip


_OLD_PREDICATE = '"owner":"small"'
"""How the record's JSON holds the small tenant's owner: what the listing's substring test looked for."""


async def _sqlite(folder: Path, count: int) -> StoreFigures:
    store = await SqliteSessionStore.open(folder / "tenancy.db")
    try:
        ids, seconds = await _fill(store, count)
        runs = _resting(ids)
        conn = store.writer_connection  # between the store's calls, as its docstring allows
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO runs (run_id, thread_id, status, updated_at, write_seq, token, state) "
            "VALUES (?, ?, ?, ?, ?, NULL, ?)",
            [(r.run_id, r.thread_id, r.status, r.updated_at, n, r.model_dump_json()) for n, r in enumerate(runs)],
        )
        conn.execute("COMMIT")
        scan_sql = (
            "SELECT s.record FROM sessions s WHERE (instr(s.record, ?) > 0 AND json_extract(s.record, '$.owner') = ?) "
            f"ORDER BY s.rowid DESC LIMIT {PAGE}"
        )

        async def scan() -> object:
            return await store.read("scan", lambda c: c.execute(scan_sql, (_OLD_PREDICATE, "small")).fetchall())

        return await _figures("SQLite file (WAL)", store, ids, seconds, len(runs), scan)
    finally:
        await store.close()


async def _postgres(count: int) -> StoreFigures:
    with TemporaryPostgres() as pg:
        store = await PostgresSessionStore.open(pg.url)
        try:
            ids, seconds = await _fill(store, count)
            runs = _resting(ids)
            scan_sql = (
                "SELECT s.record FROM repertory.sessions s WHERE (strpos(s.record, %s) > 0 AND "
                f"((s.record)::json ->> 'owner') = %s) ORDER BY s.ord DESC LIMIT {PAGE}"
            )
            async with store.connection("tenancy") as conn:
                async with conn.cursor() as cur:
                    await cur.executemany(
                        "INSERT INTO repertory.runs (run_id, thread_id, status, updated_at, write_seq, token, state) "
                        "VALUES (%s, %s, %s, %s, nextval('repertory.runs_write_seq'), NULL, %s)",
                        [(r.run_id, r.thread_id, r.status, r.updated_at, r.model_dump_json()) for r in runs],
                    )
                await conn.execute("ANALYZE")

            async def scan() -> object:
                async with store.connection("scan") as conn:
                    cur = await conn.execute(scan_sql, (_OLD_PREDICATE, "small"))
                    return await cur.fetchall()

            return await _figures("PostgreSQL 15", store, ids, seconds, len(runs), scan)
        finally:
            await store.close()


async def measure_async(quick: bool, folder: Path) -> TenancyReport:
    """Both stores, one after the other."""
    clock = Clock.start(NAME, mode_of(quick))
    count = SESSIONS // 10 if quick else SESSIONS
    stores = [await _sqlite(folder, count), await _postgres(count)]
    return finish(TenancyReport(**clock.frame(), stores=stores), clock)


def measure(quick: bool) -> TenancyReport:
    """The whole measurement in a fresh temporary folder."""
    return in_temp_folder(NAME, measure_async, quick)


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> TenancyReport:
    """The suite's entry: measure, print, write ``out_dir/tenancy.json``."""
    return suite_entry(NAME, measure, quick, out_dir)


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.tenancy [--quick] [--out PATH]``."""
    main_of(NAME, __doc__, "10,000 sessions per store (seconds)", measure, argv)


if __name__ == "__main__":
    main()
