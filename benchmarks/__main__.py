"""``python -m benchmarks``: run the benchmarks, each in its own process, then render the figures.

    python -m benchmarks                       # every benchmark, full size (the better part of an hour)
    python -m benchmarks --quick               # smallest sizes, seconds; figures mean nothing
    python -m benchmarks --only fork,recovery  # some of them (the page is re-rendered from all)
    python -m benchmarks --render-only         # just RESULTS.md and the plots from the stored suites

Each benchmark writes the pyperf suite ``<out>/<name>.json``; the suite then renders ``RESULTS.md``
(``benchmarks/RESULTS.md`` for the default folder, else into ``--out``) and the plots into
``<out>/plots/``; the docs' performance page is rendered from the same suites when the site is
built. ``--quick`` without ``--out`` writes into ``benchmarks/results/quick/``, so a smoke run never
replaces the stored figures. The exit status is 1 when a benchmark failed. Speed is never judged here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.harness.command import RESULTS_DIR
from benchmarks.harness.render import render_results
from benchmarks.harness.suite import BENCHMARKS, Status, run_one, select
from benchmarks.harness.versions import ROOT

MARKDOWN = ROOT / "benchmarks" / "RESULTS.md"
QUICK_DIR = RESULTS_DIR / "quick"


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
    stored = out.resolve() == RESULTS_DIR.resolve()
    statuses: list[Status] = []
    if not args.render_only:
        selected = select(args.only)
        for i, bench in enumerate(selected, 1):
            print(f"\n=== [{i}/{len(selected)}] {bench.name}: {bench.about} ===", file=sys.stderr, flush=True)
            statuses.append(run_one(bench, args.quick, out, not args.skip_peers))
    markdown = MARKDOWN if stored else out / "RESULTS.md"
    markdown, plots = render_results(out, markdown, out / "plots", [b.name for b in BENCHMARKS])
    print(f"\nwrote {markdown} and {len(plots)} plot(s)", file=sys.stderr)
    for s in statuses:
        took = "" if s.seconds is None else f" in {s.seconds} s"
        print(f"  {s.name:<13} {s.status:<8}{took} {s.detail}", file=sys.stderr)
    return 1 if any(s.status == "FAILED" for s in statuses) else 0


if __name__ == "__main__":
    sys.exit(main())
