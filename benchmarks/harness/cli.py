"""A benchmark's own command line (``python -m benchmarks.<name>``) and its suite entry, the same for all.

Every benchmark takes ``--quick`` (smaller sizes) and ``--out`` (the JSON report's path, by default
``benchmarks/results/<name>.json``) and adds its own options; it prints its tables, then writes the
report. The suite's entry (``run_suite``) prints and writes the same way into the suite's folder.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from benchmarks.harness.report import RESULTS_DIR, Report, write_report

__all__ = ["deliver", "in_temp_folder", "main_of", "parser", "suite_entry"]

R = TypeVar("R", bound=Report)


def parser(name: str, doc: str | None, quick_help: str) -> argparse.ArgumentParser:
    """The argument parser of ``python -m benchmarks.<name>``, with ``--quick`` and ``--out``."""
    out = RESULTS_DIR / f"{name}.json"
    p = argparse.ArgumentParser(prog=f"python -m benchmarks.{name}", description=(doc or "").strip().splitlines()[0])
    p.add_argument("--quick", action="store_true", help=quick_help)
    p.add_argument("--out", type=Path, default=out, help=f"JSON report path (default: {out})")
    return p


def deliver(report: Report, path: Path) -> Path:
    """Print the report's tables and write it to ``path``; returns the path."""
    print(report.render(), flush=True)
    written = write_report(report, path)
    print(f"\nwrote {written}", flush=True)
    return written


def in_temp_folder(name: str, measure_async: Callable[[bool, Path], Coroutine[Any, Any, R]], quick: bool) -> R:
    """``measure_async(quick, folder)`` run to its end in a fresh temporary folder, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=f"repertory-{name}-") as folder:
        return asyncio.run(measure_async(quick, Path(folder)))


def suite_entry(name: str, measure: Callable[[bool], R], quick: bool, out_dir: Path) -> R:
    """A benchmark module's ``run_suite``: measure, print, write ``out_dir/<name>.json``; the report."""
    report = measure(quick)
    deliver(report, out_dir / f"{name}.json")
    return report


def main_of(
    name: str, doc: str | None, quick_help: str, measure: Callable[[bool], Report], argv: list[str] | None
) -> None:
    """A benchmark module's ``main``: ``--quick`` and ``--out`` parsed, then measure and deliver."""
    args = parser(name, doc, quick_help).parse_args(argv)
    deliver(measure(args.quick), args.out)
