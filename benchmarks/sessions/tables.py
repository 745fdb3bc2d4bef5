"""The session report's tables, as printed after a run."""

from __future__ import annotations

from benchmarks.harness.tables import table
from benchmarks.sessions.report import (
    DELAY_S,
    DURABILITY,
    TARGET_CREATE_PER_S,
    TARGET_IDLE_BYTES,
    TURNS,
    AnatomyPart,
    ConcurrentPart,
    CreationPart,
    MemoryPart,
    NotFinished,
    SessionsReport,
)

__all__ = ["render"]


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


def render(report: SessionsReport) -> str:
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
