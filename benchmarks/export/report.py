"""The export benchmark's report: the store, three exports (first, +1%, unchanged), DuckDB queries over them."""

from __future__ import annotations

from typing import Any

from benchmarks.harness.model import BenchModel
from benchmarks.harness.report import Report, Row, row

__all__ = ["TARGET_ROWS_PER_S", "TARGET_TREE_USAGE_S", "ExportFigures", "ExportReport", "ExportTargets", "Fleet"]

TARGET_ROWS_PER_S = 300_000
TARGET_TREE_USAGE_S = 1.0


class Fleet(BenchModel):
    """The store exported: history entries, trees, seconds to build it."""

    entries: int
    trees: int
    build_s: float


class ExportFigures(BenchModel):
    """One export: seconds, rows written to every table, history entries among them."""

    elapsed_s: float
    rows: int
    rows_per_s: int
    entries: int
    entries_per_s: int | None
    per_table: dict[str, int]
    entries_added: int | None = None  # the incremental export: entries added since the first


class TreeUsage(BenchModel):
    """``connect`` then ``SELECT * FROM tree_usage(root)``, cold and warm."""

    connect_s: float
    cold_s: float
    warm_s: float
    result: list[list[Any]]


class ExportTargets(BenchModel):
    """First export rows/s at least; ``tree_usage`` seconds at most."""

    first_export_rows_per_s: int = TARGET_ROWS_PER_S
    tree_usage_s: float = TARGET_TREE_USAGE_S


class ExportReport(Report):
    """``benchmarks/results/export.json``."""

    store: Fleet
    first_export: ExportFigures
    incremental_export: ExportFigures
    unchanged_export: ExportFigures
    tree_usage: TreeUsage
    thread_messages_s: float
    thread_messages_rows: int
    view_rows: dict[str, int]
    export_bytes: int
    targets: ExportTargets = ExportTargets()

    def summarise(self) -> list[Row]:
        """First export rows/s; ``tree_usage`` cold."""
        f, t = self.first_export, self.tree_usage
        return [
            row(f"Parquet export, first, {self.store.entries:,} history entries", f.rows_per_s, "rows/s",
                TARGET_ROWS_PER_S, at_most=False, note=f"{f.rows:,} rows in {f.elapsed_s:.2f} s"),
            row("tree_usage(root) over that export, cold", t.cold_s * 1e3, "ms", TARGET_TREE_USAGE_S * 1e3,
                note=f"warm {t.warm_s * 1e3:.0f} ms"),
        ]  # fmt: skip

    def render(self) -> str:
        """The figures printed after a run."""
        f, i, u, t = self.first_export, self.incremental_export, self.unchanged_export, self.tree_usage
        m = self.machine
        before, after = (m.load_average_before or [0.0])[0], (m.load_average_after or [0.0])[0]
        return "\n".join(
            [
                f"{'figure':<34}{'value':>16}  target",
                f"{'first export rows/s (all tables)':<34}{f.rows_per_s:>16,}  >= {TARGET_ROWS_PER_S:,}",
                f"{'first export entries/s':<34}{f.entries_per_s or 0:>16,}",
                f"{'first export':<34}{f.elapsed_s:>15.2f}s  ({f.rows:,} rows)",
                f"{'incremental export (+1%)':<34}{i.elapsed_s:>15.2f}s  ({i.rows:,} rows)",
                f"{'unchanged export':<34}{u.elapsed_s:>15.2f}s  ({u.rows:,} rows)",
                f"{'tree_usage cold (after connect)':<34}{t.cold_s:>15.3f}s  < {TARGET_TREE_USAGE_S} s",
                f"{'tree_usage warm':<34}{t.warm_s:>15.3f}s",
                f"{'connect':<34}{t.connect_s:>15.3f}s",
                f"load average before/after: {before:.2f} / {after:.2f} ({m.cpu_count} CPUs)",
            ]
        )
