"""``RESULTS.md`` and the plots, rendered from every JSON report in a results folder.

The reports may come from different runs (each benchmark can be rerun on its own), so the header
says what the renderer ran on, and the table says, row by row, when its figure was measured, in
which mode, under which load average, and the command that measures it again. Every number comes
from a report; nothing here is typed in by hand. A report that carries no summary rows (written
before reports did) is read into its benchmark's typed report, which works them out.
"""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from benchmarks.harness.machine import ROOT, cpu_model, git_state, memory_gb, version
from benchmarks.harness.plots import draw
from benchmarks.harness.report import Report, Row
from benchmarks.harness.suite import BENCHMARKS, SUITE_STATUS, Loaded, SuiteRun, load

__all__ = ["command", "load_reports", "render_results"]

# Distributions whose versions change the figures: repertory's own dependencies, then the peer.
HEADER_VERSIONS = (
    "repertory", "pydantic", "pydantic-core", "psycopg", "psycopg-pool", "ray", "numpy", "pyarrow", "duckdb",
    "rich", "typer", "langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite", "matplotlib",
)  # fmt: skip


def load_reports(folder: Path) -> dict[str, dict[str, Any]]:
    """Every ``*.json`` in ``folder`` that is a benchmark report, by benchmark name (as raw JSON)."""
    reports: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(data, dict) and isinstance(data.get("benchmark"), str):
            reports[data["benchmark"]] = data
    return reports


def _mode(report: dict[str, Any]) -> str:
    """``full``, ``quick`` or ``smoke``; older reports only say ``quick: true/false``."""
    if isinstance(report.get("mode"), str):
        return str(report["mode"])
    if "quick" in report:
        return "quick" if report["quick"] else "full"
    return "unknown"


def _shown(path: Path) -> str:
    """A path relative to the repository when it is inside it (no machine-specific prefix)."""
    try:
        return str(path.resolve().relative_to(ROOT)) + "/"
    except ValueError:
        return str(path)


def _header(results: Path) -> list[str]:
    git = git_state()
    dirty = " (repertory/ had uncommitted changes)" if git.get("repertory_tree_dirty") else ""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    versions = ", ".join(f"{d} {version(d) or 'not installed'}" for d in HEADER_VERSIONS)
    return [
        "# repertory benchmark results",
        "",
        f"Rendered by `python -m benchmarks` from the JSON reports in `{_shown(results)}`; every figure is",
        "read from a report, and each row names the command that measures it again. Speed is measured here,",
        "never asserted in a test. The machine may be shared: each row gives the 1-minute load average",
        "before and after its run.",
        "",
        f"- rendered: {time.strftime('%Y-%m-%d %H:%M:%S %z')}, load average (1/5/15 min) {load}",
        f"- machine: {platform.platform()}; {cpu_model()}; {os.cpu_count()} cores; {memory_gb()} RAM",
        f"- Python {sys.version.split()[0]} ({platform.python_implementation()}); SQLite {sqlite3.sqlite_version}",
        f"- versions: {versions}",
        f"- git commit: {git.get('git_commit') or 'unknown'}{dirty}",
    ]


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


class _Reading:
    """One report as the renderer sees it: the raw JSON, and the typed report when it validates."""

    def __init__(self, raw: dict[str, Any], loaded: Loaded | None) -> None:
        self.raw = raw
        self.typed: Report | None = None
        self.why = "" if loaded is not None else "no benchmark package of that name"
        if loaded is not None:
            try:
                self.typed = loaded.report.model_validate(raw)
            except ValidationError as exc:
                self.why = f"it does not match this version's report ({exc.error_count()} field errors; rerun)"

    def rows(self) -> list[Row] | None:
        """Its summary rows, read through its typed report when it loads (which may bring an older one's rows
        up to date), else its own raw rows; ``None`` if neither can be had."""
        if self.typed is not None:
            return self.typed.rows()
        own = self.raw.get("summary")
        if isinstance(own, list) and own:
            return [Row.model_validate(r) for r in own]
        return None if self.typed is None else self.typed.summarise()


