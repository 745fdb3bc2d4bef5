"""Store benchmarks: commit throughput against raw sqlite3 and raw psycopg, history load, bytes per message.

Run ``python -m benchmarks.store [--quick] [--only sqlite|postgres]``. It prints a table and writes
``benchmarks/results/store.json`` with the machine, the durability of every figure, and the targets
the figures are read against. Nothing here asserts a speed: a slow figure is a finding, not a
failure. ``--only`` measures one backend and replaces only its part of an existing
report. The PostgreSQL part lives in ``benchmarks.store.postgres`` (see its docstring), the workload
both share in ``benchmarks.harness.commits``, and the report and its tables in ``benchmarks.store.report``.

Why each SQLite part is shaped the way it is:

- Commits are driven the way an engine drives them: one ``MessageHistory`` kept in memory, one
  ``append`` per step, the run and thread pointers moved to the new head, and ``commit_session``
  with the previous head as base. So the figure is what a session step pays, not a synthetic bulk
  insert.
- Next to it runs a raw ``sqlite3`` loop (``benchmarks.store.raw``) with the same schema (created by
  the store's own ``ensure_schema``), the same statements and the same pragmas, one ``BEGIN IMMEDIATE``/``COMMIT``
  per iteration, ids and JSON prepared up front. It is the floor: whatever repertory adds on top is
  the ratio. A second raw loop adds the store's two guard reads (thread head, run status), which
  separates the cost of the compare-and-set from the cost of Python around the statements.
- The repertory and raw loops alternate round by round, so a noisy neighbour on a 2-core machine
  hits both sides instead of skewing the ratio.
- Disk growth is read after ``PRAGMA wal_checkpoint(TRUNCATE)``, so the WAL does not hide or inflate
  what a message really costs on disk; the WAL bytes written in between are reported too, because
  SQLite writes whole pages per commit and that, not the row size, is the I/O a step causes.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.harness.cli import deliver
from benchmarks.harness.plots import Plot
from benchmarks.harness.report import RESULTS_DIR
from benchmarks.store.report import StoreReport

__all__ = ["NAME", "PLOTS", "REPORT", "run_suite"]

NAME = "store"
REPORT = StoreReport
PLOTS: list[Plot[StoreReport]] = []


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> StoreReport:
    """The suite's entry: measure, print, write ``out_dir/store.json``.

    ``quick`` is the suite's smoke size: SQLite only (starting a PostgreSQL server takes seconds).
    """
    from benchmarks.store.run import measure

    report = measure(quick, "sqlite" if quick else None, smoke=quick)
    deliver(report, out_dir / f"{NAME}.json")
    return report
