"""A benchmark's own command line (``python -m benchmarks.<name>``) and its suite entry, the same for all.

Every benchmark takes ``--quick`` (smaller sizes) and ``--out`` (the JSON report's path, by default
``benchmarks/results/<name>.json``) and adds its own options; it prints its tables, then writes the
report. The suite's entry (``run_suite``) prints and writes the same way into the suite's folder.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.harness.report import RESULTS_DIR, Report, write_report

__all__ = ["deliver", "parser"]


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
