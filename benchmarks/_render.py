"""``RESULTS.md`` and the plots, rendered from every JSON report in a results folder.

The reports may come from different runs (each benchmark can be rerun on its own), so the header
says what the renderer ran on, and the table says, row by row, when its figure was measured, in
which mode, under which load average, and the command that measures it again. Every number comes
from a report; nothing here is typed in by hand.
"""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks._plots import draw_all
from benchmarks._registry import BENCHMARKS
from benchmarks._report import git_state
from benchmarks._summaries import summary_rows

__all__ = ["command", "load_reports", "render_results"]

# Distributions whose versions change the figures: repertory's own dependencies, then the peer.
_VERSIONS = (
    "repertory", "pydantic", "pydantic-core", "psycopg", "psycopg-pool", "ray", "numpy", "pyarrow", "duckdb",
    "rich", "typer", "langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite", "matplotlib",
)  # fmt: skip
SUITE_STATUS = "suite.json"


def load_reports(folder: Path) -> dict[str, dict[str, Any]]:
    """Every ``*.json`` in ``folder`` that is a benchmark report, by benchmark name."""
    reports: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(data, dict) and isinstance(data.get("benchmark"), str):
            reports[data["benchmark"]] = data
    return reports


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gb() -> str:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return "unknown"
    return f"{pages * size / 2**30:.1f} GB"


def _mode(report: dict[str, Any]) -> str:
    """``full``, ``quick`` or ``smoke``; older reports only say ``quick: true/false``."""
    if isinstance(report.get("mode"), str):
        return str(report["mode"])
    if "quick" in report:
        return "quick" if report["quick"] else "full"
    return "unknown"


def _header(results: Path) -> list[str]:
    git = git_state()
    dirty = " (repertory/ had uncommitted changes)" if git.get("repertory_tree_dirty") else ""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    versions = ", ".join(f"{d} {_version(d)}" for d in _VERSIONS)
    return [
        "# repertory benchmark results",
        "",
        f"Rendered by `python -m benchmarks` from the JSON reports in `{_shown(results)}`; every figure is",
        "read from a report, and each row names the command that measures it again. Speed is measured here,",
        "never asserted in a test. The machine may be shared: each row gives the 1-minute load average",
        "before and after its run.",
        "",
        f"- rendered: {time.strftime('%Y-%m-%d %H:%M:%S %z')}, load average (1/5/15 min) {load}",
        f"- machine: {platform.platform()}; {_cpu_model()}; {os.cpu_count()} cores; {_memory_gb()} RAM",
        f"- Python {sys.version.split()[0]} ({platform.python_implementation()}); SQLite {sqlite3.sqlite_version}",
        f"- versions: {versions}",
        f"- git commit: {git.get('git_commit') or 'unknown'}{dirty}",
    ]


def _shown(path: Path) -> str:
    """A path relative to the repository when it is inside it (no machine-specific prefix)."""
    root = Path(__file__).resolve().parent.parent
    try:
        return str(path.resolve().relative_to(root)) + "/"
    except ValueError:
        return str(path)


def _number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int) or (value.is_integer() and abs(value) < 1e15):
        return f"{int(value):,}"  # a target of 10.0 reads as 10
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _with_unit(value: Any, unit: str) -> str:
    text = _number(value)
    if text == "-" or not unit:
        return text
    return f"{text}{unit}" if unit in ("x", "%") else f"{text} {unit}"


def command(report: dict[str, Any]) -> str:
    """The command that measures a report's figures again, in the mode they were measured in."""
    name, mode = report["benchmark"], _mode(report)
    if mode == "smoke":
        return f"`python -m benchmarks --quick --only {name}`"
    return f"`python -m benchmarks.{name}{' --quick' if mode == 'quick' else ''}`"


def _load(report: dict[str, Any]) -> str:
    m = report.get("machine", {})
    before, after = m.get("load_average_before"), m.get("load_average_after")
    parts = [f"{x[0]:.1f}" for x in (before, after) if isinstance(x, list) and x]
    return " -> ".join(parts) if parts else "-"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _order(reports: dict[str, dict[str, Any]]) -> list[str]:
    known = [b.name for b in BENCHMARKS if b.name in reports]
    return known + sorted(set(reports) - set(known))


def _table(reports: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        "| benchmark | metric | value | target | met? | load | command | note |",
        "| --- | --- | ---: | --- | --- | --- | --- | --- |",
    ]
    for name in _order(reports):
        report = reports[name]
        rows = summary_rows(report)
        if not rows:
            lines.append(f"| {name} | (no summary rows in its report) | - | - | - | {_load(report)} | "
                         f"{command(report)} | |")  # fmt: skip
        for r in rows:
            target = "-"
            if r.get("target") is not None:
                sign = "<=" if r.get("target_is") == "at most" else ">="
                target = f"{sign} {_with_unit(r['target'], r.get('unit', ''))}"
            met = {True: "yes", False: "**no**", None: "-"}[r.get("met")]
            cells = [name, r["figure"], _with_unit(r.get("value"), r.get("unit", "")), target, met, _load(report),
                     command(report), r.get("note", "")]  # fmt: skip
            lines.append("| " + " | ".join(_cell(str(c)) for c in cells) + " |")
    return lines


def _runs(reports: dict[str, dict[str, Any]], folder: Path) -> list[str]:
    lines = ["| benchmark | mode | measured | seconds | git commit |", "| --- | --- | --- | ---: | --- |"]
    for name in _order(reports):
        r = reports[name]
        commit = (r.get("machine", {}).get("git_commit") or "-")[:10]
        lines.append(f"| {name} | {_mode(r)} | {r.get('created_at', '-')} | {_number(r.get('seconds'))} | "
                     f"{commit} |")  # fmt: skip
    status_path = folder / SUITE_STATUS
    if status_path.exists():
        status = json.loads(status_path.read_text())
        lines += ["", f"Last suite run ({status.get('mode')}, {status.get('finished_at')}):", ""]
        lines += [f"- {s['name']}: {s['status']}{': ' + s['detail'] if s.get('detail') else ''}"
                  for s in status.get("benchmarks", [])]  # fmt: skip
    return lines


def render_results(results: Path, markdown: Path, plots: Path) -> tuple[Path, list[Path]]:
    """Write ``markdown`` and the plots (into ``plots``) from the reports in ``results``."""
    reports = load_reports(results)
    written, missing = draw_all(reports, plots)
    lines = [*_header(results), "", "## Figures", "", *_table(reports)]
    lines += ["", "## Plots", ""]
    for path in written:
        rel = os.path.relpath(path, markdown.parent)
        lines.append(f"![{path.stem.replace('_', ' ')}]({rel})")
        lines.append("")
    lines += [f"- {name}: not drawn, {why}" for name, why in missing.items()]
    lines += ["", "## Runs", "", *_runs(reports, results)]
    markdown.parent.mkdir(parents=True, exist_ok=True)
    markdown.write_text("\n".join(lines).rstrip() + "\n")
    return markdown, written
