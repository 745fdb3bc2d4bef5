"""Group commit benchmark: aggregate model steps/s of 1,000 concurrent sessions, group commit on and off.

Run ``python -m benchmarks.group_commit [--quick] [--no-postgres]``. It prints a table and writes
``benchmarks/results/group_commit.json`` (machine, load average before and after, every round).
Nothing here asserts a speed; the targets are read against the figures.

The workload (issue 8): N sessions (1,000; ``--quick`` 200) launched at once with
``asyncio.gather``, each ``Session.start()`` of one run whose zero-delay ``ScriptedModel`` calls a
tool K times (10; quick 4) and then replies, so a run makes K + 1 model requests; "model steps/s" is
all sessions' model requests over the wall time from launch to the last reply. The headline tool is
the default ``@tool`` (not idempotent: its call is committed before it runs, then the step, so two
commits a step, as in ``benchmarks.steps``). Also timed: ``@tool(idempotent=True)`` (one commit a
step); a model that hands the event loop over once per request (``asyncio.sleep(0)``, as a real
client does: a zero-delay model that never yields makes the sessions run one after another when
every commit is inline, so only with group commit on are a thousand sessions in flight at once,
with their memory and the garbage collector's work that goes with it); the cyclic garbage collector
disabled while timed (an application's choice, not the library's: it shows the collector's share);
and ``durability="full"`` (a sync per transaction).

Group commit on and off run in the same process, alternating round by round (on, off, off, on, ...)
on a fresh database each, so a change in the machine's load hits both; each figure is the median of
its rounds, and the ratio is median on over median off. CPU time per step (``time.process_time``)
is given beside wall time because this machine is shared: it is less disturbed by other processes.
The garbage collector's time is measured (``gc.callbacks``) and reported as a share, since cProfile
bills it to whatever function was running.

Lone commits, where group commit can only cost: one writer committing one engine step at a time
(``EngineSession``, a 1 KB message), latency p50 / p99 on and off; and one session alone running
500 steps. PostgreSQL (full mode, a throwaway local server, ``synchronous_commit=on``) runs the
session workload on and off too. One extra round on and off of the headline runs under cProfile,
grouped by layer with the garbage collector off (its share is measured on the timed rounds), to
show where the time goes.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.group_commit.report import GroupCommitReport
from benchmarks.harness.cli import deliver
from benchmarks.harness.plots import Plot
from benchmarks.harness.report import RESULTS_DIR

__all__ = ["NAME", "PLOTS", "REPORT", "run_suite"]

NAME = "group_commit"
REPORT = GroupCommitReport
PLOTS: list[Plot[GroupCommitReport]] = []


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> GroupCommitReport:
    """The suite's entry: measure, print, write ``out_dir/group_commit.json``."""
    from benchmarks.group_commit.run import measure

    report = measure(quick)
    deliver(report, out_dir / f"{NAME}.json")
    return report
