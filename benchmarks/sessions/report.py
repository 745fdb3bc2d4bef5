"""The session benchmark's report: memory per session, creation rate, many sessions at once, one turn's anatomy.

Each part runs in a child process; a part that did not finish is ``NotFinished`` (its spec and why).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from benchmarks.harness.model import BenchModel
from benchmarks.harness.report import Report, Row, row
from benchmarks.harness.stats import Dist
from benchmarks.harness.tables import table

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
        """The tables printed after a run."""
        return _tables(self)


# The session report's tables, as printed after a run.


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:,.2f}"


def _kb(b: float | None) -> str:
    return "-" if b is None else f"{b / 1024:,.2f}"


def _memory(report: SessionsReport) -> list[str]:
    mem_t, mem_r = report.memory_traced, report.memory_rss
    if not (isinstance(mem_t, MemoryPart) and isinstance(mem_r, MemoryPart)):
        why = mem_t.why if isinstance(mem_t, NotFinished) else mem_r.why if isinstance(mem_r, NotFinished) else ""
        return [f"\n1-2. memory: NOT MEASURED: {why}"]
    rows = []
    for label, title in (
        ("resident_history_kept", "resident, history cache kept"),
        ("resident_history_cleared", "resident, history cache cleared"),
        ("passivated", "passivated"),
    ):
        t, r = mem_t.states[label], mem_r.states[label]
        rows.append([title, f"{t.resident:,}", _kb(t.traced_bytes_per_session), _kb(r.rss_delta_bytes_per_session)])
    cleared = mem_t.states["resident_history_cleared"]
    top = (cleared.by_repertory_line or [])[:12]
    objs = cleared.gc_objects_per_session or {}
    return [
        table(
            f"\n1-2. memory per session, {mem_t.sessions:,} sessions after one turn each (targets: <= "
            f"{TARGET_IDLE_BYTES // 1024} KB resident with the history cache aside, ~0 passivated)",
            ["state", "resident", "tracemalloc KB/session", "RSS growth KB/session (untraced run)"],
            rows,
        ),
        table(
            "\n   where a resident session's memory is (history cache cleared; tracemalloc, by the "
            "repertory line that allocated it, directly or through pydantic/asyncio/copy)",
            ["repertory line", "bytes/session", "blocks/session"],
            [[s.site[-70:], f"{s.bytes_per_session:,.0f}", f"{s.blocks_per_session:.2f}"] for s in top],
        ),
        "   GC-tracked objects per resident session: " + ", ".join(f"{k} {v:.1f}" for k, v in list(objs.items())[:12]),
    ]


def _creation(cr: CreationPart | NotFinished) -> list[str]:
    if isinstance(cr, NotFinished):
        return [f"\n3. creation: NOT MEASURED: {cr.why}"]
    rows = [
        [name, f"{v.median_per_s:,.0f}", f"{v.best_per_s or 0:,.0f}", f"{v.median_us_each:.1f}"]
        for name, v in cr.normal.items()
        if v.median_per_s is not None
    ]
    rows.append(["build SessionRecord alone", "", "", f"{cr.normal['build_session_record_alone'].median_us_each:.1f}"])
    full = cr.full.runtime_loop
    rows.append(
        [
            f"runtime_loop, durability full ({cr.full.sessions_per_round:,}/round)",
            f"{full.median_per_s or 0:,.0f}",
            f"{full.best_per_s or 0:,.0f}",
            f"{full.median_us_each:.1f}",
        ]
    )
    return [
        table(
            f"\n3. sessions created per second, median of {cr.rounds} rounds of "
            f"{cr.sessions_per_round:,} (target >= {TARGET_CREATE_PER_S:,}/s, durability normal)",
            ["variant", "median/s", "best/s", "us each"],
            rows,
        )
    ]


def _concurrency(report: SessionsReport) -> list[str]:
    rows = []
    for r in report.concurrency.runs:
        if isinstance(r, NotFinished):
            rows.append([f"{r.spec['n']:,}", "did not finish", "", "", "", "", "", "", "", ""])
            continue
        o, s = r.per_turn_overhead, r.split
        rows.append(
            [
                f"{r.sessions:,}",
                f"{r.wall_seconds:.1f}",
                f"{r.turns_per_s:,.0f}",
                f"{o.p50_ms:,.1f}",
                f"{o.p99_ms:,.1f}",
                f"{o.max_ms:,.1f}",
                f"{s.before_model.p50_ms:,.1f}",
                f"{s.model_sleep_late.p50_ms:,.1f}",
                f"{s.after_model.p50_ms:,.1f}",
                f"{r.cpu_ms_per_turn or 0:.2f}",
            ]
        )
    lines = [
        table(
            f"\n4. N concurrent sessions x {TURNS} turns, ScriptedModel delay {DELAY_S * 1e3:.0f} ms "
            f"(ideal wall {TURNS * DELAY_S:.1f} s); overhead = turn wall - delay, ms",
            ["sessions", "wall s", "turns/s", "ovh p50", "ovh p99", "ovh max", "pre p50", "sleep-late p50",
             "post p50", "CPU ms/turn"],
            rows,
        )
    ]  # fmt: skip
    for r in report.concurrency.runs:
        if isinstance(r, ConcurrentPart):
            lag = r.event_loop_lag
            lines.append(
                f"   {r.sessions:>6,}: first-turn overhead p50 {r.overhead_first_turn.p50_ms:,.1f} ms, "
                f"later turns p50 {r.overhead_later_turns.p50_ms:,.1f} ms; event loop lag p50 "
                f"{lag.p50_ms:,.1f} / p99 {lag.p99_ms:,.1f} ms; "
                f"CPU {r.cpu_utilisation_cores or 0:.2f} cores; peak RSS {r.peak_rss_bytes / 2**20:,.0f} MB; "
                f"GC {r.gc.ms_per_turn or 0:.2f} ms/turn; "
                f"50%/100% of sessions activated after {_s(r.seconds_until_activated['50%'])}/"
                f"{_s(r.seconds_until_activated['100%'])} s; "
                f"failures {r.failures or 0}"
            )
    lines.append(f"   largest N that finished: {report.concurrency.largest_finished}")
    return lines


def _anatomy(an: AnatomyPart | NotFinished) -> list[str]:
    if isinstance(an, NotFinished):
        return []
    seq = an.sequential
    later, act, g = an.later_turn_on_active_session, an.turn_that_activates, an.growth_with_turns_in_session
    return [
        f"\n5. one turn on an idle loop (sequential, no delay): first turn p50 {seq.first_turn_ms.p50_ms:.2f} ms, "
        f"later turns p50 {seq.later_turns_ms.p50_ms:.2f} ms (before the model "
        f"{seq.before_model_later_turns_ms.p50_ms:.2f}, after {seq.after_model_later_turns_ms.p50_ms:.2f})",
        f"   a later turn: {later.write_transactions_per_turn:.1f} write transactions, "
        f"{sum(later.sql_statements_per_turn.values()):.1f} SQL statements, store calls: "
        + ", ".join(f"{k} {v:g}" for k, v in later.store_calls_per_turn.items()),
        f"   later turn with durability full: p50 {an.later_turns_durability_full_ms.p50_ms:.2f} ms",
        "   store wall us per later turn (idle loop): "
        + ", ".join(f"{k} {v:.0f}" for k, v in later.store_call_us_per_turn.items()),
        f"   a turn that activates: {act.write_transactions_per_turn:.1f} write transactions, "
        f"{sum(act.sql_statements_per_turn.values()):.1f} SQL statements, store calls: "
        + ", ".join(f"{k} {v:g}" for k, v in act.store_calls_per_turn.items()),
        "   turn ms as one session grows: "
        + ", ".join(f"{k} {v:.2f}" for k, v in g.median_turn_ms_by_window.items())
        + f"; list_runs of that session at the end {g.list_runs_of_the_session_ms_at_end:.1f} ms "
        f"({g.runs_in_session} runs)",
    ]


def _profile(pr: ConcurrentPart | NotFinished) -> list[str]:
    if isinstance(pr, NotFinished) or pr.profile is None:
        return []
    prof = pr.profile
    return [
        table(
            f"\n   cProfile, {pr.sessions:,} concurrent sessions x {TURNS} turns (event loop "
            f"thread; profiler overhead included): {prof.busy_us_per_turn:,.0f} us busy per turn",
            ["group", "share of busy", "us/turn"],
            [
                [k, "-" if v.share_of_busy is None else f"{v.share_of_busy:.0%}", f"{v.us_per_turn:,.0f}"]
                for k, v in prof.groups.items()
            ],
        ),
        table(
            "\n   top functions by self time",
            ["function", "calls/turn", "self us/turn"],
            [
                [t.function[-80:], f"{t.ncalls_per_turn:.1f}", f"{t.tottime_us_per_turn:.1f}"]
                for t in prof.top_by_tottime[:15]
            ],
        ),
    ]


def _tables(report: SessionsReport) -> str:
    """The human-readable summary; the JSON holds every figure."""
    m = report.machine
    before, after = (m.load_average_before or [0.0])[0], (m.load_average_after or [float("nan")])[0]
    parts = [
        f"repertory sessions benchmark ({report.mode}), backend local, SQLite durability {DURABILITY} - "
        f"{m.platform}, Python {m.python}, {m.cpu_count} CPUs, SQLite {m.sqlite_version}; load average "
        f"before/after {before:.2f}/{after:.2f}"
    ]
    parts += _memory(report)
    parts += _creation(report.creation)
    parts += _concurrency(report)
    parts += _anatomy(report.anatomy)
    parts += _profile(report.profile_run)
    return "\n".join(parts)
