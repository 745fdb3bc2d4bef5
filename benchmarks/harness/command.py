"""``python -m benchmarks.<name>``: one benchmark's command line, its pyperf ``Runner``, its figures written.

A benchmark module calls ``main`` with up to two parts:

- ``timings(timer, options)``: calls timed by pyperf's ``Runner`` (calibrated loops, warm-ups,
  values from several worker processes); it runs in the parent and again in each worker, so it
  must only declare its timings, each of which builds what it needs lazily, once per process;
- ``scenario(figures, options)``: the workload measured once, in the parent only (a fleet of
  sessions, a server killed, a store filled): it records its figures itself.

``--quick`` runs the smallest sizes (one worker process, one value, no calibration): it proves the
code runs and its figures mean nothing. pyperf's own options (``--processes``, ``--values``,
``--rigorous``, ``--affinity``...) apply to the timings. The suite is written to ``--out``
(default ``benchmarks/results/<name>.json``) and its figures printed.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import sys
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyperf

from benchmarks.harness.figures import Figures, Target
from benchmarks.harness.suite import HOMES
from benchmarks.harness.versions import ROOT

__all__ = ["RESULTS_DIR", "Options", "Timer", "main"]

RESULTS_DIR = ROOT / "benchmarks" / "results"


@dataclass(frozen=True)
class Options:
    """What a run was asked for: the mode, the peers, where it writes, the benchmark's own options."""

    name: str
    quick: bool
    peers: bool
    out: Path
    args: argparse.Namespace

    @property
    def mode(self) -> str:
        """``quick`` or ``full``."""
        return "quick" if self.quick else "full"


class Timer:
    """pyperf's ``Runner`` for one benchmark; a coroutine's timing runs on one loop per process."""

    def __init__(self, name: str, runner: pyperf.Runner, figures: Figures | None) -> None:
        self._name = name
        self._runner = runner
        self._figures = figures
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def figures(self) -> Figures | None:
        """Where a figure worked out from timings (a ratio) is recorded: ``None`` in a worker."""
        return None if self._runner.args.worker else self._figures

    def bench(
        self, name: str, time_loops: Callable[[int], float], *, note: str = "", target: Target | None = None
    ) -> pyperf.Benchmark | None:
        """``time_loops(loops)`` returns the seconds ``loops`` calls took; pyperf calibrates and repeats it.

        Returns the benchmark in the parent (a ratio of two timings is worked out from them), else ``None``.
        """
        bench = self._runner.bench_time_func(f"{self._name}: {name}", time_loops)
        if bench is None or self._figures is None or self._runner.args.worker:
            return None
        self._figures.add(bench, note=note, target=target)
        return bench

    def bench_async(
        self,
        name: str,
        time_loops: Callable[[int], Awaitable[float]],
        *,
        note: str = "",
        target: Target | None = None,
    ) -> pyperf.Benchmark | None:
        """``bench`` for a coroutine function: every value of a process runs on the same event loop,
        so what it builds once (a runtime, a store) serves every later value."""

        def run(loops: int) -> float:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
            return self._loop.run_until_complete(time_loops(loops))

        return self.bench(name, run, note=note, target=target)

    def run_until_complete(self, work: Awaitable[Any]) -> None:
        """Run ``work`` (closing what the timings built) on the loop they ran on, if they ran."""
        if self._loop is not None:
            self._loop.run_until_complete(work)
        else:
            asyncio.run(_awaited(work))

    def close(self) -> None:
        """Close the loop the timings ran on."""
        if self._loop is not None:
            self._loop.close()


Scenario = Callable[[Figures, Options], Awaitable[None] | None]
Timings = Callable[[Timer, Options], object]


def _forward(cmd: list[str], args: argparse.Namespace) -> None:
    """The options a worker process needs again (pyperf passes its own)."""
    if args.quick:
        cmd.append("--quick")
    if args.skip_peers:
        cmd.append("--skip-peers")


def main(
    name: str,
    doc: str | None,
    *,
    scenario: Scenario | None = None,
    timings: Timings | None = None,
    add_args: Callable[[argparse.ArgumentParser], None] | None = None,
    processes: int = 5,
    values: int = 3,
    argv: list[str] | None = None,
) -> None:
    """Run one benchmark from its command line; exits 1 when a part failed (what was measured is written)."""
    argv = sys.argv[1:] if argv is None else argv
    quick = "--quick" in argv
    runner = pyperf.Runner(
        processes=1 if quick else processes,
        values=1 if quick else values,
        warmups=0 if quick else 1,
        loops=1 if quick else 0,
        program_args=("-m", _module(name)),
        add_cmdline_args=_forward,
    )
    parser = runner.argparser
    parser.description = (doc or name).strip().splitlines()[0]
    parser.add_argument("--quick", action="store_true", help="the smallest sizes: proves the code runs")
    parser.add_argument("--skip-peers", action="store_true", help="leave out the peers (LangGraph)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / f"{name}.json", help="the pyperf JSON written")
    if add_args is not None:
        add_args(parser)
    args = runner.parse_args(argv)
    options = Options(name=name, quick=args.quick, peers=not args.skip_peers, out=args.out, args=args)
    figures = None if args.worker else Figures(name, "quick" if args.quick else "full", _command(name, args.quick))
    failed = ""
    if timings is not None:
        timer = Timer(name, runner, figures)
        try:
            timings(timer, options)
        finally:
            timer.close()
    if figures is None:  # a worker: its one timing is done and sent to the parent
        return
    if scenario is not None:
        try:
            outcome = scenario(figures, options)
            if inspect.isawaitable(outcome):
                asyncio.run(_awaited(outcome))
        except Exception:  # what was measured before the failure is still written, and the run fails
            traceback.print_exc()
            failed = traceback.format_exc(limit=1).strip().splitlines()[-1]
    path = figures.write(options.out, failed=failed)
    from benchmarks.harness.render import print_suite

    print_suite(path)
    if failed:
        sys.exit(1)


async def _awaited(outcome: Awaitable[Any]) -> None:
    await outcome


def _module(name: str) -> str:
    return HOMES.get(name, f"benchmarks.{name}")


def _command(name: str, quick: bool) -> str:
    return f"python -m {_module(name)}{' --quick' if quick else ''}"
