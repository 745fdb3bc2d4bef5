"""The one renderer: every table and plot of ``benchmarks/RESULTS.md`` and of the docs' performance page.

It reads the pyperf suites in a results folder (one per benchmark, written by
``benchmarks.harness.figures``) and nothing else: a figure's unit, target, note and plot ride in its
metadata, so no benchmark has report code. The suites may come from different runs (each benchmark
can be rerun alone), so each benchmark's table says when, in which mode, under which load and on
which commit it was measured, and the command that measures it again.
"""

from __future__ import annotations

import os
import platform
import sqlite3
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyperf

from benchmarks.harness.figures import FRAME
from benchmarks.harness.versions import ROOT, VERSIONS, git_commit, version

__all__ = ["figure_table", "load_suites", "print_suite", "render_results"]


def load_suites(folder: Path) -> dict[str, pyperf.BenchmarkSuite]:
    """Every pyperf suite in ``folder`` written by a benchmark (it has a frame), by benchmark name."""
    suites: dict[str, pyperf.BenchmarkSuite] = {}
    for path in sorted(folder.glob("*.json")):
        try:
            suite = pyperf.BenchmarkSuite.load(str(path))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a pyperf suite (suite.json, a stray file)
        frames = [b for b in suite.get_benchmarks() if b.get_name().endswith(f": {FRAME}")]
        if frames:
            suites[frames[0].get_name().rsplit(": ", 1)[0]] = suite
    return suites


def _number(value: float) -> str:
    if value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _shown(bench: pyperf.Benchmark, value: float) -> str:
    unit = bench.get_unit()
    if unit in ("second", "byte"):
        return str(bench.format_value(value))
    shown = str(bench.get_metadata().get("shown", ""))
    text = _number(value)
    return f"{text}{shown}" if shown in ("x", "%", "") else f"{text} {shown}"


def _spread(bench: pyperf.Benchmark) -> str:
    n = bench.get_nvalue()
    if n >= 20:
        return f"p99 {_shown(bench, bench.percentile(99))} (n={n:,})"
    if n >= 2:
        return f"± {_shown(bench, bench.stdev())} (n={n})"
    return ""


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _frame(suite: pyperf.BenchmarkSuite) -> pyperf.Benchmark:
    return next(b for b in suite.get_benchmarks() if b.get_name().endswith(f": {FRAME}"))


def _figure_rows(name: str, suite: pyperf.BenchmarkSuite) -> list[list[str]]:
    rows: list[list[str]] = []
    for bench in suite.get_benchmarks():
        meta = bench.get_metadata()
        figure = bench.get_name().removeprefix(f"{name}: ")
        if figure == FRAME:
            continue
        value = bench.median()
        target, met = "-", "-"
        if "target" in meta:
            at_most = meta.get("target_is") == "at most"
            target = f"{'<=' if at_most else '>='} {_shown(bench, float(meta['target']))}"
            ok = value <= float(meta["target"]) if at_most else value >= float(meta["target"])
            met = "yes" if ok else "**no**"
        note = str(meta.get("note", ""))
        if "command" in meta and meta["command"] != _frame(suite).get_metadata().get("command"):
            note = f"{note} (`{meta['command']}`)".strip()
        rows.append([figure, _shown(bench, value), _spread(bench), target, met, note])
    frame = _frame(suite).get_metadata()
    for key, value in frame.items():
        if key.startswith("value "):
            figure = key.removeprefix("value ")
            shown = f"{value:,}" if isinstance(value, int) else str(value)
            target, met = "-", "-"
            if isinstance(value, int) and f"target {figure}" in frame:
                side, _, bound = str(frame[f"target {figure}"]).rpartition(" ")
                at_most = side == "at most"
                target = f"{'<=' if at_most else '>='} {bound}"
                met = "yes" if (value <= float(bound) if at_most else value >= float(bound)) else "**no**"
            rows.append([figure, shown, "", target, met, ""])
    return rows


def figure_table(name: str, suite: pyperf.BenchmarkSuite) -> list[str]:
    """One benchmark's figures as a markdown table, then the line saying how they were measured."""
    frame = _frame(suite).get_metadata()
    lines = ["| figure | value | spread | target | met? | note |", "| --- | ---: | --- | --- | --- | --- |"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in _figure_rows(name, suite)]
    load = f"{float(frame.get('load_avg_before', 0)):.1f} -> {float(frame.get('load_avg_after', 0)):.1f}"
    seconds = _frame(suite).median()
    lines += [
        "",
        f"Measured {frame.get('date', '?')[:16]}, {frame.get('mode', '?')} mode, {seconds:,.0f} s, load average "
        f"{load}, on {frame.get('cpu_count', '?')} cores, git `{str(frame.get('git_commit', '?'))[:10]}`: "
        f"`{frame.get('command', '?')}`.",
    ]
    facts = [f"{k}: {v}" for k, v in frame.items() if k.startswith("fact ")]
    if facts:
        lines += ["", "; ".join(f.removeprefix("fact ") for f in facts) + "."]
    if frame.get("failed"):
        lines += ["", f"**A part failed**: {frame['failed']}"]
    return lines


