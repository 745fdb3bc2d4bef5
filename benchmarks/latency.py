"""Latency: how long one ``commit_session`` takes, alone and with many sessions committing at once.

``benchmarks.store`` reports commits per second; a step's user waits on one commit, so this reports
how long one takes and how the tail grows when many sessions commit at once. Each commit is an
engine step (``benchmarks.harness.commits.EngineSession``: one 1 KB message appended to the history
kept in memory, run and thread moved to the new head, ``commit_session`` with the previous head as
base), timed from the call to its return:

- SQLite, one writer, durability ``normal`` (WAL + ``synchronous=NORMAL``) and ``full`` (an fsync
  per commit);
- SQLite, W sessions committing at once (``asyncio.gather``; 16 and 256), durability normal: what a
  busy host's steps see, queueing on the one writer included;
- PostgreSQL (a throwaway local server, ``synchronous_commit=on``), one writer and 16, full mode
  only (starting the server takes seconds); skipped with the reason when no server binaries exist.

Each series is preceded by an untimed warm-up (statement caches, the first pages of every table).

``python -m benchmarks.latency [--quick]``.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from benchmarks.harness.command import Options, main
from benchmarks.harness.commits import EngineSession, message_pool
from benchmarks.harness.figures import Figures
from repertory.core.store import SessionStore
from repertory.errors import StoreError
from repertory.storage.sqlite.store import Durability, SqliteSessionStore
from repertory.testing.pg_temp import TemporaryPostgres

# (store, writers, commits per writer) per mode.
SERIES = {
    "full": [("sqlite normal", 1, 5_000), ("sqlite full", 1, 2_000), ("sqlite normal", 16, 300),
             ("sqlite normal", 256, 40), ("postgresql", 1, 2_000), ("postgresql", 16, 200)],
    "quick": [("sqlite normal", 1, 300), ("sqlite full", 1, 50), ("sqlite normal", 16, 20)],
}  # fmt: skip
WARMUP = 100


async def _series(figures: Figures, label: str, store: SessionStore, writers: int, commits: int) -> None:
    """``writers`` sessions each committing ``commits`` steps at once; every commit timed alone."""
    pool = message_pool()
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

    started = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(writers)))
    wall = time.perf_counter() - started
    who = "one writer" if writers == 1 else f"{writers} concurrent writers"
    figures.time(f"commit latency, {label}, {who}", samples, note=f"max {max(samples) * 1000:.1f} ms")
    figures.value(f"commits/s, {label}, {who}", len(samples) / wall, "commits/s")
    print(f"  {label}, {who}: {len(samples):,} commits in {wall:.1f} s", flush=True)


async def scenario(figures: Figures, options: Options) -> None:
    """Every series of the mode, each on a fresh store."""
    series = SERIES[options.mode]
    figures.fact("durability", "SQLite normal = WAL + synchronous=NORMAL, full = synchronous=FULL; "
                 "PostgreSQL synchronous_commit=on")  # fmt: skip
    figures.fact("message", "1 KB of JSON a commit")
    pg: TemporaryPostgres | None = None
    if any(s[0] == "postgresql" for s in series):
        try:
            pg = TemporaryPostgres().start()
        except StoreError as exc:  # no server binaries on this machine: say so, measure the rest
            figures.fact("postgresql", f"not measured: {exc}")
            series = [s for s in series if s[0] != "postgresql"]
    try:
        with tempfile.TemporaryDirectory(prefix="repertory-latency-") as folder:
            for n, (label, writers, commits) in enumerate(series):
                store: SessionStore
                if label == "postgresql":
                    from repertory.storage.postgres.store import PostgresSessionStore

                    assert pg is not None
                    store = await PostgresSessionStore.open(pg.url)
                else:
                    durability: Durability = "full" if label == "sqlite full" else "normal"
                    store = await SqliteSessionStore.open(str(Path(folder) / f"{n}.db"), durability=durability)
                try:
                    await _series(figures, label, store, writers, commits)
                finally:
                    await store.close()
    finally:
        if pg is not None:
            pg.cleanup()


if __name__ == "__main__":
    main("latency", __doc__, scenario=scenario)
