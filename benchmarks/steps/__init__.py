"""Step benchmark: model steps per second of one session, repertory against LangGraph, on SQLite.

Run ``python -m benchmarks.steps [--quick] [--steps N]``. It prints a table and writes
``benchmarks/results/steps.json`` with the machine, the package versions, the durability of every
figure and the targets the figures are read against. Nothing here asserts a speed: a slow figure is
a finding, not a failure.

The workload is one session whose model calls one tool per step for N steps (default 1,000) and
then gives a final text reply, so a run makes N + 1 model requests. The tool returns ~1 KB of
text, so every step adds an assistant/tool message pair of ~1.35 KB of JSON. "steps/s" is model
requests per second of wall time for the whole run, from the user message to the final reply.

Why each part is shaped the way it is:

- repertory runs its public API: ``Session.start()`` on an ``Agent`` whose model is a
  ``ScriptedModel`` with no delay, against ``SqliteSessionStore.open(path, durability=...)``.
  The headline script is the plain list of steps a user writes. ``ScriptedModel`` then estimates
  usage and finds its step by scanning the whole conversation on every request, work that grows
  with the history and that a real model adapter does not do in the caller's process, so two
  variants of the same script are also timed: with ``"usage"`` given (no token-estimate scan) and
  as a step function (no scan at all), which leaves the engine's own cost. The tool is the default ``@tool``
  (not idempotent: the assistant message is committed before the tool runs, then the step is
  committed, so two commits per step, like LangGraph's two checkpoints per step) and, as a variant,
  ``@tool(idempotent=True)`` (one commit per step).
- LangGraph runs the way its users run it: a ``StateGraph(MessagesState)`` (``add_messages``
  reducer), a model node that returns the scripted ``AIMessage`` tool call (a plain function node,
  cheaper than any fake chat model, so the comparison leans LangGraph's way), the prebuilt
  ``ToolNode`` and ``tools_condition``, compiled with a checkpointer so every super-step is
  checkpointed, with LangGraph's defaults: ``durability`` not passed (so ``"async"``), the
  checkpointer as ``from_conn_string`` builds it (WAL, SQLite's default ``synchronous``).
  The headline is the sync ``SqliteSaver`` with ``graph.invoke()``, the path LangGraph's
  persistence docs show for SQLite; ``AsyncSqliteSaver`` with ``graph.ainvoke()`` is timed too.
  ``recursion_limit`` is raised to 2N + 10 (two super-steps per step).
The parts: ``workload`` (the repertory side), ``langgraph`` (the peer), ``profile`` (cProfile by
category), ``diagnostics`` (SQL per statement, pieces timed alone, bytes by run length), ``run``
(the rounds and the report), ``report`` and ``tables`` (the typed report and its printout).

- Disk is read after ``PRAGMA wal_checkpoint(TRUNCATE)`` on a separate connection: database plus
  WAL file (the ``-shm`` index is reported apart; it is not data).
- cProfile runs on separate runs of repertory (never on the timed ones). Self time is grouped
  into categories by the file a function lives in; builtins and generic helpers (``hasattr``,
  ``str.join``, ``ModelMessage.text``, ``contextlib``) are charged to their callers in proportion
  to the time each caller spent in them, so the categories add up to the profiled total. The
  profiler slows Python calls but not the C inside sqlite3, so the table gives the raw profiled
  microseconds, the share, and an estimate that keeps SQLite's time and scales the Python
  categories down to the unprofiled wall time.
- The SQL of a run is timed statement by statement on a separate run (the store's writer
  connection is a ``sqlite3.Connection`` subclass that times each statement), and the WAL pages
  one commit writes are counted on short runs.
- A few pieces are then timed alone, with no profiler, to put microseconds on the suggestions.
- The repertory tree may move while this runs; the git commit is read before and after.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.harness.cli import deliver
from benchmarks.harness.report import RESULTS_DIR
from benchmarks.steps.report import PLOTS, StepsReport

__all__ = ["NAME", "PLOTS", "REPORT", "SMOKE_RUN_LENGTHS", "SMOKE_STEPS", "run_suite"]

NAME = "steps"
REPORT = StepsReport
SMOKE_STEPS = 20
SMOKE_RUN_LENGTHS = (5, 10)


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> StepsReport:
    """The suite's entry: measure, print, write ``out_dir/steps.json``.

    ``quick`` is the suite's smoke size (20 steps, one round, no AsyncSqliteSaver run).
    """
    from benchmarks.steps.run import DEFAULT_STEPS, RUN_LENGTHS, measure

    if quick:
        report = measure(SMOKE_STEPS, True, 1, False, peers, True, SMOKE_RUN_LENGTHS)
    else:
        report = measure(DEFAULT_STEPS, False, 3, True, peers, run_lengths=RUN_LENGTHS)
    deliver(report, out_dir / f"{NAME}.json")
    return report