def _table(readings: dict[str, _Reading]) -> list[str]:
    lines = [
        "| benchmark | metric | value | target | met? | load | command | note |",
        "| --- | --- | ---: | --- | --- | --- | --- | --- |",
    ]
    for name, reading in readings.items():
        raw = reading.raw
        rows = reading.rows()
        if not rows:
            why = "no summary rows in its report" if rows is not None else f"no summary rows: {reading.why}"
            lines.append(f"| {name} | ({why}) | - | - | - | {_load(raw)} | {command(raw)} | |")
        for r in rows or []:
            target = "-"
            if r.target is not None:
                sign = "<=" if r.target_is == "at most" else ">="
                target = f"{sign} {_with_unit(r.target, r.unit)}"
            met = {True: "yes", False: "**no**", None: "-"}[r.met]
            again = f"`{r.command}`" if r.command else command(raw)
            cells = [name, r.figure, _with_unit(r.value, r.unit), target, met, _load(raw), again, r.note]
            lines.append("| " + " | ".join(_cell(str(c)) for c in cells) + " |")
    return lines


def _runs(readings: dict[str, _Reading], folder: Path) -> list[str]:
    lines = ["| benchmark | mode | measured | seconds | git commit |", "| --- | --- | --- | ---: | --- |"]
    for name, reading in readings.items():
        r = reading.raw
        commit = (r.get("machine", {}).get("git_commit") or "-")[:10]
        lines.append(f"| {name} | {_mode(r)} | {r.get('created_at', '-')} | {_number(r.get('seconds'))} | "
                     f"{commit} |")  # fmt: skip
    status_path = folder / SUITE_STATUS
    if status_path.exists():
        status = SuiteRun.model_validate_json(status_path.read_text())
        lines += ["", f"Last suite run ({status.mode}, {status.finished_at}):", ""]
        lines += [f"- {s.name}: {s.status}{': ' + s.detail if s.detail else ''}" for s in status.benchmarks]
    return lines


def _plots(readings: dict[str, _Reading], folder: Path) -> tuple[list[Path], dict[str, str]]:
    written: list[Path] = []
    missing: dict[str, str] = {}
    for bench in BENCHMARKS:
        loaded = load(bench.name)
        for plot in loaded.plots if loaded is not None else []:
            reading = readings.get(bench.name)
            if reading is None or reading.typed is None or not plot.available(reading.typed):
                why = "" if reading is None or reading.typed is not None else f": {reading.why}"
                missing[plot.file] = (
                    f"no {bench.name}.json with {plot.needs!r}{why} (run python -m benchmarks.{bench.name})"
                )
                continue
            written.append(draw(plot, reading.typed, folder))
    return written, missing


def render_results(results: Path, markdown: Path, plots: Path) -> tuple[Path, list[Path]]:
    """Write ``markdown`` and the plots (into ``plots``) from the reports in ``results``."""
    raw = load_reports(results)
    registered = {b.name for b in BENCHMARKS}
    readings = {name: _Reading(raw[name], load(name) if name in registered else None) for name in _order(raw)}
    written, missing = _plots(readings, plots)
    lines = [*_header(results), "", "## Figures", "", *_table(readings)]
    lines += ["", "## Plots", ""]
    for path in written:
        rel = os.path.relpath(path, markdown.parent)
        lines.append(f"![{path.stem.replace('_', ' ')}]({rel})")
        lines.append("")
    lines += [f"- {name}: not drawn, {why}" for name, why in missing.items()]
    lines += ["", "## Runs", "", *_runs(readings, results)]
    markdown.parent.mkdir(parents=True, exist_ok=True)
    markdown.write_text("\n".join(lines).rstrip() + "\n")
    return markdown, written
