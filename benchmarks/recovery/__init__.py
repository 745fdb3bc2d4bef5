"""Recovery benchmark: 10,000 suspended and 100 running sessions, SIGKILL; how long until all is well?

Run ``python -m benchmarks.recovery [--quick] [--out PATH]``. It prints a table and writes
``benchmarks/results/recovery.json``. Nothing here asserts a speed.
The target read against: under 5 s from the new runtime's start until every running run is
re-driven to completion and every suspended session has answered its approval or resume.

1. A workload process (``--child workload``) opens a runtime on a fresh SQLite file (WAL,
   durability normal) and brings 10,000 sessions (``--quick``: 100) to ``suspended``: half wait
   for an approval of a ``requires_approval`` tool, half for the answer to a tool that called
   ``suspend()``. Then 100 sessions (``--quick``: 5) start a turn whose model calls an idempotent
   tool that never returns in that process. Once all 100 are inside the tool, the workload writes
   its manifest (session ids, turn ids, tokens: what the approvers would hold) and says so.
2. This script SIGKILLs it: no shutdown, no last commit. The store's run and turn counts are read.
3. A fresh process (``--child recover``) times, from just before ``Runtime.start`` on the same
   file: the start (which finds the open turns and re-drives them), each running turn's result,
   and 10,000 approvals/resumes sent at once (at most 500 in flight) until each has returned the
   run's next rest (``done``: the model's zero-delay reply after the decision). In that process the
   tool returns at once, so a re-driven run finishes; it is idempotent, so it is run again.
4. The store is read again: every run must be ``done`` and no turn open.
5. To tell restarting apart from the work the answers cause, a copy of the store taken at the kill
   is opened by another fresh process (``--child probe``), which times ``Runtime.start`` and
   ``metadata()`` of every suspended session (its actor activated from the store, status read)
   without deciding anything.
6. Another copy is recovered as in 3 by a process that first calls ``tune_gc()`` (rarer cyclic
   collections, ``repertory.runtime.gc_tuning``): about half the CPU of 10,000 decisions at once
   was the collector scanning the resident sessions.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.harness.cli import deliver
from benchmarks.harness.plots import Plot
from benchmarks.harness.report import RESULTS_DIR
from benchmarks.recovery.report import RecoveryReport

__all__ = ["NAME", "PLOTS", "REPORT", "run_suite"]

NAME = "recovery"
REPORT = RecoveryReport
PLOTS: list[Plot[RecoveryReport]] = []


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> RecoveryReport:
    """The suite's entry: set up, kill, recover; print, write ``out_dir/recovery.json``."""
    from benchmarks.recovery.scenario import measure

    report = measure(quick)
    deliver(report, out_dir / f"{NAME}.json")
    return report
