"""Commit latency benchmark: p50 / p99 of one ``commit_session``, alone and with concurrent writers.

Run ``python -m benchmarks.latency [--quick] [--out PATH]``. It prints a table and writes
``benchmarks/results/latency.json``. Nothing here asserts a speed (DESIGN.md, rule 8).

``benchmarks.store`` reports commits per second; a step's user waits on one commit, so this reports
how long one takes and how the tail grows when many sessions commit at once. Each commit is an
engine step (``benchmarks._common.EngineSession``: one 1 KB message appended to the history kept
in memory, run and thread moved to the new head, ``commit_session`` with the previous head as
base), timed from the call to its return:

- SQLite, one writer, durability ``normal`` (WAL + ``synchronous=NORMAL``) and ``full`` (an fsync
  per commit);
- SQLite, W sessions committing at once (``asyncio.gather``; 16 and 256), durability normal: what a
  busy host's steps see, queueing on the one writer included;
- PostgreSQL (a throwaway local server, ``synchronous_commit=on``), one writer and 16, full mode
  only (starting the server takes seconds); skipped with the reason when no server binaries exist.

Each series is preceded by an untimed warm-up (statement caches, the first pages of every table).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from typing import Any

from benchmarks._common import EngineSession, make_message
from benchmarks._suite import (
    dist_ms,
    finish,
    progress,
    row,
    simple_main,
    start_report,
    suite_entry,
)
from repertory.core.messages import ModelMessage
from repertory.core.store import SessionStore
from repertory.errors import StoreError
from repertory.storage.sqlite.store import SqliteSessionStore

__all__ = ["main", "measure", "run_suite"]

NAME = "latency"
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
    store: SessionStore, writers: int, commits: int, pool: list[ModelMessage], advance: Any
) -> dict[str, Any]:
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
    return {
        "writers": writers,
        "commits_per_writer": commits,
        "latency": dist_ms(samples),
        "commits_per_s": len(samples) / wall,
        "load_average_before_after": [load_before, os.getloadavg()[0]],
    }


async def _open(kind: str, folder: str, pg_url: str | None) -> SessionStore:
    if kind == "postgres":
        from repertory.storage.postgres.store import PostgresSessionStore

        assert pg_url is not None
        return await PostgresSessionStore.open(pg_url)
    durability = "full" if kind == "sqlite-full" else "normal"
    return await SqliteSessionStore.open(
        os.path.join(folder, f"{kind}-{time.monotonic_ns()}.db"), durability=durability
    )


async def _measure(mode: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    pool = [make_message(i) for i in range(16)]
    results: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    series = SERIES[mode]
    pg: Any = None
    pg_url: str | None = None
    if any(kind == "postgres" for _, kind, _, _ in series):
        from repertory.testing.pg_temp import TemporaryPostgres

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
                        result = await _series(store, writers, commits, pool, advance)
                    finally:
                        await store.close()
                    results.append({"store": label, **result})
    finally:
        if pg is not None:
            pg.cleanup()
    return results, skipped


def _summary(results: list[dict[str, Any]], skipped: dict[str, str]) -> list[dict[str, Any]]:
    rows = []
    for r in results:
        lat = r["latency"]
        writers = "one writer" if r["writers"] == 1 else f"{r['writers']} concurrent writers"
        rows.append(
            row(
                f"commit latency p50 / p99, {r['store']}, {writers}",
                lat["p50_ms"],
                "ms",
                note=f"p99 {lat['p99_ms']:.3f} ms, max {lat['max_ms']:.1f} ms; {r['commits_per_s']:,.0f} commits/s; "
                f"{lat['count']:,} commits",
            )
        )
    rows += [row(f"commit latency, {name}", None, "ms", note=f"not measured: {why}") for name, why in skipped.items()]
    return rows


def render(report: dict[str, Any]) -> str:
    """The table printed after a run."""
    lines = [
        f"commit latency ({report['mode']}), one 1 KB message per commit",
        f"{'store':<14} {'writers':>7} {'commits':>8} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>8} "
        f"{'commits/s':>10}",
    ]
    for r in report["results"]:
        lat = r["latency"]
        lines.append(
            f"{r['store']:<14} {r['writers']:>7} {lat['count']:>8,} {lat['p50_ms']:>8.3f} {lat['p90_ms']:>8.3f} "
            f"{lat['p99_ms']:>8.3f} {lat['max_ms']:>8.1f} {r['commits_per_s']:>10,.0f}"
        )
    lines += [f"{name}: not measured: {why}" for name, why in report["skipped"].items()]
    return "\n".join(lines)


def measure(quick: bool) -> dict[str, Any]:
    """Every series, then the summary; prints the table and returns the report."""
    mode = "quick" if quick else "full"
    started = time.perf_counter()
    report = start_report(
        NAME,
        mode,
        durability="SQLite normal = WAL + synchronous=NORMAL, full = synchronous=FULL; "
        "PostgreSQL synchronous_commit=on",
        message_json_bytes=1024,
    )
    report["results"], report["skipped"] = asyncio.run(_measure(mode))
    report["summary"] = _summary(report["results"], report["skipped"])
    finish(report, started)
    print(render(report))
    return report


run_suite = suite_entry(NAME, measure)


main = simple_main(NAME, __doc__, measure, "SQLite only, few commits (seconds)")


if __name__ == "__main__":
    main()
