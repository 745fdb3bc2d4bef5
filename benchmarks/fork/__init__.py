"""Fork benchmark: what ``SessionHandle.fork()`` costs as the forked history grows from 10 to 100,000.

Run ``python -m benchmarks.fork [--quick] [--out PATH]``. It prints a table and writes
``benchmarks/results/fork.json``. Nothing here asserts a speed.
The target read against: fork cost is flat, at most 2x from depth 10 to depth 100,000.

A fork is a new thread whose head is an existing revision, so it should cost the same whatever
the history's length: no message is copied. Per depth D (10, 100, 1,000, 10,000, 100,000;
``--quick`` 10, 100, 1,000), on the local backend and one SQLite file (WAL, durability normal):

- a root session is created through the runtime and its thread is given D messages of 1 KB JSON
  (the store benchmark's message) through ``commit_session`` in chunks: set-up, not measured, and
  far faster than D engine steps, which would take minutes at 100,000;
- ``await root.fork()`` is timed K times (500; ``--quick`` 50): one read of the thread head, one
  transaction writing the session and thread rows. The history rows before and after are counted
  (a fork must add none), and the bytes the database grew by over the K forks are read from
  SQLite's own page count (``page_count - freelist_count``, which includes pages still in the
  WAL), so no checkpoint is needed; K is large so that whole 4 KB pages average out per fork;
- the first turn on a few of the forks is timed (``await fork.run(...)``: the fork's actor is
  activated, the run loads the D messages it continues from, calls the model, commits), then a
  second turn (history now cached in memory). The model is a zero-delay ``ScriptedModel`` step
  function, so the time is the runtime's, not a model's. Both turns hand the model the whole
  conversation, so they grow with D by design (the first also reads it from the store); that is
  reported, not targeted.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.fork.report import PLOTS, ForkReport
from benchmarks.harness.cli import deliver
from benchmarks.harness.report import RESULTS_DIR

__all__ = ["NAME", "PLOTS", "REPORT", "run_suite"]

NAME = "fork"
REPORT = ForkReport


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> ForkReport:
    """The suite's entry: measure, print, write ``out_dir/fork.json``."""
    from benchmarks.fork.workload import measure

    report = measure(quick)
    deliver(report, out_dir / f"{NAME}.json")
    return report
