"""The store benchmark's run: the SQLite part, the PostgreSQL part, and merging one into an earlier report."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks.harness.commits import MESSAGE_BYTES, EngineSession, message_pool
from benchmarks.harness.report import Clock, finish, mode_of
from benchmarks.store.costs import component_costs, profile_commits
from benchmarks.store.loads import load_history
from benchmarks.store.report import (
    BytesOnDisk,
    CommitProfile,
    CommitResult,
    LoadHistory,
    MeasuredOn,
    PgSection,
    PgSkipped,
    StoreReport,
)
from benchmarks.store.sqlite import bench_commits, bench_disk, bench_load
from repertory.core.messages import ModelMessage
from repertory.storage.sqlite.store import Durability

__all__ = ["measure", "merge"]

SQLITE_DURABILITY: dict[str, str | list[str] | None] = {
    "commit_throughput": ["normal", "full"],
    "load_history": "normal",
    "bytes_on_disk": "normal",
    "profile": "normal",
}


class SqlitePart:
    """Every SQLite figure of one run."""

    def __init__(
        self,
        throughput: list[CommitResult],
        loads: LoadHistory,
        disks: BytesOnDisk,
        costs: dict[str, float],
        profile: CommitProfile,
    ) -> None:
        self.throughput, self.loads, self.disks, self.costs, self.profile = throughput, loads, disks, costs, profile


async def run_sqlite(quick: bool, pool: Sequence[ModelMessage], smoke: bool = False) -> SqlitePart:
    """Every SQLite measurement, in one temporary folder on the same disk as the system's temp dir.

    ``smoke`` (the suite's ``--quick``) shrinks every size until the whole part takes a second or
    two: it proves the code runs, its figures mean nothing.
    """
    # Many short rounds rather than a few long ones: a burst of load from elsewhere spoils one round.
    commits, rounds = (100, 1) if smoke else (250, 2) if quick else (1_000, 10)
    load_runs = 2 if smoke else 5 if quick else 15
    appends = 50 if smoke else 200
    depths = (10, 100, 1_000) if smoke else (10, 1_000, 10_000)
    with tempfile.TemporaryDirectory(prefix="repertory-bench-") as tmp:
        workdir = Path(tmp)
        durabilities: tuple[Durability, ...] = ("normal",) if smoke else ("normal", "full")  # full: an fsync each
        throughput = [await bench_commits(workdir, d, commits, rounds, pool) for d in durabilities]
        loads = await bench_load(workdir, depths, load_runs, pool)
        disks = [await bench_disk(workdir, depth, appends, pool) for depth in (depths[0], depths[-1])]
        profile = await profile_commits(workdir, 100 if smoke else 500 if quick else 2_000, pool)
    return SqlitePart(
        throughput,
        load_history(loads),
        BytesOnDisk(
            flat=abs(disks[-1].bytes_per_message - disks[0].bytes_per_message) <= 0.1 * disks[0].bytes_per_message,
            results=disks,
        ),
        component_costs(200 if smoke else 2_000 if quick else 20_000, pool[0]),
        profile,
    )


async def _measure(
    quick: bool, only: str | None, smoke: bool
) -> tuple[SqlitePart | None, PgSection | PgSkipped | None]:
    pool = message_pool()
    sqlite = await run_sqlite(quick, pool, smoke) if only in (None, "sqlite") else None
    postgres = None
    if only in (None, "postgres"):
        # Imported here: a change to the PostgreSQL store must not stop the SQLite figures (or the
        # suite's SQLite-only quick run).
        from benchmarks.store.postgres import run_postgres

        postgres = await run_postgres(quick, pool)
    return sqlite, postgres


def measure(quick: bool, only: str | None = None, smoke: bool = False) -> StoreReport:
    """The report: SQLite, then PostgreSQL (``only`` names one of them to measure just that one)."""
    clock = Clock.start("store", mode_of(quick, smoke))
    sqlite, postgres = asyncio.run(_measure(quick, only, smoke))
    durability: dict[str, str | list[str] | None] = {}
    if sqlite is not None:
        durability.update(SQLITE_DURABILITY)
    if postgres is not None:
        durability["postgres"] = postgres.durability if isinstance(postgres, PgSection) else "not measured"
    report = StoreReport(
        **clock.frame(),
        workdir=tempfile.gettempdir(),
        durability=durability,
        message_json_bytes=MESSAGE_BYTES,
        run_state_json_bytes=len(EngineSession.new().run.model_dump_json()),
        commit_throughput=None if sqlite is None else sqlite.throughput,
        load_history=None if sqlite is None else sqlite.loads,
        bytes_on_disk=None if sqlite is None else sqlite.disks,
        component_costs_us=None if sqlite is None else sqlite.costs,
        profile=None if sqlite is None else sqlite.profile,
        postgres=postgres,
    )
    return finish(report, clock)


def merge(previous: StoreReport, fresh: StoreReport, only: str) -> StoreReport:
    """``fresh`` (one backend) written over the matching part of ``previous`` (both backends)."""
    if only == "postgres":
        merged = previous.model_copy(deep=True)
        merged.postgres = fresh.postgres
        merged.durability = {**previous.durability, "postgres": fresh.durability.get("postgres")}
        merged.postgres_measured_on = MeasuredOn(mode=fresh.mode, created_at=fresh.created_at, machine=fresh.machine)
    else:
        merged = fresh.model_copy(deep=True)
        if previous.postgres is not None:
            merged.postgres = previous.postgres
            merged.durability["postgres"] = previous.durability.get("postgres")
            merged.postgres_measured_on = previous.postgres_measured_on or MeasuredOn(
                mode=previous.mode, created_at=previous.created_at, machine=previous.machine
            )
    merged.summary = merged.summarise()
    return merged
