"""Session benchmark: memory per session, session creation rate, and many concurrent sessions.

Run ``python -m benchmarks.sessions [--quick]``. It prints a table and writes
``benchmarks/results/sessions.json`` with the machine, the durability of every figure, the targets
and every figure measured. Nothing here asserts a speed or a size.

Everything runs on the local backend (``Runtime.start(store="sqlite:///...", agents=...)``), on a
SQLite file in a fresh temporary folder, durability ``normal`` (WAL + ``synchronous=NORMAL``)
unless a figure says ``full``. Each part runs in a fresh interpreter of its own, so one part's
heap, caches and resident set do not leak into the next one's figures.

1. Memory per idle resident session. N sessions (10,000; ``--quick`` 1,000) are created and
   each runs one short turn, so each has an activated ``SessionActor``; memory is then read with
   the session's history cache kept (as the turn left it) and cleared
   (``actor.session.drop_cached_history()``, the figure the target is about). tracemalloc's traced
   size after ``gc.collect()``, minus the same reading taken before the sessions existed, over N,
   is the headline: it counts every Python allocation and nothing else. The resident set (RSS)
   grows by more (allocator slack, SQLite's page cache) and hardly shrinks when objects are freed,
   so it is read in a separate, untraced interpreter and reported as growth, not as a cost.
2. Memory per passivated session: ``rt.host.passivate_idle(0)``, then the same readings and
   ``rt.host.resident``.
3. Sessions created per second: ``rt.create_session`` in a loop and in ``asyncio.gather``
   batches of 100, then the same work one layer down at a time (the host, the store, the record
   alone) so the figure can be split.
4. Concurrent sessions: N sessions (100, 1,000, 10,000; ``--quick`` 100 and 500) each run 5
   turns, ``await handle.run(...)`` one after another, all N launched at once with
   ``asyncio.gather``, against ``ScriptedModel`` with a 200 ms delay. Per-turn overhead is the
   turn's wall time minus the 200 ms; the model is a ``ScriptedModel`` subclass that only stamps
   when its request starts and when its reply is ready, which splits the overhead into before
   the model, the model's sleep running late (event loop lag) and after the model. A task that
   sleeps 10 ms in a loop measures the event loop's lag throughout. The largest N that finishes
   within its time limit is reported; a run that does not finish is reported as such.
5. Where the time goes: one concurrent run under cProfile (event loop thread only: worker threads
   are not profiled), grouped by layer, and an "anatomy" of one turn run sequentially on an idle
   loop: its SQL statements and write transactions (SQLite trace callbacks on the store's
   connections), its store calls (counting wrappers on the store instance's public methods) and
   thread hops (``asyncio.to_thread`` counted while they run), and how a turn's cost grows with the
   turns already in the session.

The parts: ``memory``, ``creation``, ``concurrent``, ``anatomy`` (one module each, run in child
processes by ``run``), ``report`` and ``tables`` (the typed report and its printout).

A floor that is not a session's: pydantic-core keeps a process-wide cache of short strings it
parsed from JSON (ids, statuses), up to ~16,000 of them (~1.2 MB here, measured), so after
passivation a few hundred bytes per session can remain in a small run, bounded in total.

The step function returns ``{"text": "ok", "usage": {...}}``: with ``usage`` given the model does
not estimate tokens, which would scan the conversation and keep a memo of up to 4,096
conversations in the model object, memory that belongs to the model, not to the sessions.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.harness.cli import deliver
from benchmarks.harness.plots import Plot
from benchmarks.harness.report import RESULTS_DIR
from benchmarks.sessions.report import SessionsReport

__all__ = ["NAME", "PLOTS", "REPORT", "run_suite"]

NAME = "sessions"
REPORT = SessionsReport
PLOTS: list[Plot[SessionsReport]] = []


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> SessionsReport:
    """The suite's entry: measure, print, write ``out_dir/sessions.json``.

    ``quick`` is the suite's smoke size (a hundred sessions, two short turns each).
    """
    from benchmarks.sessions.run import measure

    report = measure(quick, smoke=quick)
    deliver(report, out_dir / f"{NAME}.json")
    return report
