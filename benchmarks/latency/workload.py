"""The latency workload: engine-style commits timed one by one, per store and writer count."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Callable

from benchmarks.harness.commits import EngineSession, message_pool
from benchmarks.harness.report import Clock, finish, mode_of
from benchmarks.harness.stats import dist_ms
from benchmarks.harness.timing import progress
from benchmarks.latency.report import LatencyReport, Series
from repertory.core.messages import ModelMessage
from repertory.core.store import SessionStore
from repertory.errors import StoreError
from repertory.storage.sqlite.store import Durability, SqliteSessionStore
from repertory.testing.pg_temp import TemporaryPostgres

__all__ = ["SERIES", "measure"]

# (label, store, writers, commits per writer): the series measured in each mode.
SERIES = {
    "full": [
        ("sqlite normal", "sqlite-normal", 1, 5_000),
        ("sqlite full", "sqlite-full", 1, 2_000),
        ("sqlite normal", "sqlite-normal", 16, 300),
        ("sqlite normal", "sqlite-normal", 256, 40),
        ("postgresql", "postgres", 1, 2_000),
        ("postgresql", "postgres", 16, 200),
    ],
    "quick": [
        ("sqlite normal", "sqlite-normal", 1, 300),
        ("sqlite full", "sqlite-full", 1, 50),
        ("sqlite normal", "sqlite-normal", 16, 20),
    ],
}
WARMUP = 100


async def _series(
    label: str,
    store: SessionStore,
    writers: int,
    commits: int,
    pool: list[ModelMessage],
    advance: Callable[[int], None],
) -> Series:
    """``writers`` sessions each committing ``commits`` steps at once; every commit timed alone."""
    warm = EngineSession.new()
    for i in range(WARMUP):
        await warm.step(store, pool[i % len(pool)])
    samples: list[float] = []

    async def writer() -> None:
        session = EngineSession.new()
        for i in range(commits):
            t0 = time.perf_counter()
            await session.step(store, pool[i % len(pool)])
            samples.append(time.perf_counter() - t0)
            advance(1)

    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(writers)))
    wall = time.perf_counter() - t0
    return Series(
        store=label,
        writers=writers,
        commits_per_writer=commits,
        latency=dist_ms(samples),
        commits_per_s=len(samples) / wall,
        load_average_before_after=[load_before, os.getloadavg()[0]],
    )


async def _open(kind: str, folder: str, pg_url: str | None) -> SessionStore:
    if kind == "postgres":
        from repertory.storage.postgres.store import PostgresSessionStore

        assert pg_url is not None
        return await PostgresSessionStore.open(pg_url)
    durability: Durability = "full" if kind == "sqlite-full" else "normal"
    return await SqliteSessionStore.open(
        os.path.join(folder, f"{kind}-{time.monotonic_ns()}.db"), durability=durability
    )


async def _measure(mode: str) -> tuple[list[Series], dict[str, str]]:
    pool = message_pool()
    results: list[Series] = []
    skipped: dict[str, str] = {}
    series = SERIES[mode]
    pg: TemporaryPostgres | None = None
    pg_url: str | None = None
    if any(kind == "postgres" for _, kind, _, _ in series):
        try:
            pg = TemporaryPostgres().start()
            pg_url = pg.url
        except StoreError as exc:  # no server binaries on this machine: say so, measure the rest
            skipped["postgresql"] = str(exc)
            series = [s for s in series if s[1] != "postgres"]
    try:
        with tempfile.TemporaryDirectory(prefix="repertory-latency-") as folder:
            with progress("latency: commits", sum(w * c for _, _, w, c in series)) as advance:
                for label, kind, writers, commits in series:
                    store = await _open(kind, folder, pg_url)
                    try:
                        results.append(await _series(label, store, writers, commits, pool, advance))
                    finally:
                        await store.close()
    finally:
        if pg is not None:
            pg.cleanup()
    return results, skipped


def measure(quick: bool) -> LatencyReport:
    """Every series of the mode; the report with its summary."""
    mode = mode_of(quick)
    clock = Clock.start("latency", mode)
    results, skipped = asyncio.run(_measure(mode))
    report = LatencyReport(
        **clock.frame(),
        durability="SQLite normal = WAL + synchronous=NORMAL, full = synchronous=FULL; "
        "PostgreSQL synchronous_commit=on",
        message_json_bytes=1024,
        results=results,
        skipped=skipped,
    )
    return finish(report, clock)
