"""What one benchmark run measured, kept as a pyperf suite: one pyperf benchmark per figure.

pyperf keeps the values, their statistics (median, percentiles, spread), the machine's metadata
(CPU, Python, load average, date) and a JSON format its own tools read (``python -m pyperf show``,
``compare_to``). A time is stored in seconds, a size in bytes; any other figure (steps per second,
a ratio to the floor, sessions per GB) is a tracked value of unit ``integer`` whose display unit
rides in its metadata, as do its target, its note and the plot it is a point of. pyperf holds only
values above zero, so a count that may be zero (violations, lost events), or any figure that came out
zero or below, is a metadata entry (``value <figure>``) of the run's frame: the figure named
``<benchmark>: run``, whose value is the run's wall-clock seconds.

The renderer (``benchmarks.harness.render``) reads nothing else: no benchmark has report code.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pyperf

from benchmarks.harness.versions import git_commit

__all__ = ["FRAME", "Figures", "Mode", "Plot", "Target", "percentile"]

Mode = Literal["full", "quick"]
FRAME = "run"
"""The suffix of the frame figure's name: ``<benchmark>: run``."""

MetaValue = str | int | float
KEPT_VALUES = 2_000
"""A figure given more samples keeps this many evenly spaced order statistics of them (its minimum
and maximum among them): the median and the p99 read the same, and a suite of 36,000 latencies does
not weigh a megabyte."""


def percentile(samples: Sequence[float], q: int) -> float:
    """The ``q``-th percentile of ``samples`` read as the renderer reads a figure's (pyperf's linear
    interpolation, ``statistics.quantiles`` inclusive): for a figure worked out from two percentiles."""
    return statistics.quantiles(samples, n=100, method="inclusive")[q - 1] if len(samples) > 1 else samples[0]


@dataclass(frozen=True)
class Plot:
    """A PNG the renderer draws from the figures that name it: one line per series, x as given."""

    file: str
    title: str
    x_label: str
    y_label: str
    log_x: bool = True
    log_y: bool = False


@dataclass(frozen=True)
class Target:
    """A figure's target: at most (or at least) this value, in the figure's own unit."""

    value: float
    at_most: bool = True


