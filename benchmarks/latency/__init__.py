"""Commit latency benchmark: p50 / p99 of one ``commit_session``, alone and with concurrent writers.

Run ``python -m benchmarks.latency [--quick] [--out PATH]``. It prints a table and writes
``benchmarks/results/latency.json``. Nothing here asserts a speed.

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
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.harness.cli import deliver
from benchmarks.harness.report import RESULTS_DIR
from benchmarks.latency.report import LatencyReport

__all__ = ["NAME", "PLOTS", "REPORT", "run_suite"]

NAME = "latency"
REPORT = LatencyReport
PLOTS: list[object] = []


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> LatencyReport:
    """The suite's entry: measure, print, write ``out_dir/latency.json``."""
    from benchmarks.latency.workload import measure

    report = measure(quick)
    deliver(report, out_dir / f"{NAME}.json")
    return report
