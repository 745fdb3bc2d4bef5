"""The suite's PNG plots, drawn from the JSON reports with matplotlib's Agg backend (no display).

Each plot needs one report; a plot whose report is missing (a benchmark not run yet, or skipped)
is left out and named in the list of what was not drawn, never drawn from made-up points.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: no display here, and no GUI toolkit is wanted

import matplotlib.pyplot as plt
from matplotlib.axes import Axes

__all__ = ["PLOTS", "draw_all"]

Reports = dict[str, dict[str, Any]]


def _subtitle(report: dict[str, Any]) -> str:
    m = report.get("machine", {})
    loads = [f"{m[k][0]:.1f} at {when}" for k, when in (("load_average_before", "start"), ("load_average_after", "end"))
             if isinstance(m.get(k), list) and m[k]]  # fmt: skip
    return f"{report.get('mode', '?')} run, {m.get('cpu_count', '?')} CPUs, load average {', '.join(loads) or '?'}"


def _log_x(axes: Axes, values: list[int]) -> None:
    """A log x axis labelled at the measured points (10, 1,000, ...) rather than at powers of ten."""
    axes.set_xscale("log")
    ticks = sorted(set(values))
    axes.set_xticks(ticks, labels=[f"{v:,}" for v in ticks])
    axes.minorticks_off()


def _throughput(reports: Reports, axes: Axes) -> None:
    report = reports["concurrency"]
    for backend, marker in (("local", "o"), ("ray", "s")):
        runs = [r for r in report["results"] if r["backend"] == backend and r["finished"]]
        if runs:
            n = [r["sessions"] for r in runs]
            axes.plot(n, [r["turns_per_s"] for r in runs], marker=marker, label=f"{backend}: turns/s")
            axes.plot(n, [r["steps_per_s"] for r in runs], marker=marker, linestyle="--", label=f"{backend}: steps/s")
    model = report["model"]
    _log_x(axes, [r["sessions"] for r in report["results"] if r["finished"]])
    axes.set_xlabel("concurrent sessions")
    axes.set_ylabel("per second")
    axes.set_title(
        f"Throughput vs concurrency (log-normal model delay, median {model['median_delay_ms']:.0f} ms)\n"
        + _subtitle(report),
        fontsize=9,
    )


def _latency(reports: Reports, axes: Axes) -> None:
    report = reports["concurrency"]
    for backend, marker in (("local", "o"), ("ray", "s")):
        runs = [r for r in report["results"] if r["backend"] == backend and r["finished"]]
        if runs:
            n = [r["sessions"] for r in runs]
            axes.plot(n, [r["latency"]["p50_ms"] for r in runs], marker=marker, label=f"{backend}: p50")
            axes.plot(n, [r["latency"]["p99_ms"] for r in runs], marker=marker, linestyle="--", label=f"{backend}: p99")
    axes.set_yscale("log")
    _log_x(axes, [r["sessions"] for r in report["results"] if r["finished"]])
    axes.set_xlabel("concurrent sessions")
    axes.set_ylabel("turn latency, ms")
    axes.set_title("Turn latency vs concurrency (two model steps per turn)\n" + _subtitle(report), fontsize=9)


def _fork(reports: Reports, axes: Axes) -> None:
    report = reports["fork"]
    results = report["results"]
    depth = [r["depth"] for r in results]
    axes.plot(depth, [r["fork"]["p50_ms"] for r in results], marker="o", label="fork(), p50")
    axes.plot(depth, [r["fork"]["p99_ms"] for r in results], marker="o", linestyle="--", label="fork(), p99")
    axes.plot(depth, [r["first_turn_after_fork"]["p50_ms"] for r in results], marker="s", label="first turn after")
    axes.plot(depth, [r["second_turn_after_fork"]["p50_ms"] for r in results], marker="^", label="second turn after")
    axes.set_yscale("log")
    _log_x(axes, depth)
    axes.set_xlabel("history length (messages) at the fork")
    axes.set_ylabel("ms")
    axes.set_title("Fork cost vs history length (SQLite)\n" + _subtitle(report), fontsize=9)


def _bytes_per_step(reports: Reports, axes: Axes) -> None:
    report = reports["steps"]
    rows = report["bytes_by_run_length"]["rows"]
    for who, marker in (("repertory", "o"), ("langgraph", "s")):
        points = [(r["steps"], r[f"{who}_bytes_per_step"]) for r in rows if f"{who}_bytes_per_step" in r]
        if points:
            label = "repertory" if who == "repertory" else "LangGraph + SqliteSaver"
            axes.plot([p[0] for p in points], [p[1] for p in points], marker=marker, label=label)
    axes.set_yscale("log")
    _log_x(axes, [r["steps"] for r in rows])
    axes.set_xlabel("run length (tool steps)")
    axes.set_ylabel("bytes on disk per step")
    axes.set_title("Bytes per step vs run length (SQLite, empty database taken off)\n" + _subtitle(report), fontsize=9)


# file name -> (reports it needs, the key that must be in the first one, how to draw it)
PLOTS: dict[str, tuple[str, str, Callable[[Reports, Axes], None]]] = {
    "throughput_vs_concurrency.png": ("concurrency", "results", _throughput),
    "latency_vs_concurrency.png": ("concurrency", "results", _latency),
    "fork_cost_vs_history_length.png": ("fork", "results", _fork),
    "bytes_per_step_vs_run_length.png": ("steps", "bytes_by_run_length", _bytes_per_step),
}


def draw_all(reports: Reports, folder: Path) -> tuple[list[Path], dict[str, str]]:
    """Draw every plot whose report is there; returns the files written and why others were not."""
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    missing: dict[str, str] = {}
    for name, (benchmark, key, draw) in PLOTS.items():
        if key not in reports.get(benchmark, {}):
            missing[name] = f"no {benchmark}.json with {key!r} (run python -m benchmarks.{benchmark})"
            continue
        figure, axes = plt.subplots(figsize=(7, 4.5), dpi=100)
        try:
            draw(reports, axes)
            axes.grid(True, which="both", alpha=0.3)
            axes.legend(fontsize=8)
            figure.tight_layout()
            path = folder / name
            figure.savefig(path)
            written.append(path)
        finally:
            plt.close(figure)
    return written, missing
