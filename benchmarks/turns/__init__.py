"""Turn cost benchmark: what a turn costs the tree against its durable writes, and issue 21's targets side by side.

Run ``python -m benchmarks.turns [--quick] [--no-ray] [--skip-peers] [--out PATH]``. It prints the
tables and writes ``benchmarks/results/turns.json``. Nothing here asserts a speed.

In one process, one part after another (``benchmarks.turns.run``):

1. Turn cost: N sessions (1,000; ``--quick`` 300) x 3 two-step turns (a default ``@tool`` call,
   then a final answer) through ``Runtime.start(store="sqlite:///...")`` on the local backend,
   zero-delay ``ScriptedModel``, all sessions at once; against a raw ``sqlite3`` loop doing the
   durable writes such a turn needs (its four messages and the run row, in two transactions, the
   store's own statements, schema and pragmas: WAL, synchronous=NORMAL), one turn after another.
   Rounds alternate floor and tree; the ratio is median over median (target >= 0.25).
2. Model steps/s: N sessions (1,000) x 10 tool steps on one SQLite store, group commit on (the
   default) and off alternating, through ``benchmarks.group_commit``'s own workload (target
   >= 10,000 steps/s on, >= 2.5x on over off).
3. One later two-step turn's SQL statements and write transactions (SQLite trace callbacks on the
   store's connections, ``benchmarks.sessions.anatomy.SqlCounter``).
4. ``load_history`` at depth 10,000 (``benchmarks.store``'s own workload; target <= 50 ms) and one
   session's 50-step run against LangGraph + ``SqliteSaver`` (``benchmarks.steps``' own runs;
   target >= 10x); the targets that need a long run of their own (recovery of 10,000 suspended +
   100 running sessions without ``tune_gc()``, 10,000 sessions x 3 turns against a log-normal
   100 ms model, Ray's overhead per ``run()``) are read from their latest report in
   ``benchmarks/results/``, named with its date and commit.
5. Ray on PostgreSQL (``TemporaryPostgres``): the same turns (``--quick`` 200 sessions) on the local
   backend, then Ray with one host and with one host per core, so the table shows how it scales.

The summary table lists every issue-21 target with its figure and where it was measured. The
suite's ``--quick`` runs the smallest sizes and leaves Ray and PostgreSQL out.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.harness.cli import deliver
from benchmarks.harness.plots import Plot
from benchmarks.harness.report import RESULTS_DIR
from benchmarks.turns.report import TurnsReport

__all__ = ["NAME", "PLOTS", "REPORT", "run_suite"]

NAME = "turns"
REPORT = TurnsReport
PLOTS: list[Plot[TurnsReport]] = []


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> TurnsReport:
    """The suite's entry: measure (``quick``: the smoke sizes, no Ray), print, write ``out_dir/turns.json``."""
    from benchmarks.turns.run import measure

    report = measure("smoke" if quick else "full", peers)
    deliver(report, out_dir / f"{NAME}.json")
    return report
