"""The latency benchmark's report: one distribution of commit latency per store and writer count."""

from __future__ import annotations

from pydantic import Field

from benchmarks.harness.model import BenchModel
from benchmarks.harness.report import Report, Row, row
from benchmarks.harness.stats import Dist

__all__ = ["LatencyReport", "Series"]


class Series(BenchModel):
    """``writers`` sessions each committing ``commits_per_writer`` steps at once, every commit timed."""

    store: str
    writers: int
    commits_per_writer: int
    latency: Dist
    commits_per_s: float
    load_average_before_after: list[float]


class LatencyReport(Report):
    """``benchmarks/results/latency.json``."""

    durability: str
    message_json_bytes: int
    results: list[Series]
    skipped: dict[str, str] = Field(default_factory=dict)

    def summarise(self) -> list[Row]:
        """p50 per series (p99 and max in the note); a store not measured says why."""
        rows = []
        for r in self.results:
            lat = r.latency
            writers = "one writer" if r.writers == 1 else f"{r.writers} concurrent writers"
            rows.append(
                row(
                    f"commit latency p50 / p99, {r.store}, {writers}",
                    lat.p50_ms,
                    "ms",
                    note=f"p99 {lat.p99_ms:.3f} ms, max {lat.max_ms:.1f} ms; {r.commits_per_s:,.0f} commits/s; "
                    f"{lat.count:,} commits",
                )
            )
        rows += [
            row(f"commit latency, {name}", None, "ms", note=f"not measured: {why}")
            for name, why in self.skipped.items()
        ]
        return rows

    def render(self) -> str:
        """The table printed after a run."""
        lines = [
            f"commit latency ({self.mode}), one 1 KB message per commit",
            f"{'store':<14} {'writers':>7} {'commits':>8} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>8} "
            f"{'commits/s':>10}",
        ]
        for r in self.results:
            lat = r.latency
            lines.append(
                f"{r.store:<14} {r.writers:>7} {lat.count:>8,} {lat.p50_ms:>8.3f} {lat.p90_ms:>8.3f} "
                f"{lat.p99_ms:>8.3f} {lat.max_ms:>8.1f} {r.commits_per_s:>10,.0f}"
            )
        lines += [f"{name}: not measured: {why}" for name, why in self.skipped.items()]
        return "\n".join(lines)
