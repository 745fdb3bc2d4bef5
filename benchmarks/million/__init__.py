"""Million benchmark: 1,000,000 sessions in PostgreSQL, 1% active in one host process, the rest passivated.

Run ``python -m benchmarks.million [--sessions N] [--quick] [--out PATH]``; it prints a table and
writes ``benchmarks/results/million.json``. Nothing here asserts a speed.

On a ``TemporaryPostgres`` server (Debian postgresql-15, loopback, fsync and synchronous_commit
on) and the real store (``repertory.storage.postgres``):

1. Creation: 2,000 sessions through ``rt.create_sessions`` (the store's own path, a transaction
   per session), then the rest in bulk by ``COPY`` into the store's own tables, with rows exactly
   as ``PgTreeTables.create_session`` writes them (``benchmarks.million.database``: the store has
   no batch creation). Both rates, and the WAL the bulk wrote; then ``ANALYZE``.
2. Sizes: ``pg_total_relation_size`` of every table and ``pg_relation_size`` of every index in the
   ``repertory`` schema, over the number of sessions, after creation and again after the turns.
3. One host process (``Runtime.start(store="postgresql://...")``, a child interpreter) activates
   1% of the sessions, half then all, each by its first handle and one turn, and reads its RSS
   after each step; the turns' rate, host and server CPU and WAL bytes are measured per step. A
   second child does the same on other sessions under tracemalloc (Python heap per session).
   Everything else stays passivated: never activated, a row in the database.
4. Cold activations (the untraced child): random sessions not resident, one at a time: activation
   alone, the two store reads it makes, first handle + first turn, and after ``passivate_idle(0)``
   a session that ran a turn before, activated again and run a second turn; a cProfile of
   activations alone. Target: activation p50 <= 5 ms.

``--quick`` is 20,000 sessions (the code runs, the figures mean little; the suite's ``--quick``
leaves this benchmark out, as it takes ~45 s); ``--sessions`` sets the size of a full run
(default 1,000,000). The parts: ``database`` (COPY, sizes, WAL, server CPU), ``active`` (the host
child), ``run``, ``report``.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.harness.cli import deliver
from benchmarks.harness.plots import Plot
from benchmarks.harness.report import RESULTS_DIR
from benchmarks.million.report import MillionReport

__all__ = ["FULL", "NAME", "PLOTS", "QUICK", "REPORT", "run_suite"]

NAME = "million"
REPORT = MillionReport
PLOTS: list[Plot[MillionReport]] = []
FULL = 1_000_000
QUICK = 20_000


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> MillionReport:
    """The suite's entry: measure, print, write ``out_dir/million.json`` (``quick``: 20,000 sessions, smoke)."""
    from benchmarks.million.run import measure

    report = measure(QUICK if quick else FULL, quick=quick, smoke=quick)
    deliver(report, out_dir / f"{NAME}.json")
    return report
