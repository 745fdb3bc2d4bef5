"""Export benchmark: Parquet export throughput over a store of 1,000,000 history entries, and ``tree_usage``.

Run ``python -m benchmarks.export [--quick] [--entries N] [--keep DIR] [--out PATH]``. It prints a
table and writes ``benchmarks/results/export.json``. Nothing here asserts a speed: a slow figure is
a finding, not a failure. Targets: first export >= 300,000 rows/s, ``tree_usage`` < 1 s.

The store is a SQLite file filled with direct inserts (the engine would take minutes to write a
million messages; the export reads rows, so how they got there does not matter). Its shape is a
fleet: trees of an orchestrator session with three spawned children and one fork of the
orchestrator (forked half-way, so it shares half its parent's history). Every thread is a run of
turns of 20 messages: a user message, nine tool calls each followed by its result (one call per turn
needs approval, one in ten results is an error), and a final reply. One run, one turn and three
events (turn.started, approval.requested, turn.completed) per turn. Messages are ~150-400 bytes of
JSON.

Figures:

- ``first export``: everything (the base tables plus the derived ``messages``, one row per message
  per thread lineage, so a fork's shared half counts again, and ``tool_calls``). rows/s counts every
  row written to every table; entries/s counts history entries only.
- ``incremental``: after 1% more turns are added to existing threads, and after no change at all.
- ``tree_usage``: ``repertory.analytics.connect`` then ``SELECT * FROM tree_usage(root)``, cold (first
  query, Parquet files read) and warm.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.export.report import ExportReport
from benchmarks.harness.cli import deliver
from benchmarks.harness.plots import Plot
from benchmarks.harness.report import RESULTS_DIR

__all__ = ["NAME", "PLOTS", "REPORT", "run_suite"]

NAME = "export"
REPORT = ExportReport
PLOTS: list[Plot[ExportReport]] = []


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> ExportReport:
    """The suite's entry: measure, print, write ``out_dir/export.json``.

    ``quick`` is the suite's smoke size: 5,000 entries (a second), not the 100,000 of ``--quick``.
    """
    from benchmarks.export.workload import measure

    report = measure(5_000, "smoke") if quick else measure(1_000_000, "full")
    deliver(report, out_dir / f"{NAME}.json")
    return report