class Figures:
    """The figures of one run of one benchmark, written as a pyperf suite by ``write``.

    ``time`` records seconds, ``size`` bytes, ``value`` anything else with its display unit,
    ``count`` a whole number that may be zero, ``add`` a benchmark pyperf's ``Runner`` timed.
    """

    def __init__(self, benchmark: str, mode: Mode, command: str) -> None:
        self.benchmark = benchmark
        self.mode = mode
        self.command = command
        self._started = time.perf_counter()
        self._load_before = os.getloadavg()[0]
        self._benches: list[pyperf.Benchmark] = []
        self._names: set[str] = set()
        self._frame: dict[str, MetaValue] = {"git_commit": git_commit(), "mode": mode, "command": command}
        self._machine: dict[str, MetaValue] | None = None

    def _meta(
        self,
        name: str,
        unit: str,
        shown: str,
        note: str,
        target: Target | None,
        plot: Plot | None,
        series: str,
        x: float | None,
        command: str | None,
    ) -> dict[str, MetaValue]:
        if self._machine is None:  # pyperf reads the machine once, with the first figure
            probe = pyperf.Run([1.0], metadata={"name": "probe"}, collect_metadata=True)
            self._machine = {k: v for k, v in probe.get_metadata().items() if k not in ("name", "mem_max_rss")}
        meta: dict[str, MetaValue] = {
            **self._machine,
            "name": f"{self.benchmark}: {name}",
            "unit": unit,
            "shown": shown,
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        if note:
            meta["note"] = note
        if target is not None:
            meta["target"] = float(target.value)
            meta["target_is"] = "at most" if target.at_most else "at least"
        if plot is not None:
            if x is None:
                raise ValueError(f"{name}: a plot's point needs its x")
            meta.update(plot=plot.file, plot_title=plot.title, x_label=plot.x_label, y_label=plot.y_label)
            meta.update(log_x=int(plot.log_x), log_y=int(plot.log_y), series=series or name, x=float(x))
        if command:
            meta["command"] = command
        return meta

    def _record(self, name: str, values: float | Sequence[float], meta: dict[str, MetaValue]) -> None:
        if name in self._names:
            raise ValueError(f"{self.benchmark}: figure {name!r} recorded twice")
        listed = [float(values)] if isinstance(values, int | float) else [float(v) for v in values]
        if not listed:
            raise ValueError(f"{self.benchmark}: {name!r} has no value")
        self._names.add(name)
        if len(listed) > KEPT_VALUES:
            meta = {**meta, "values_measured": len(listed)}
            ordered = sorted(listed)
            listed = [ordered[round(i * (len(ordered) - 1) / (KEPT_VALUES - 1))] for i in range(KEPT_VALUES)]
        if any(v <= 0 for v in listed):  # pyperf holds values above zero: this one is a fact of the frame
            median = sorted(listed)[len(listed) // 2]
            self._frame[f"value {name}"] = f"{median:g} {meta['shown']}".strip()
            return
        self._benches.append(pyperf.Benchmark([pyperf.Run(listed, metadata=meta, collect_metadata=False)]))

    def time(
        self,
        name: str,
        seconds: float | Sequence[float],
        *,
        note: str = "",
        target: Target | None = None,
        plot: Plot | None = None,
        series: str = "",
        x: float | None = None,
        command: str | None = None,
    ) -> None:
        """A time in seconds (one value, or every sample: the renderer shows the median and the p99)."""
        self._record(name, seconds, self._meta(name, "second", "s", note, target, plot, series, x, command))

    def size(
        self,
        name: str,
        nbytes: float | Sequence[float],
        *,
        note: str = "",
        target: Target | None = None,
        plot: Plot | None = None,
        series: str = "",
        x: float | None = None,
    ) -> None:
        """A size in bytes."""
        self._record(name, nbytes, self._meta(name, "byte", "B", note, target, plot, series, x, None))

    def value(
        self,
        name: str,
        values: float | Sequence[float],
        unit: str,
        *,
        note: str = "",
        target: Target | None = None,
        plot: Plot | None = None,
        series: str = "",
        x: float | None = None,
        command: str | None = None,
    ) -> None:
        """A tracked value that is not a time or a size, shown with ``unit`` ("steps/s", "x", "%", "sessions")."""
        self._record(name, values, self._meta(name, "integer", unit, note, target, plot, series, x, command))

    def count(self, name: str, n: int, *, target: Target | None = None) -> None:
        """A whole number that may be zero (violations, lost events): kept in the run's frame, never plotted."""
        if name in self._names:
            raise ValueError(f"{self.benchmark}: figure {name!r} recorded twice")
        self._names.add(name)
        self._frame[f"value {name}"] = int(n)
        if target is not None:
            self._frame[f"target {name}"] = f"{'at most' if target.at_most else 'at least'} {target.value:g}"

    def fact(self, name: str, value: MetaValue) -> None:
        """A fact of the run (the store, a peer's version, why a peer was not measured): kept in its frame."""
        self._frame[f"fact {name}"] = value

    def add(self, bench: pyperf.Benchmark, *, note: str = "", target: Target | None = None) -> None:
        """A benchmark pyperf's ``Runner`` timed (its name already ``<benchmark>: <figure>``)."""
        extra: dict[str, MetaValue] = {"shown": "s"}
        if note:
            extra["note"] = note
        if target is not None:
            extra.update(target=float(target.value), target_is="at most" if target.at_most else "at least")
        bench.update_metadata(extra)
        self._names.add(bench.get_name())
        self._benches.append(bench)

    def write(self, path: Path, *, failed: str = "") -> Path:
        """The suite, its frame first, written atomically (a run killed half-way leaves the old file)."""
        frame: dict[str, MetaValue] = {**self._frame, "load_avg_before": self._load_before}
        frame["load_avg_after"] = os.getloadavg()[0]
        if failed:
            frame["failed"] = " ".join(failed.split())
        seconds = max(time.perf_counter() - self._started, 1e-6)
        self._record(FRAME, seconds, {**self._meta(FRAME, "second", "s", "", None, None, "", None, None), **frame})
        suite = pyperf.BenchmarkSuite([self._benches[-1], *self._benches[:-1]])
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        suite.dump(str(tmp), replace=True)
        os.replace(tmp, path)
        return path
