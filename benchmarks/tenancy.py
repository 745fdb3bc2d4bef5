"""Tenancy: a key's page of sessions and its counts among 100,000 sessions, SQLite and PostgreSQL.

Under ``repertory serve`` with keys, every search, listing and count of the web UI runs as
``TreeStore.page_sessions(owner=)`` / ``session_counts(owner=)``. Since schema version 10 the owner
is a column of ``sessions`` with an index (left out for the operator's sessions); before, the
listing tested each session's JSON newest first until a page was full, which for a tenant with
few sessions meant every session back to the oldest. Each store here holds 100,000 sessions
(``--quick`` 10,000): nine tenants share nine tenths of them, one in ten each ("fair"), the
operator (no owner) a tenth, and one tenant ("small") owns ten of the oldest. A tenth of the
sessions, spread over every owner, rest on a run that waits (suspended) or failed (error), so
the counts have something to count. Timed 20 times each, after a warm-up:

- the newest page of 50 for the operator (no owner asked), for "fair" and for "small";
- "small"'s page as the listing found it before the index: the same query with the owner tested
  in the record's JSON (``instr`` / ``strpos`` first, then the field), side by side on the same
  rows: what the index replaced, and the ratio of the two;
- the counts of running, suspended and failed sessions for each of the three.

Sessions are written through the store's ``create_session`` (concurrently, so group commit
batches them); the runs they rest on are inserted as rows, as ``commit_session`` leaves them.
PostgreSQL is a throwaway server (``TemporaryPostgres``).

``python -m benchmarks.tenancy [--quick]``.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.harness.command import Options, main
from benchmarks.harness.figures import Figures
from repertory.core.ids import new_id
from repertory.core.state import RunState
from repertory.core.store import TreeStore
from repertory.core.tree import SessionRecord
from repertory.storage.postgres.store import PostgresSessionStore
from repertory.storage.sqlite.store import SqliteSessionStore
from repertory.testing.pg_temp import TemporaryPostgres

SESSIONS = {"full": 100_000, "quick": 10_000}
FAIR_TENANTS = 9
SMALL = 10
PAGE = 50
REPEATS = 20
BATCH = 500
OLD_PREDICATE = '"owner":"small"'
"""How the record's JSON holds the small tenant's owner: what the listing's substring test looked for."""


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


async def _samples(call: Callable[[], Awaitable[object]]) -> list[float]:
    await call()  # warm: the page cache and the reader connection
    out = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        await call()
        out.append(time.perf_counter() - t0)
    return out


async def _record(
    figures: Figures, label: str, store: Any, filled: tuple[list[str], float], runs: int,
    scan: Callable[[], Awaitable[object]],
) -> None:  # fmt: skip
    ids, seconds = filled
    figures.time(f"{label}: creating {len(ids):,} sessions", seconds, note=f"create_session, {BATCH} at once")
    figures.fact(f"{label} resting runs", f"{runs:,} sessions resting suspended or failed")
    for who, owner in (("the operator", None), ("a tenant with one in ten", "fair-3"),
                       (f"a tenant with {SMALL} of {len(ids):,}", "small")):  # fmt: skip
        page = await _samples(partial(store.page_sessions, limit=PAGE, owner=owner))
        figures.time(f"{label}: a page of {PAGE}, {who}", page)
    scanned = await _samples(scan)
    figures.time(f"{label}: that small tenant's page as scanned before the owner index", scanned,
                 note="the owner tested in the record's JSON, newest first")  # fmt: skip
    figures.value(f"{label}: small tenant's page, scan before the index / owner index",
                  sorted(scanned)[REPEATS // 2] / sorted(page)[REPEATS // 2], "x", note="medians")  # fmt: skip
    for who, owner in (("the operator", None), ("a tenant with one in ten", "fair-3"), ("the small tenant", "small")):
        counts = await _samples(partial(store.session_counts, owner=owner))
        figures.time(f"{label}: counts, {who}", counts, note="running, suspended, failed")


async def _sqlite(figures: Figures, folder: Path, count: int) -> None:
    store = await SqliteSessionStore.open(folder / "tenancy.db")
    try:
        filled = await _fill(store, count)
        runs = _resting(filled[0])
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
            return await store.read("scan", lambda c: c.execute(scan_sql, (OLD_PREDICATE, "small")).fetchall())

        await _record(figures, "SQLite", store, filled, len(runs), scan)
    finally:
        await store.close()


async def _postgres(figures: Figures, count: int) -> None:
    with TemporaryPostgres() as pg:
        store = await PostgresSessionStore.open(pg.url)
        try:
            filled = await _fill(store, count)
            runs = _resting(filled[0])
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
                version = await (await conn.execute("SHOW server_version")).fetchone()
                figures.fact("PostgreSQL", str(version[0] if version else "?"))

            async def scan() -> object:
                async with store.connection("scan") as conn:
                    cur = await conn.execute(scan_sql, (OLD_PREDICATE, "small"))
                    return await cur.fetchall()

            await _record(figures, "PostgreSQL", store, filled, len(runs), scan)
        finally:
            await store.close()


async def scenario(figures: Figures, options: Options) -> None:
    """Both stores, one after the other."""
    figures.fact("stores", "a SQLite file (WAL, durability normal); a throwaway PostgreSQL server")
    with tempfile.TemporaryDirectory(prefix="repertory-tenancy-") as folder:
        await _sqlite(figures, Path(folder), SESSIONS[options.mode])
    await _postgres(figures, SESSIONS[options.mode])


if __name__ == "__main__":
    main("tenancy", __doc__, scenario=scenario)
