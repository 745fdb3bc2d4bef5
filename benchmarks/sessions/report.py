"""The session benchmark's report: memory per session, creation rate, many sessions at once, one turn's anatomy.

Each part runs in a child process; a part that did not finish is ``NotFinished`` (its spec and why).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from benchmarks.harness.model import BenchModel
from benchmarks.harness.report import Report, Row, row
from benchmarks.harness.stats import Dist

__all__ = [
    "DELAY_S",
    "DURABILITY",
    "TARGET_CREATE_PER_S",
    "TARGET_IDLE_BYTES",
    "TURNS",
    "AnatomyPart",
    "Concurrency",
    "ConcurrentPart",
    "CreationPart",
    "GcFigures",
    "Growth",
    "LoopProfile",
    "MemoryPart",
    "MemoryState",
    "NotFinished",
    "Rate",
    "Reading",
    "Sequential",
    "SessionsReport",
    "Site",
    "Split",
    "Targets",
    "TurnAnatomy",
]

TARGET_IDLE_BYTES = 10 * 1024
TARGET_CREATE_PER_S = 2_000
DELAY_S = 0.2
TURNS = 5
DURABILITY = "normal"

LoadPair = list[list[float]]  # the child's 1/5/15-minute load average before and after


class Part(BenchModel):
    """What every finished part carries: the load around it and the child's seconds."""

    finished: Literal[True] = True
    load_average_before_after: LoadPair = Field(default_factory=list)
    child_seconds: float = 0.0


class NotFinished(BenchModel):
    """A part whose child failed or ran past its limit (or was skipped), and why."""

    spec: dict[str, Any]
    finished: Literal[False] = False
    why: str


class Reading(BenchModel):
    """One reading of the process: resident actors, RSS and its peak, tracemalloc's traced bytes."""

    resident: int
    VmRSS: int
    VmHWM: int
    traced_bytes: int | None = None


class Site(BenchModel):
    """Memory growth attributed to a repertory line (and, paired, to the line that allocated it)."""

    site: str
    bytes_per_session: float
    blocks_per_session: float
    allocated_in: str | None = None


class MemoryState(BenchModel):
    """One state of the N sessions (history cache kept, cleared, passivated): growth per session."""

    resident: int
    rss_delta_bytes_per_session: float
    traced_bytes_per_session: float | None = None
    by_repertory_line: list[Site] | None = None
    by_repertory_line_and_allocator: list[Site] | None = None
    gc_objects_per_session: dict[str, float] | None = None


class MemoryPart(Part):
    """Parts 1-2: N sessions after one turn each, read kept, cleared and passivated."""

    sessions: int
    traced: bool
    fill_seconds: float
    traceback_frames: int | None
    sessions_with_history_cache_after_turn: int
    passivated_by_passivate_idle_0: int
    readings: dict[str, Reading]
    states: dict[str, MemoryState]


class Rate(BenchModel):
    """Sessions created per second over rounds (or, for a piece timed alone, microseconds each)."""

    median_us_each: float
    median_per_s: float | None = None
    best_per_s: float | None = None
    rounds_per_s: list[float] | None = None


class FullRates(BenchModel):
    """Creation with durability full."""

    sessions_per_round: int
    runtime_loop: Rate


class CreationPart(Part):
    """Part 3: sessions created per second, and the same work one layer down at a time."""

    sessions_per_round: int
    rounds: int
    normal: dict[str, Rate]
    full: FullRates


class GcFigures(BenchModel):
    """Time the cyclic collector ran during the concurrent turns."""

    seconds: float
    ms_per_turn: float | None
    collections_by_generation: list[int]


class Split(BenchModel):
    """A turn's overhead split: before the model, the model's sleep running late, after the model."""

    before_model: Dist
    model_sleep_late: Dist
    after_model: Dist


class GroupShare(BenchModel):
    """Own time of one layer of the profiled event loop thread."""

    seconds: float
    share_of_busy: float | None
    us_per_turn: float


class CallerCost(BenchModel):
    """Calls and cumulative time per turn of a function (or of one of its callers)."""

    ncalls_per_turn: float
    cumtime_us_per_turn: float


class TopFunction(BenchModel):
    """One of the functions with the most own time, with its main callers."""

    function: str
    ncalls_per_turn: float
    tottime_us_per_turn: float
    cumtime_us_per_turn: float
    top_callers: dict[str, CallerCost]


class LoopProfile(BenchModel):
    """cProfile of the event loop thread over a concurrent run, by layer."""

    turns: int
    profiled_seconds: float
    busy_seconds: float
    busy_us_per_turn: float
    groups: dict[str, GroupShare]
    top_by_tottime: list[TopFunction]
    store_calls_per_turn: dict[str, float]
    cumulative_of_key_functions: dict[str, CallerCost]
    note: str


