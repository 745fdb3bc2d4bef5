"""The fork benchmark's report: per depth, the fork's cost, the bytes and rows it adds, the turns after it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from benchmarks.harness.model import BenchModel
from benchmarks.harness.plots import Plot, log_x, subtitle
from benchmarks.harness.report import Report, Row, row
from benchmarks.harness.stats import Dist

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["PLOTS", "TARGET_RATIO", "DepthResult", "ForkReport", "ForkTarget"]

TARGET_RATIO = 2.0


class DepthResult(BenchModel):
    """K forks of a root at one history depth, and the first two turns on a few of them."""

    depth: int
    seed_seconds: float
    forks: int
    fork: Dist
    history_rows_added_by_forks: int
    bytes_per_fork: float
    stepped_forks: int
    first_turn_after_fork: Dist
    second_turn_after_fork: Dist
    history_rows_added_per_stepped_fork: float
    bytes_added_per_stepped_fork: float


class ForkTarget(BenchModel):
    """The fork's cost at the deepest depth over the shallowest: at most this."""

    fork_ratio_deepest_to_shallowest: float = TARGET_RATIO


class ForkReport(Report):
    """``benchmarks/results/fork.json``."""

    backend: str
    store: str
    message_json_bytes: int
    forks_per_depth: int
    target: ForkTarget = ForkTarget()
    results: list[DepthResult]

    def summarise(self) -> list[Row]:
        """Fork time and bytes, deepest over shallowest; the first turn after a fork at each depth."""
        first, last = self.results[0], self.results[-1]
        span = f"depth {last.depth:,} / depth {first.depth:,}"
        rows = [
            row(
                f"fork time p50, {span}",
                last.fork.p50_ms / first.fork.p50_ms,
                "x",
                TARGET_RATIO,
                note=f"{first.fork.p50_ms:.2f} ms at {first.depth:,}, {last.fork.p50_ms:.2f} ms at "
                f"{last.depth:,} (p99 {last.fork.p99_ms:.2f} ms)",
            ),
            row(
                f"bytes per fork, {span}",
                last.bytes_per_fork / first.bytes_per_fork if first.bytes_per_fork else None,
                "x",
                TARGET_RATIO,
                note=f"{first.bytes_per_fork:,.0f} B and {last.bytes_per_fork:,.0f} B per fork; history rows "
                f"added by {last.forks} forks: {last.history_rows_added_by_forks}",
            ),
        ]
        for r in self.results:
            rows.append(
                row(
                    f"first turn after a fork at depth {r.depth:,}",
                    r.first_turn_after_fork.p50_ms,
                    "ms",
                    note=f"loads the {r.depth:,} messages; second turn {r.second_turn_after_fork.p50_ms:.2f} ms; "
                    f"fork {r.fork.p50_ms:.2f} ms; {r.bytes_added_per_stepped_fork:,.0f} B per turned fork",
                )
            )
        return rows

    def render(self) -> str:
        """The table printed after a run."""
        lines = [
            f"fork benchmark ({self.mode}), SQLite WAL durability normal, {self.forks_per_depth} forks per "
            f"depth (target: flat, <= {TARGET_RATIO:.0f}x)",
            f"{'depth':>8} {'fork p50 ms':>12} {'fork p99 ms':>12} {'B/fork':>8} {'hist rows':>9} "
            f"{'1st turn ms':>12} {'2nd turn ms':>12} {'B/turned fork':>14}",
        ]
        for r in self.results:
            lines.append(
                f"{r.depth:>8,} {r.fork.p50_ms:>12.2f} {r.fork.p99_ms:>12.2f} {r.bytes_per_fork:>8,.0f} "
                f"{r.history_rows_added_by_forks:>9} {r.first_turn_after_fork.p50_ms:>12.1f} "
                f"{r.second_turn_after_fork.p50_ms:>12.2f} {r.bytes_added_per_stepped_fork:>14,.0f}"
            )
        lines += [f"  {s.figure}: {s.value or 0:.2f}{s.unit} (met: {s.met})" for s in self.rows()[:2]]
        return "\n".join(lines)


def _fork_cost(report: ForkReport, axes: Axes) -> None:
    results = report.results
    depth = [r.depth for r in results]
    axes.plot(depth, [r.fork.p50_ms for r in results], marker="o", label="fork(), p50")
    axes.plot(depth, [r.fork.p99_ms for r in results], marker="o", linestyle="--", label="fork(), p99")
    axes.plot(depth, [r.first_turn_after_fork.p50_ms for r in results], marker="s", label="first turn after")
    axes.plot(depth, [r.second_turn_after_fork.p50_ms for r in results], marker="^", label="second turn after")
    axes.set_yscale("log")
    log_x(axes, depth)
    axes.set_xlabel("history length (messages) at the fork")
    axes.set_ylabel("ms")
    axes.set_title("Fork cost vs history length (SQLite)\n" + subtitle(report), fontsize=9)


PLOTS = [Plot[ForkReport]("fork_cost_vs_history_length.png", "results", lambda r: bool(r.results), _fork_cost)]
