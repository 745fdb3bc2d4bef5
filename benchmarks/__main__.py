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
LangGraph missing: install the ``bench`` extra), ``not present`` (a registered module whose file
does not exist yet) or ``FAILED`` (its traceback is printed and the suite goes on). The exit status
is 1 when one failed, else 0. Speed is never judged here: a slow figure is a finding, not a failure.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from benchmarks._registry import BENCHMARKS, Benchmark, entry_of, load
from benchmarks._render import SUITE_STATUS, render_results
from benchmarks._suite import RESULTS_DIR, write_report

MARKDOWN = RESULTS_DIR.parent / "RESULTS.md"
QUICK_DIR = RESULTS_DIR / "quick"


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _run_one(bench: Benchmark, quick: bool, out: Path, peers: bool) -> dict[str, Any]:
    """Run one benchmark through its entry; what happened, for the suite's status."""
    status: dict[str, Any] = {"name": bench.name, "status": "ran", "seconds": None, "detail": ""}
    if quick and bench.quick_skip:
        return {**status, "status": "skipped", "detail": f"quick mode: {bench.quick_skip}"}
    started = time.perf_counter()
    try:
        module = load(bench.name)
        if module is None:
            return {**status, "status": "not present", "detail": f"no benchmarks/{bench.name}.py yet"}
        entry = entry_of(module)
        if entry is None:
            return {**status, "status": "skipped", "detail": "the module has no run_suite(quick, out_dir, peers) entry"}
        accepted = inspect.signature(entry).parameters
        kwargs: dict[str, Any] = {"quick": quick}
        if "out_dir" in accepted:
            kwargs["out_dir"] = out
        if "peers" in accepted:
            kwargs["peers"] = peers
        report = entry(**kwargs)
        if "out_dir" not in accepted and isinstance(report, dict):
            write_report(report, out / f"{bench.name}.json")  # an entry that only returns its report
    except Exception:  # one benchmark failing must not stop the others
        traceback.print_exc()
        return {**status, "status": "FAILED", "seconds": round(time.perf_counter() - started, 1),
                "detail": traceback.format_exc(limit=1).strip().splitlines()[-1]}  # fmt: skip
    status["seconds"] = round(time.perf_counter() - started, 1)
    if report.get("failed"):  # a part failed, the rest was measured and written
        failed = "; ".join(f"{k}: {v}" for k, v in report["failed"].items())
        return {**status, "status": "FAILED", "detail": f"in part: {failed}"}
    missing_peers = {k: v for k, v in (report.get("peers") or {}).items() if v != "measured"}
    if missing_peers:
        status["detail"] = "; ".join(f"peer {k} skipped: {v}" for k, v in missing_peers.items())
    return status


def _select(only: str | None) -> list[Benchmark]:
    if not only:
        return list(BENCHMARKS)
    names = [n.strip() for n in only.split(",") if n.strip()]
    known = {b.name: b for b in BENCHMARKS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[n] for n in names]


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
    statuses: list[dict[str, Any]] = []
    if not args.render_only:
        selected = _select(args.only)
        mode = "quick" if args.quick else "full"
        started_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        for i, bench in enumerate(selected, 1):
            _say(f"\n=== [{i}/{len(selected)}] {bench.name}: {bench.about} ===")
            statuses.append(_run_one(bench, args.quick, out, not args.skip_peers))
            s = statuses[-1]
            took = "" if s["seconds"] is None else f" in {s['seconds']} s"
            _say(f"=== {bench.name}: {s['status']}{took}{': ' + s['detail'] if s['detail'] else ''}")
        status = {"mode": mode, "started_at": started_at, "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                  "benchmarks": statuses}  # fmt: skip
        (out / SUITE_STATUS).write_text(json.dumps(status, indent=2) + "\n")
    path, plots = render_results(out, markdown, out / "plots")
    _say(f"\nwrote {path} and {len(plots)} plot(s) in {out / 'plots'}")
    for s in statuses:
        _say(f"  {s['name']:<13} {s['status']:<12} {s['detail']}")
    return 1 if any(s["status"] == "FAILED" for s in statuses) else 0


if __name__ == "__main__":
    sys.exit(main())
