"""The million benchmark's typed report: bulk creation, the active child's figures, table sizes, the summary."""

from __future__ import annotations

import itertools

from pydantic import Field

from benchmarks.harness.report import BenchModel, Report, Row, row
from benchmarks.harness.stats import Dist

__all__ = [
    "ACTIVATION_TARGET_MS",
    "ActivePart",
    "Creation",
    "MemoryStep",
    "MillionReport",
    "NotFinished",
    "Relation",
    "Sizes",
    "TurnPhase",
]

ACTIVATION_TARGET_MS = 5.0


class Creation(BenchModel):
    """The bulk creation of every session, and the API path on a sample for comparison."""

    how: str
    sessions: int
    seconds: float
    per_second: float
    build_seconds: float
    copy_seconds: float
    wal_bytes: int
    wal_bytes_per_session: float
    api_sessions: int
    api_seconds: float
    api_per_second: float


class Relation(BenchModel):
    """One table or index: its bytes on disk (``pg_total_relation_size`` for a table, with its TOAST
    and indexes; ``pg_relation_size`` for an index) and the same over the sessions in the database."""

    name: str
    kind: str
    bytes: int
    bytes_per_session: float


class Sizes(BenchModel):
    """Every relation of the ``repertory`` schema at one moment, and the database's whole size."""

    sessions: int
    sessions_with_a_turn: int
    relations: list[Relation]
    tables_bytes: int
    database_bytes: int


class MemoryStep(BenchModel):
    """The host process with ``active`` sessions resident (each ran one turn), after ``gc.collect()``."""

    active: int
    resident: int
    rss_bytes: int
    traced_bytes: int | None = None


class TurnPhase(BenchModel):
    """Turns run on newly activated sessions in batches: their rate, the CPU they cost, the WAL they wrote.

    ``per_turn``: the server's transactions, WAL records, full-page images and WAL syncs per turn.
    """

    turns: int
    seconds: float
    turns_per_second: float
    host_cpu_seconds: float
    postgres_cpu_seconds: float
    wal_bytes: int
    wal_bytes_per_turn: float
    per_turn: dict[str, float] = Field(default_factory=dict)


class ActivePart(BenchModel):
    """What one child measured: memory by active count, the turn phases, and cold activations."""

    traced: bool
    sessions_in_database: int
    memory: list[MemoryStep]
    turn_phases: list[TurnPhase]
    activation_alone: Dist | None = None
    activation_store_calls: dict[str, Dist] = Field(default_factory=dict)
    handle_and_first_turn: Dist | None = None
    handle_alone: Dist | None = None
    activation_with_history: Dist | None = None
    turn_after_activation: Dist | None = None
    sequential_wal_bytes_per_turn: float | None = None
    sequential_per_turn: dict[str, float] = Field(default_factory=dict)
    activation_profile: list[str] = Field(default_factory=list)
    load_average_before_after: list[list[float]] = Field(default_factory=list)
    child_seconds: float | None = None


class NotFinished(BenchModel):
    """A child that failed or ran past its limit, and why."""

    why: str


class MillionReport(Report):
    """``benchmarks/results/million.json``."""

    store: str
    sessions: int
    active_fraction: float
    creation: Creation
    sizes_created: Sizes
    sizes_after_turns: Sizes | None = None
    untraced: ActivePart | NotFinished
    traced: ActivePart | NotFinished

    def summarise(self) -> list[Row]:
        """Creation rate, cold activation p50 against its target, memory per active session, bytes per session."""
        c = self.creation
        rows = [
            row(f"sessions created per second in bulk ({c.sessions:,})", round(c.per_second), "sessions/s",
                note=f"{c.seconds:.1f} s; {c.how}; through rt.create_sessions {c.api_per_second:,.0f}/s "
                     f"({c.api_sessions:,} sessions)"),
            row(f"database bytes per passivated session ({self.sessions:,} sessions)",
                round(self.sizes_created.database_bytes / self.sessions), "B",
                note=f"tables and indexes {self.sizes_created.tables_bytes / self.sessions:.0f} B/session"),
        ]  # fmt: skip
        part = self.untraced
        if isinstance(part, ActivePart):
            if part.activation_alone is not None:
                a = part.activation_alone
                rows.append(row("cold activation p50 (never-run session, not resident)", round(a.p50_ms, 3), "ms",
                                target=ACTIVATION_TARGET_MS,
                                note=f"p99 {a.p99_ms:.2f} ms, {a.count} samples"))  # fmt: skip
            if part.handle_and_first_turn is not None:
                t = part.handle_and_first_turn
                rows.append(row("cold session: first handle + first turn p50", round(t.p50_ms, 2), "ms",
                                note=f"p99 {t.p99_ms:.1f} ms, {t.count} samples"))  # fmt: skip
            if len(part.memory) >= 2:
                first, last = part.memory[0], part.memory[-1]
                per = (last.rss_bytes - first.rss_bytes) / max(1, last.active - first.active)
                rows.append(row(f"host RSS per active session ({last.active:,} active of {self.sessions:,})",
                                round(per), "B", note=_steps(part.memory, "rss_bytes")))  # fmt: skip
            if part.turn_phases:
                ph = part.turn_phases
                turns = sum(p.turns for p in ph)
                wal = sum(p.wal_bytes for p in ph) / turns
                rows.append(
                    row(
                        "WAL bytes per turn (first turn of a session)",
                        round(wal),
                        "B",
                        note=f"{turns:,} turns at {turns / sum(p.seconds for p in ph):.0f} turns/s",
                    )
                )
        traced = self.traced
        if isinstance(traced, ActivePart) and len(traced.memory) >= 2:
            first, last = traced.memory[0], traced.memory[-1]
            assert first.traced_bytes is not None and last.traced_bytes is not None
            per = (last.traced_bytes - first.traced_bytes) / max(1, last.active - first.active)
            rows.append(row("Python heap per active session (tracemalloc)", round(per), "B",
                            note=_steps(traced.memory, "traced_bytes")))  # fmt: skip
        return rows

    def render(self) -> str:
        """The summary, then the relations by size per session."""
        lines = [f"  {r.figure}: {r.value} {r.unit}  {r.note}" for r in self.rows()]
        for label, sizes in (("after creation", self.sizes_created), ("after the turns", self.sizes_after_turns)):
            if sizes is None:
                continue
            lines.append(f"\n  relations {label} ({sizes.sessions:,} sessions, {sizes.sessions_with_a_turn:,} "
                         "with a turn):")  # fmt: skip
            for r in sorted(sizes.relations, key=lambda r: -r.bytes):
                if r.bytes > 8192 * 4:
                    lines.append(
                        f"    {r.name:<42} {r.kind:<5} {r.bytes / 1e6:10.1f} MB {r.bytes_per_session:8.1f} B/s"
                    )
        return "\n".join(lines)


def _steps(memory: list[MemoryStep], field: str) -> str:
    """How a memory figure grew from step to step: ``+B per session`` for each step after the first."""
    parts = []
    for a, b in itertools.pairwise(memory):
        grew = (getattr(b, field) - getattr(a, field)) / max(1, b.active - a.active)
        parts.append(f"{a.active:,}->{b.active:,}: {grew:,.0f} B/session")
    return "; ".join(parts)
