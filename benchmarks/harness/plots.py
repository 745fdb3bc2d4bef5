"""PNG plots drawn from typed reports with matplotlib's Agg backend (no display).

A benchmark declares its plots (``Plot``: a file name, the report field it needs, how to draw it);
``draw`` gives each its axes, grid, legend and file. A plot whose report is missing (not run yet,
or skipped) is left out and named among what was not drawn, never drawn from made-up points.
matplotlib is imported only to draw: a benchmark importing its plot declarations (a child process
measuring memory) does not pay for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from benchmarks.harness.report import Report

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["Plot", "draw", "log_x", "subtitle"]

R = TypeVar("R", bound=Report)


@dataclass(frozen=True)
class Plot(Generic[R]):
    """One PNG: its file name, the field of the report it is drawn from, and the drawing."""

    file: str
    needs: str
    available: Callable[[R], bool]
    paint: Callable[[R, Axes], None]


def subtitle(report: Report) -> str:
    """The mode, cores and load average of the run a plot shows."""
    m = report.machine
    loads = [f"{x[0]:.1f} at {when}" for x, when in ((m.load_average_before, "start"), (m.load_average_after, "end"))
             if x]  # fmt: skip
    return f"{report.mode} run, {m.cpu_count or '?'} CPUs, load average {', '.join(loads) or '?'}"


def log_x(axes: Axes, values: Sequence[int]) -> None:
    """A log x axis labelled at the measured points (10, 1,000, ...) rather than at powers of ten."""
    axes.set_xscale("log")
    ticks = sorted(set(values))
    axes.set_xticks(ticks, labels=[f"{v:,}" for v in ticks])
    axes.minorticks_off()


def draw(plot: Plot[Any], report: Report, folder: Path) -> Path:
    """Draw one plot of ``report`` into ``folder``; returns the file written."""
    import matplotlib

    matplotlib.use("Agg")  # before pyplot: no display here, and no GUI toolkit is wanted
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=100)
    try:
        plot.paint(report, axes)
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize=8)
        figure.tight_layout()
        path = folder / plot.file
        figure.savefig(path)
    finally:
        plt.close(figure)
    return path
