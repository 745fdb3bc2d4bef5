"""``python -m benchmarks``: run the benchmark suite, then render ``RESULTS.md`` and the plots.

    python -m benchmarks                       # every benchmark, full size (the better part of an hour)
    python -m benchmarks --quick               # smallest sizes, seconds; figures mean nothing
    python -m benchmarks --only fork,recovery  # some of them (then the table is re-rendered from all)
    python -m benchmarks --render-only         # just RESULTS.md and the plots from the JSON there

Each benchmark writes ``<out>/<name>.json``; the suite then renders ``RESULTS.md`` (into
``benchmarks/`` for the default results folder, else into ``--out``) and PNG plots into
``<out>/plots/`` from every report in the folder. ``--quick`` without ``--out`` writes into
``benchmarks/results/quick/`` so a smoke run never replaces the committed full-size figures.

A benchmark is reported as ``ran``, ``skipped`` (left out of quick mode, or a peer such as
LangGraph missing: install the ``bench`` extra), ``not present`` (a registered package that does
not exist yet) or ``FAILED`` (its traceback is printed and the suite goes on). The exit status is 1
when one failed, else 0. Speed is never judged here: a slow figure is a finding, not a failure.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from benchmarks.harness.render import render_results
from benchmarks.harness.report import RESULTS_DIR
from benchmarks.harness.suite import BENCHMARKS, SUITE_STATUS, Status, SuiteRun, run_one, select

MARKDOWN = RESULTS_DIR.parent / "RESULTS.md"
QUICK_DIR = RESULTS_DIR / "quick"


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run the selected benchmarks, render; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smallest sizes (seconds); checks the suite runs")
    parser.add_argument("--only", help="comma-separated benchmark names (default: all)")
    parser.add_argument("--skip-peers", action="store_true", help="leave out the LangGraph comparison")
    parser.add_argument("--out", type=Path, help=f"results folder (default: {RESULTS_DIR}; --quick: {QUICK_DIR})")
    parser.add_argument("--render-only", action="store_true", help="render RESULTS.md and plots, run nothing")
    parser.add_argument("--list", action="store_true", help="list the registered benchmarks and exit")
    args = parser.parse_args(argv)
    if args.list:
        for b in BENCHMARKS:
            print(f"{b.name:<13} {b.about}")
        return 0
    out: Path = args.out or (QUICK_DIR if args.quick else RESULTS_DIR)
    out.mkdir(parents=True, exist_ok=True)
    markdown = MARKDOWN if out.resolve() == RESULTS_DIR.resolve() else out / "RESULTS.md"
    statuses: list[Status] = []
    if not args.render_only:
        selected = select(args.only)
        started_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        for i, bench in enumerate(selected, 1):
            _say(f"\n=== [{i}/{len(selected)}] {bench.name}: {bench.about} ===")
            s = run_one(bench, args.quick, out, not args.skip_peers)
            statuses.append(s)
            took = "" if s.seconds is None else f" in {s.seconds} s"
            _say(f"=== {bench.name}: {s.status}{took}{': ' + s.detail if s.detail else ''}")
        run = SuiteRun(mode="quick" if args.quick else "full", started_at=started_at,
                       finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), benchmarks=statuses)  # fmt: skip
        (out / SUITE_STATUS).write_text(run.model_dump_json(indent=2) + "\n")
    path, plots = render_results(out, markdown, out / "plots")
    _say(f"\nwrote {path} and {len(plots)} plot(s) in {out / 'plots'}")
    for s in statuses:
        _say(f"  {s.name:<13} {s.status:<12} {s.detail}")
    return 1 if any(s.status == "FAILED" for s in statuses) else 0


if __name__ == "__main__":
    sys.exit(main())
