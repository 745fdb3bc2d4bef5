"""What the suite's benchmarks share: the report frame, summary rows, JSON writing, progress bars.

Every benchmark the suite runs (``python -m benchmarks``) exposes one entry::

    def run_suite(quick: bool, out_dir: Path, peers: bool = True) -> dict[str, Any]

It measures (``quick``: the smallest sizes that still exercise every code path, seconds not
minutes), writes ``out_dir/<name>.json`` and returns that report. A report's ``summary`` is a list
of rows made by ``row()`` (the shape ``benchmarks.ray`` already used), which the suite turns into
one line each of ``RESULTS.md``; the rest of the report is every figure measured, for whoever
wants to look closer. Speed is measured here, never asserted (DESIGN.md, rule 8).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from benchmarks._report import machine_info, percentile

__all__ = [
    "RESULTS_DIR",
    "simple_main",
    "suite_entry",
    "dist_ms",
    "finish",
    "progress",
    "row",
    "start_report",
    "write_report",
]

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def start_report(name: str, mode: str, **fields: Any) -> dict[str, Any]:
    """The frame of a report: what ran, when, in which mode, on which machine (load average before)."""
    return {
        "benchmark": name,
        "mode": mode,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine_info(),
        **fields,
    }


def finish(report: dict[str, Any], started: float) -> dict[str, Any]:
    """Stamp the load average after and the seconds the run took: a busy machine slows every figure."""
    report["machine"]["load_average_after"] = list(os.getloadavg())
    report["seconds"] = round(time.perf_counter() - started, 2)
    return report


def row(
    figure: str,
    value: float | int | None,
    unit: str,
    target: float | None = None,
    at_most: bool = True,
    note: str = "",
) -> dict[str, Any]:
    """One summary line: a figure, its target (``at_most`` or at least) and whether it is met."""
    met = None
    if target is not None and value is not None:
        met = value <= target if at_most else value >= target
    return {
        "figure": figure,
        "value": value,
        "unit": unit,
        "target": target,
        "target_is": None if target is None else ("at most" if at_most else "at least"),
        "met": met,
        "note": note,
    }


def dist_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50, p90, p99, max, mean and min of durations in seconds, in milliseconds."""
    if not seconds:
        return {}
    return {
        "p50_ms": percentile(seconds, 0.5) * 1e3,
        "p90_ms": percentile(seconds, 0.9) * 1e3,
        "p99_ms": percentile(seconds, 0.99) * 1e3,
        "max_ms": max(seconds) * 1e3,
        "mean_ms": statistics.fmean(seconds) * 1e3,
        "min_ms": min(seconds) * 1e3,
        "count": len(seconds),
    }


def write_report(report: dict[str, Any], path: Path) -> Path:
    """Write the JSON report atomically: a run killed half-way never leaves half a file to render."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=2, default=str) + "\n")
    os.replace(tmp, path)
    return path


@contextmanager
def progress(description: str, total: int) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr for a long loop; yields ``advance(n)``.

    On a terminal it redraws in place; captured (a test, a log file) it prints its final state once.
    """
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
    )
    with bar:
        task = bar.add_task(description, total=total)

        def advance(n: int = 1) -> None:
            bar.advance(task, n)

        yield advance


def suite_entry(name: str, measure: Callable[[bool], dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """A module's ``run_suite``: ``measure(quick)``, write ``out_dir/<name>.json``, return the report."""

    def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> dict[str, Any]:
        report = measure(quick)
        write_report(report, out_dir / f"{name}.json")
        return report

    run_suite.__doc__ = f"The suite's entry: measure, write ``out_dir/{name}.json``, return the report."
    return run_suite


def simple_main(
    name: str, doc: str | None, measure: Callable[[bool], dict[str, Any]], quick_help: str
) -> Callable[[list[str] | None], None]:
    """A module's ``main`` when it takes only ``--quick`` and ``--out``: measure, write, say where."""

    def main(argv: list[str] | None = None) -> None:
        parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{name}", description=(doc or "").splitlines()[0])
        parser.add_argument("--quick", action="store_true", help=quick_help)
        parser.add_argument("--out", type=Path, default=RESULTS_DIR / f"{name}.json", help="JSON report path")
        args = parser.parse_args(argv)
        print(f"wrote {write_report(measure(args.quick), args.out)}")

    return main
