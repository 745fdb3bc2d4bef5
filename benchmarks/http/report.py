"""The HTTP benchmark's report: per backend, create + wait and create + stream latency, runs/s at once."""

from __future__ import annotations

from benchmarks.harness.model import BenchModel
from benchmarks.harness.report import Report, Row, row
from benchmarks.harness.stats import Dist

__all__ = ["Backend", "Concurrent", "HttpReport", "Sizes"]


class Sizes(BenchModel):
    """Rounds of each sequential figure; clients at once and runs each."""

    rounds: int
    clients: int
    per_client: int


class Concurrent(BenchModel):
    """C clients at once, each creating a thread and waiting for a run, R times."""

    clients: int
    runs_each: int
    runs_per_s: float


class Backend(BenchModel):
    """The figures of one backend behind the server."""

    backend: str
    create_and_wait: Dist
    create_and_stream_values: Dist
    concurrent: Concurrent


class HttpReport(Report):
    """``benchmarks/results/http.json``."""

    store: str
    model: str
    sizes: Sizes
    local: Backend
    ray: Backend | None = None

    def summarise(self) -> list[Row]:
        """Three rows per backend: create + wait p50, create + stream p50, runs/s with C clients."""
        rows: list[Row] = []
        for r in (self.local, self.ray):
            if r is None:
                continue
            wait, stream = r.create_and_wait, r.create_and_stream_values
            rows += [
                row(
                    f"HTTP ({r.backend}): threads.create + runs.wait, p50",
                    round(wait.p50_ms, 2),
                    "ms",
                    note=f"p90 {wait.p90_ms:.1f} ms; n={self.sizes.rounds}",
                ),
                row(
                    f"HTTP ({r.backend}): threads.create + runs.stream(values) to the end, p50",
                    round(stream.p50_ms, 2),
                    "ms",
                    note=f"p90 {stream.p90_ms:.1f} ms",
                ),
                row(
                    f"HTTP ({r.backend}): runs/s, {self.sizes.clients} clients at once",
                    r.concurrent.runs_per_s,
                    "runs/s",
                    note=f"{self.sizes.per_client} create + wait each",
                ),
            ]
        return rows

    def render(self) -> str:
        """The summary lines printed after a run."""
        return "\n".join(f"  {r.figure:<72} {r.value!s:>9} {r.unit:<7} {r.note}" for r in self.rows())
