"""Concurrency benchmark: N sessions at once (10 to 10,000) against a model with log-normal latency.

Run ``python -m benchmarks.concurrency [--quick] [--no-ray] [--out PATH]``. It prints a table and
writes ``benchmarks/results/concurrency.json``. Nothing here asserts a speed.

Real model latency is not a constant: most replies come quickly, a few take many times longer, and
a runtime must keep the fast ones flowing while slow ones wait. So every model request sleeps a
log-normal time (median 100 ms, sigma 0.5: p99 ~320 ms; ``--quick`` median 20 ms) before replying.
The delay is a pure function of (turn prompt, step), so the client can add up, on either backend,
exactly how long the model kept each turn and each session waiting.

Per N (10, 100, 1,000, 10,000; ``--quick`` 10 and 50), on a fresh SQLite file (WAL, durability
normal): N sessions are created, then all N run 3 turns each (``await handle.run(...)`` one after
another), all launched at once. A turn is two model steps: a call to a default (non-idempotent)
``@tool`` and a final reply. Reported: turns/s and steps/s over the wall time, turn latency p50 /
p99, the overhead (turn latency minus its model delays) p50 / p99, the ideal wall time (the
slowest session's model delays alone) and, on the local backend, where the sessions run in this
process, the cyclic collector's passes and seconds by generation over the timed window. The
local backend always runs; Ray (a local instance this script starts and stops, two shared hosts)
too, unless ``--quick`` or ``--no-ray``. A run that exceeds its time limit is reported as not
finished.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.concurrency.report import PLOTS, ConcurrencyReport
from benchmarks.harness.cli import deliver
from benchmarks.harness.report import RESULTS_DIR

__all__ = ["NAME", "PLOTS", "REPORT", "run_suite"]

NAME = "concurrency"
REPORT = ConcurrencyReport


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> ConcurrencyReport:
    """The suite's entry: measure (local, then Ray unless quick), print, write ``out_dir/concurrency.json``."""
    from benchmarks.concurrency.workload import measure

    report = measure(quick)
    deliver(report, out_dir / f"{NAME}.json")
    return report
