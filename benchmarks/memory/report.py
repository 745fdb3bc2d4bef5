"""The memory benchmark's report: per backend and size, ingest, cold load and recall/search latency."""

from __future__ import annotations

from benchmarks.harness.model import BenchModel
from benchmarks.harness.report import Report, Row, row

__all__ = ["TARGET_RECALL_MS_AT_100K", "Latency", "MemoryReport", "MemoryTarget", "SizeResult", "WideSearch"]

TARGET_RECALL_MS_AT_100K = 50.0


class Latency(BenchModel):
    """p50 / p95 / max of R timed calls (after 5 warm-up calls), in milliseconds."""

    p50_ms: float
    p95_ms: float
    max_ms: float
    rounds: int


class SizeResult(BenchModel):
    """One backend at one size: N messages of one resource."""

    backend: str
    messages: int
    indexed: int
    dims: int
    matrix_mb: float
    ingest_messages_per_s: int
    cold_load_s: float
    recall: Latency
    search: Latency
    recall_after_append: Latency


class WideSearch(BenchModel):
    """The search alone over random unit vectors of a real embedder's width."""

    messages: int
    dims: int
    matrix_mb: float
    search: Latency


class MemoryTarget(BenchModel):
    """A recall at 100,000 messages of one resource: at most this."""

    recall_ms_at_100k: float = TARGET_RECALL_MS_AT_100K


class MemoryReport(Report):
    """``benchmarks/results/memory.json``."""

    embedder: str
    durability: str
    target: MemoryTarget = MemoryTarget()
    results: list[SizeResult]
    wide_search_1536: list[WideSearch]
    quick: bool

    def summarise(self) -> list[Row]:
        """Recall p50 at the largest size, per backend (p95 and the search alone in the note)."""
        largest = max((x.messages for x in self.results), default=0)
        return [
            row(
                f"memory recall p50, {x.messages:,} messages of one resource ({x.backend})",
                x.recall.p50_ms,
                "ms",
                TARGET_RECALL_MS_AT_100K if x.messages == 100_000 else None,
                note=f"p95 {x.recall.p95_ms:.1f} ms; search alone {x.search.p50_ms:.1f} ms",
            )
            for x in self.results
            if x.messages == largest
        ]

    def render(self) -> str:
        """The markdown tables printed after a run."""
        lines = [
            f"embedder: {self.embedder}; target: recall < {TARGET_RECALL_MS_AT_100K:.0f} ms at 100,000 messages",
            "",
            "| backend | messages | ingest msg/s | cold load s | recall p50 / p95 ms | search p50 ms "
            "| recall after append p50 ms | matrix MB |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in self.results:
            lines.append(
                f"| {r.backend} | {r.messages:,} | {r.ingest_messages_per_s:,} | {r.cold_load_s} "
                f"| {r.recall.p50_ms} / {r.recall.p95_ms} | {r.search.p50_ms} "
                f"| {r.recall_after_append.p50_ms} | {r.matrix_mb} |"
            )
        if self.wide_search_1536:
            lines += [
                "",
                "| 1,536-dim vectors (search only) | messages | p50 / p95 ms | matrix MB |",
                "| --- | ---: | ---: | ---: |",
            ]
            for w in self.wide_search_1536:
                lines.append(
                    f"| random unit vectors | {w.messages:,} | {w.search.p50_ms} / {w.search.p95_ms} | {w.matrix_mb} |"
                )
        return "\n".join(lines)
