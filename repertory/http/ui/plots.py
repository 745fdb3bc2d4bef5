"""Plots as server-rendered SVG: tokens and cost over time, runs by status, approval wait times.

No charting library and no script: each plot is a small SVG document built here, so it shows
with JavaScript off and every asset comes from the package. Every label passes through
``html.escape``; the numbers are formatted here. Colours come from CSS classes (``ui.css``), so
the plots follow the page's theme.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from repertory.core.state import RunState

__all__ = ["Bar", "Series", "bars", "histogram", "line_chart", "usage_series", "wait_times"]

W, H = 640, 200
PAD_L, PAD_R, PAD_T, PAD_B = 56, 12, 14, 28


def _fmt(value: float) -> str:
    if abs(value) >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if abs(value) >= 1_000:
        return f"{value / 1_000:.1f}k"
    if value and abs(value) < 1:
        return f"{value:.3g}"
    return f"{value:.0f}"


def _svg(title: str, body: list[str], width: int = W, height: int = H) -> str:
    t = html.escape(title)
    return (
        f'<svg class="plot" viewBox="0 0 {width} {height}" role="img" aria-label="{t}" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{t}</title>{"".join(body)}</svg>'
    )


def _empty(title: str) -> str:
    return _svg(title, [f'<text class="axis" x="{W / 2}" y="{H / 2}" text-anchor="middle">no data yet</text>'])


@dataclass(frozen=True)
class Series:
    """Points ``(epoch ms, value)`` of one line, oldest first."""

    name: str
    points: list[tuple[int, float]]
    css: str = "s1"


def line_chart(title: str, series: Sequence[Series], unit: str = "") -> str:
    """A line per series over a shared time axis, with the y axis from zero."""
    points = [p for s in series for p in s.points]
    if not points:
        return _empty(title)
    x0, x1 = min(p[0] for p in points), max(p[0] for p in points)
    top = max(p[1] for p in points) or 1.0
    span = (x1 - x0) or 1

    def x(t: int) -> float:
        return PAD_L + (t - x0) / span * (W - PAD_L - PAD_R)

    def y(v: float) -> float:
        return H - PAD_B - v / top * (H - PAD_T - PAD_B)

    body = [
        f'<line class="grid" x1="{PAD_L}" y1="{y(0):.1f}" x2="{W - PAD_R}" y2="{y(0):.1f}"/>',
        f'<line class="grid" x1="{PAD_L}" y1="{y(top):.1f}" x2="{W - PAD_R}" y2="{y(top):.1f}"/>',
        f'<text class="axis" x="{PAD_L - 4}" y="{y(top) + 4:.1f}" text-anchor="end">'
        f"{html.escape(_fmt(top) + unit)}</text>",
        f'<text class="axis" x="{PAD_L - 4}" y="{y(0) + 4:.1f}" text-anchor="end">0</text>',
        f'<text class="axis" x="{PAD_L}" y="{H - 8}">{_time(x0)}</text>',
        f'<text class="axis" x="{W - PAD_R}" y="{H - 8}" text-anchor="end">{_time(x1)}</text>',
    ]
    for i, s in enumerate(series):
        if not s.points:
            continue
        path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in s.points)
        body.append(f'<polyline class="line {s.css}" points="{path}"/>')
        if len(s.points) == 1:
            t, v = s.points[0]
            body.append(f'<circle class="dot {s.css}" cx="{x(t):.1f}" cy="{y(v):.1f}" r="3"/>')
        body.append(
            f'<text class="legend {s.css}" x="{PAD_L + 8 + i * 140}" y="{PAD_T + 10}">{html.escape(s.name)}</text>'
        )
    return _svg(title, body)


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M")


@dataclass(frozen=True)
class Bar:
    """One labelled bar; ``css`` picks its colour."""

    label: str
    value: float
    css: str = "s1"


def bars(title: str, items: Sequence[Bar], unit: str = "") -> str:
    """Horizontal bars, one per item, scaled to the largest."""
    if not items or not any(b.value for b in items):
        return _empty(title)
    top = max(b.value for b in items) or 1.0
    row = 24
    height = PAD_T + row * len(items) + 8
    body = []
    for i, b in enumerate(items):
        y = PAD_T + i * row
        width = b.value / top * (W - 170)
        body.append(f'<text class="axis" x="96" y="{y + 15}" text-anchor="end">{html.escape(b.label)}</text>')
        body.append(f'<rect class="bar {b.css}" x="104" y="{y + 3}" width="{width:.1f}" height="{row - 8}"/>')
        body.append(f'<text class="axis" x="{108 + width:.1f}" y="{y + 15}">{html.escape(_fmt(b.value) + unit)}</text>')
    return _svg(title, body, height=height)


def histogram(title: str, values: Sequence[float], edges: Sequence[float], labels: Sequence[str]) -> str:
    """Counts of ``values`` in the buckets ``[edges[i], edges[i+1])`` (the last is open), as bars."""
    counts = [0] * len(labels)
    for v in values:
        i = 0
        while i + 1 < len(edges) and v >= edges[i + 1]:
            i += 1
        counts[min(i, len(counts) - 1)] += 1
    return bars(title, [Bar(label, count, "s2") for label, count in zip(labels, counts, strict=True)])


def usage_series(runs: Sequence[RunState], buckets: int = 24) -> tuple[Series, Series]:
    """Tokens and cost of ``runs`` summed per time bucket (by each run's last update)."""
    if not runs:
        return Series("tokens", []), Series("cost", [], "s2")
    t0, t1 = min(r.updated_at for r in runs), max(r.updated_at for r in runs)
    step = max((t1 - t0) // buckets + 1, 1)
    tokens: dict[int, float] = {}
    cost: dict[int, float] = {}
    for r in runs:
        b = t0 + (r.updated_at - t0) // step * step
        tokens[b] = tokens.get(b, 0) + r.usage.total_tokens
        cost[b] = cost.get(b, 0.0) + (r.cost or 0.0)
    return (
        Series("tokens", sorted(tokens.items())),
        Series("cost (USD)", sorted(cost.items()) if any(cost.values()) else [], "s2"),
    )


WAIT_EDGES = [0.0, 10.0, 60.0, 600.0, 3600.0, 86400.0]
WAIT_LABELS = ["< 10 s", "10 s-1 min", "1-10 min", "10 min-1 h", "1 h-1 day", "> 1 day"]


def wait_times(runs: Sequence[RunState], now: int) -> tuple[list[float], list[float]]:
    """Seconds each decided approval waited, and how long each open one has waited so far."""
    decided, open_ = [], []
    for run in runs:
        for a in run.approvals:
            if a.decided_at is not None:
                decided.append(max(a.decided_at - a.requested_at, 0) / 1000)
            elif a.decision is None and run.status == "suspended":
                open_.append(max(now - a.requested_at, 0) / 1000)
    return decided, open_