class ConcurrentPart(Part):
    """Part 4: N sessions x T turns at once against a model with a fixed delay."""

    sessions: int
    turns_per_session: int
    seconds_until_activated: dict[str, float | None]
    model_delay_ms: float
    turns_done: int
    failures: dict[str, int]
    create_sessions_seconds: float
    wall_seconds: float
    ideal_wall_seconds: float
    turns_per_s: float
    process_cpu_seconds: float
    cpu_ms_per_turn: float | None
    cpu_utilisation_cores: float | None
    gc: GcFigures
    per_turn_overhead: Dist
    overhead_first_turn: Dist
    overhead_later_turns: Dist
    split: Split
    event_loop_lag: Dist
    resident_actors_at_end: int
    activations: int
    rss_bytes_at_end: int
    peak_rss_bytes: int
    profile: LoopProfile | None = None


class Sequential(BenchModel):
    """Turns one after another on an idle loop, no model delay: the least a turn can cost here."""

    sessions: int
    turns_per_session: int
    model_delay_ms: float
    first_turn_ms: Dist
    later_turns_ms: Dist
    before_model_later_turns_ms: Dist
    after_model_later_turns_ms: Dist


class TurnAnatomy(BenchModel):
    """One turn's store calls, thread hops, SQL statements and write transactions."""

    store_calls_per_turn: dict[str, float]
    store_call_us_per_turn: dict[str, float]
    sql_statements_per_turn: dict[str, float]
    write_transactions_per_turn: float
    reader_connections: int | None = None


class Growth(BenchModel):
    """A turn's cost as one session grows."""

    turns: int
    median_turn_ms_by_window: dict[str, float]
    list_runs_of_the_session_ms_at_end: float
    runs_in_session: int


class AnatomyPart(Part):
    """Part 5: the anatomy of one turn."""

    sequential: Sequential
    later_turn_on_active_session: TurnAnatomy
    turn_that_activates: TurnAnatomy
    later_turns_durability_full_ms: Dist
    growth_with_turns_in_session: Growth


class Concurrency(BenchModel):
    """Every concurrent run of the ladder (halving N after one that did not finish)."""

    runs: list[ConcurrentPart | NotFinished]
    largest_finished: int | None


class Targets(BenchModel):
    """An idle resident session at most 10 KB (history cache aside); ~0 passivated; 2,000 creations/s."""

    idle_resident_session_bytes_history_cache_aside: int = TARGET_IDLE_BYTES
    passivated_session_bytes: str = "~0"
    sessions_created_per_s: int = TARGET_CREATE_PER_S


class SessionsReport(Report):
    """``benchmarks/results/sessions.json``."""

    backend: str
    store: str
    durability: str
    targets: Targets = Targets()
    memory_rss: MemoryPart | NotFinished
    memory_traced: MemoryPart | NotFinished
    creation: CreationPart | NotFinished
    anatomy: AnatomyPart | NotFinished
    concurrency: Concurrency
    profile_run: ConcurrentPart | NotFinished

    def summarise(self) -> list[Row]:
        """Memory per idle session; creations/s; turns/s at each N that finished."""
        rows: list[Row] = []
        traced, rss = self.memory_traced, self.memory_rss
        if isinstance(traced, MemoryPart):
            states = traced.states
            kept, cleared, passive = (
                states[k].traced_bytes_per_session or 0.0
                for k in ("resident_history_kept", "resident_history_cleared", "passivated")
            )
            rows.append(
                row(
                    f"memory per idle resident session, history cache aside ({traced.sessions:,} sessions)",
                    cleared / 1024,
                    "KB",
                    TARGET_IDLE_BYTES / 1024,
                    note=f"cache kept {kept / 1024:.1f} KB; passivated {passive / 1024:.2f} KB (tracemalloc)",
                )
            )
        elif isinstance(rss, MemoryPart):
            rows.append(row(f"RSS growth per idle resident session ({rss.sessions:,} sessions)",
                            rss.states["resident_history_cleared"].rss_delta_bytes_per_session / 1024, "KB",
                            note="tracemalloc part not run"))  # fmt: skip
        if isinstance(self.creation, CreationPart):
            rows.append(row("sessions created per second (SQLite)", self.creation.normal["runtime_loop"].median_per_s,
                            "/s", TARGET_CREATE_PER_S, at_most=False))  # fmt: skip
        for c in self.concurrency.runs:
            if isinstance(c, ConcurrentPart):
                o = c.per_turn_overhead
                rows.append(
                    row(
                        f"{c.sessions:,} sessions x {c.turns_per_session} turns, "
                        f"{c.model_delay_ms:.0f} ms model, one process",
                        c.turns_per_s,
                        "turns/s",
                        note=f"wall {c.wall_seconds:.1f} s; overhead p50 {o.p50_ms:,.0f} / p99 {o.p99_ms:,.0f} ms",
                    )
                )
        return rows

    def render(self) -> str:
        """The tables printed after a run (``benchmarks.sessions.tables``)."""
        from benchmarks.sessions.tables import render

        return render(self)