def print_suite(path: Path) -> None:
    """Print one benchmark's table (what ``python -m benchmarks.<name>`` shows after its run)."""
    suite = pyperf.BenchmarkSuite.load(str(path))
    name = _frame(suite).get_name().rsplit(": ", 1)[0]
    print("\n".join(["", f"{name}:", *figure_table(name, suite), "", f"wrote {path}"]), flush=True)


def _points(suites: Iterable[pyperf.BenchmarkSuite]) -> dict[str, list[pyperf.Benchmark]]:
    plots: dict[str, list[pyperf.Benchmark]] = {}
    for suite in suites:
        for bench in suite.get_benchmarks():
            file = bench.get_metadata().get("plot")
            if isinstance(file, str):
                plots.setdefault(file, []).append(bench)
    return plots


def _draw(file: str, points: list[pyperf.Benchmark], folder: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # before pyplot: no display here
    import matplotlib.pyplot as plt

    meta = points[0].get_metadata()
    series: dict[str, list[tuple[float, float]]] = {}
    for bench in points:
        m = bench.get_metadata()
        scale = 1000.0 if bench.get_unit() == "second" else 1.0  # times are drawn in ms
        series.setdefault(str(m["series"]), []).append((float(m["x"]), bench.median() * scale))
    folder.mkdir(parents=True, exist_ok=True)
    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=100)
    try:
        for label, xy in series.items():
            xy.sort()
            axes.plot([x for x, _ in xy], [y for _, y in xy], marker="o", label=label)
        if meta.get("log_x"):
            axes.set_xscale("log")
        if meta.get("log_y"):
            axes.set_yscale("log")
        axes.set_title(f"{meta['plot_title']}\n{meta.get('cpu_count', '?')} CPUs, {meta.get('date', '')[:10]}",
                       fontsize=10)  # fmt: skip
        axes.set_xlabel(str(meta["x_label"]))
        axes.set_ylabel(str(meta["y_label"]))
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize=8)
        figure.tight_layout()
        path = folder / file
        figure.savefig(path)
    finally:
        plt.close(figure)
    return path


def _header(results: Path) -> list[str]:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    versions = ", ".join(f"{d} {version(d) or 'not installed'}" for d in VERSIONS)
    try:
        shown = str(results.resolve().relative_to(ROOT)) + "/"
    except ValueError:
        shown = str(results)
    return [
        "# repertory benchmark results",
        "",
        f"Rendered by `python -m benchmarks` from the pyperf suites in `{shown}`; every figure is read from",
        "them, and each table names the command that measures it again. Speed is measured, never asserted",
        "in a test. The machine may be shared: each table gives the load average before and after its run.",
        "`python -m pyperf show benchmarks/results/<name>.json` shows a suite's values and metadata.",
        "",
        f"- rendered: {time.strftime('%Y-%m-%d %H:%M:%S %z')}, load average (1/5/15 min) {load}",
        f"- machine: {platform.platform()}; {os.cpu_count()} cores",
        f"- Python {sys.version.split()[0]} ({platform.python_implementation()}); SQLite {sqlite3.sqlite_version}",
        f"- versions: {versions}",
        f"- git commit: {git_commit()}",
    ]


def render_results(results: Path, markdown: Path, plots: Path, order: Iterable[str] = ()) -> tuple[Path, list[Path]]:
    """Write ``markdown`` (its figures from ``## Figures`` on) and the plots (into ``plots``) from ``results``."""
    suites = load_suites(results)
    first = [n for n in order if n in suites]
    names = first + sorted(set(suites) - set(first))
    written = [_draw(file, points, plots) for file, points in sorted(_points(suites.values()).items())]
    lines = [*_header(results), "", "## Figures", ""]
    for name in names:
        lines += [f"### {name}", "", *figure_table(name, suites[name]), ""]
    lines += ["## Plots", ""]
    for path in written:
        lines += [f"![{path.stem.replace('_', ' ')}]({os.path.relpath(path, markdown.parent)})", ""]
    markdown.parent.mkdir(parents=True, exist_ok=True)
    markdown.write_text("\n".join(lines).rstrip() + "\n")
    return markdown, written
