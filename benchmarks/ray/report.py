"""The Ray benchmark's report: turn overhead, throughput per host, creations, memory, events, host crash."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from benchmarks.harness.model import BenchModel
from benchmarks.harness.report import Report, Row, row
from benchmarks.harness.stats import Dist

__all__ = [
    "TARGETS",
    "CrashRound",
    "Creations",
    "DedicatedSessions",
    "EventLatency",
    "HostCrash",
    "HostMemory",
    "HostReading",
    "Load",
    "ManyStreams",
    "Measured",
    "OneSession",
    "Overhead",
    "Part",
    "ProfiledFunction",
    "RayProfile",
    "RayReport",
    "TrivialActors",
    "TurnOverhead",
    "UnderLoad",
]

TARGETS: dict[str, float] = {
    "turn_overhead_p50_ms": 2.0,
    "turn_overhead_p99_ms": 10.0,
    "turns_per_s_per_host": 1_000,
    "creations_per_s_one_per_call": 1_000,
    "creations_per_s_batched": 10_000,
    "idle_session_bytes": 10 * 1024,
    "event_latency_p50_ms": 5.0,
    "host_crash_to_served_s": 5.0,
    "node_failure_to_served_s": 5.0,
}


class Part(BenchModel):
    """Every part carries the seconds it took, runtime start and close included."""

    part_seconds: float = 0.0


class Overhead(Part):
    """1. ``handle.run`` one at a time, split into ``send()`` and ``result()``; Ray's floors beside it."""

    backend: str
    sessions: int
    rounds: int
    run: Dist
    send: Dist
    result: Dist
    run_direct: Dist
    run_after_idle: Dist | None = None
    """``handle.run`` after the process idled ``IDLE_BEFORE`` (a host idles between its Ray calls)."""
    bare_ray_call_ping: Dist | None = None
    bare_ray_call_metadata: Dist | None = None
    one_hop_prototype_run: Dist | None = None
    host_run_turn: Dist | None = None
    """``run_turn`` timed inside the host: what of ``run_direct`` is the turn and not the call."""
    send_that_only_queues: Dist | None = None


class TurnOverhead(BenchModel):
    """Part 1 on both backends."""

    local: Overhead
    ray: Overhead


class ProfiledFunction(BenchModel):
    """One of the functions with the most own time."""

    function: str
    tottime_s: float
    calls: int
    us_per_turn: float


class RayProfile(BenchModel):
    """cProfile of one event loop thread (the client's or the host's), own time per turn by layer."""

    profiled_seconds: float
    busy_seconds: float
    busy_us_per_turn: float
    by_layer_us_per_turn: dict[str, float]
    top_tottime: list[ProfiledFunction]
    wall_us_per_session: float | None = None


class Measured(BenchModel):
    """One way of running N x T turns through one host: turns/s and CPU by process group."""

    turns: int
    turns_per_s: float
    cpu: dict[str, float]
    cpu_ms_per_turn: dict[str, float]
    turn_latency: Dist | None = None
    send_many_batch: int | None = None
    queued_in_s: float | None = None
    completion: str | None = None
    host_profile: RayProfile | None = None
    client_profile: RayProfile | None = None


class Load(Part):
    """2. N sessions x T turns through one host, three ways."""

    sessions: int
    turns_per_session: int
    max_in_flight: int
    handle_run: Measured
    send_many: Measured
    one_hop_prototype: Measured


class AllAtOnce(BenchModel):
    """Trivial actors created all at once."""

    actors: int
    seconds: float
    per_s: float | None


class TrivialActors(BenchModel):
    """One dedicated Ray actor per session, as the design card's naive mapping would have it."""

    actors: int
    one_at_a_time_s: Dist
    all_at_once: AllAtOnce
    rss_mb_median: float
    pss_mb_median: float
    private_mb_median: float
    note: str


class DedicatedSessions(BenchModel):
    """Real ``placement="dedicated"`` sessions: a host process each."""

    sessions: int
    create_s: Dist
    first_turn_s: Dist
    rss_mb_median: float | None
    private_mb_median: float | None


class Creations(Part):
    """3. Session creations through one host, and dedicated actors beside them."""

    per_call_loop_per_s: float
    per_call_concurrent_100_per_s: float
    host_direct_loop_per_s: float
    host_direct_concurrent_100_per_s: float
    batched_100_per_s: float
    batched_1000_per_s: float
    per_call_sessions: int
    batched_sessions: int
    path_per_call: str
    batched_100_host_profile: RayProfile
    ray_get_actor_by_name: Dist
    dedicated_trivial_actors: TrivialActors
    dedicated_sessions: DedicatedSessions


class HostReading(BenchModel):
    """The host process's memory at one point, and its resident sessions."""

    VmRSS: int
    VmHWM: int
    smaps_rss: int
    smaps_pss: int
    smaps_private: int
    resident: int


class HostMemory(Part):
    """4. The host's RSS as N sessions are created, activated, run a turn, passivated."""

    sessions: int
    host_pid: int
    readings: dict[str, HostReading]
    rss_growth_bytes_per_session: dict[str, float]
    passivated: int
    note: str


class OneSession(BenchModel):
    """One watched session running turns one after another."""

    turns: int
    events_per_turn: dict[str, float]
    publish_to_client: Dist
    event_at_to_client: Dist


class UnderLoad(BenchModel):
    """The same stream while unwatched sessions run turns."""

    sessions_running_unwatched: int
    turns_per_session: int
    turns_per_s: float
    watched_turns: int
    publish_to_client: Dist
    event_at_to_client: Dist


class ManyStreams(BenchModel):
    """M sessions, each with its own stream, all running turns."""

    sessions_each_with_a_stream: int
    turns_per_session: int
    turns_per_s: float
    publish_to_client: Dist
    event_at_to_client: Dist


class EventLatency(Part):
    """5. From an event published in the host to the client receiving it."""

    one_session: OneSession
    one_stream_under_load: UnderLoad
    many_streams: ManyStreams
    note: str


class CrashRound(BenchModel):
    """One kill of the host and the first call served after it."""

    seconds: float
    resident_before_kill: int
    activate_all_s: float
    resident_after: int
    after_kill_s: dict[str, float | None]


class HostCrash(Part):
    """6. ``ray.kill`` of the host with N sessions resident, three ways of asking again."""

    sessions: int
    created_in_s: float
    rounds: dict[str, CrashRound]


class RayReport(Report):
    """``benchmarks/results/ray.json``."""

    backend: str
    store: str
    durability: str
    hosts: int
    model: str
    versions: dict[str, str]
    sizes: dict[str, int]
    targets: dict[str, float]
    turn_overhead: TurnOverhead | None = None
    load: Load | None = None
    load_profile: Load | None = None
    creations: Creations | None = None
    memory: HostMemory | None = None
    event_latency: EventLatency | None = None
    host_crash: HostCrash | None = None
    out_of_scope: list[str] = Field(default_factory=list)

    def summarise(self) -> list[Row]:
        """One row per figure read against a target: the value, the target and whether it is met."""
        rows: list[Row] = []

        def add(name: str, value: float | None, target: float | None, at_most: bool, unit: str, note: str = "") -> None:
            rows.append(row(name, value, unit, target, at_most, note))

        if self.turn_overhead is not None:
            ray_o, local_o = self.turn_overhead.ray, self.turn_overhead.local
            hop, ping = ray_o.one_hop_prototype_run or Dist(), ray_o.bare_ray_call_ping or Dist()
            for q in ("p50", "p99"):
                field = f"{q}_ms"
                ray_ms, local_ms = getattr(ray_o.run_direct, field), getattr(local_o.run_direct, field)
                add(
                    f"1. turn overhead via Ray (handle.run minus local), {q}",
                    round(ray_ms - local_ms, 3),
                    TARGETS[f"turn_overhead_{q}_ms"],
                    True,
                    "ms",
                    f"handle.run {ray_ms:.2f} ms vs local {local_ms:.2f} ms; send()+result() "
                    f"{getattr(ray_o.run, field):.2f} ms; one-hop prototype {getattr(hop, field):.2f} ms; "
                    "bare Ray call "
                    f"{getattr(ping, field):.2f} ms",
                )
            ray_idle, local_idle = ray_o.run_after_idle, local_o.run_after_idle
            if ray_idle is not None and local_idle is not None:
                add(
                    "1. turn overhead via Ray, both after a 2 ms idle (handle.run minus local), p50",
                    round(ray_idle.p50_ms - local_idle.p50_ms, 3),
                    None,
                    True,
                    "ms",
                    f"handle.run {ray_idle.p50_ms:.2f} ms vs local {local_idle.p50_ms:.2f} ms; a local turn back to "
                    f"back with the last costs {local_o.run_direct.p50_ms:.2f} ms (its code and data still in the "
                    "CPU's caches), and a Ray host's turn always follows a wait",
                )
        if self.load is not None:
            load = self.load
            shape = f"{load.sessions:,} sessions x {load.turns_per_session} turns"
            target = TARGETS["turns_per_s_per_host"]
            add(
                "2. turns/s per host, handle.run, one client",
                load.handle_run.turns_per_s,
                target,
                False,
                "turns/s",
                shape,
            )
            add(
                "2. turns/s per host, send_many batches",
                load.send_many.turns_per_s,
                target,
                False,
                "turns/s",
                "no per-turn client calls",
            )
            add(
                "2. turns/s per host, one-hop prototype",
                load.one_hop_prototype.turns_per_s,
                target,
                False,
                "turns/s",
                "one Ray call per turn (benchmark-side method)",
            )
        if self.creations is not None:
            c = self.creations
            per_call = TARGETS["creations_per_s_one_per_call"]
            via_client = "client -> host (shared placement: no supervisor; one tick coalesced into one call)"
            add(
                "3. creations/s, rt.create_session, one at a time",
                c.per_call_loop_per_s,
                per_call,
                False,
                "/s",
                via_client,
            )
            add(
                "3. creations/s, rt.create_session, 100 concurrent",
                c.per_call_concurrent_100_per_s,
                per_call,
                False,
                "/s",
                via_client,
            )
            add(
                "3. creations/s, host.create_session, one at a time",
                c.host_direct_loop_per_s,
                per_call,
                False,
                "/s",
                "one hop, no supervisor",
            )
            add(
                "3. creations/s, host.create_session, 100 concurrent",
                c.host_direct_concurrent_100_per_s,
                per_call,
                False,
                "/s",
                "one hop, no supervisor",
            )
            add(
                "3. creations/s, host.create_sessions(batch of 100)",
                c.batched_100_per_s,
                TARGETS["creations_per_s_batched"],
                False,
                "/s",
                f"batch of 1,000: {c.batched_1000_per_s:,.0f}/s",
            )
            t = c.dedicated_trivial_actors
            add(
                "3. dedicated Ray actor per session: created/s",
                t.all_at_once.per_s,
                None,
                False,
                "/s",
                f"{t.actors} trivial actors; one at a time {t.one_at_a_time_s.p50_ms:.0f} ms each",
            )
            add(
                "4. dedicated Ray actor per session: private memory",
                t.private_mb_median,
                None,
                True,
                "MB",
                f"RSS {t.rss_mb_median} MB, PSS {t.pss_mb_median} MB (median per actor)",
            )
        if self.memory is not None:
            m = self.memory
            per = m.rss_growth_bytes_per_session
            add(
                "4. host RSS per idle hosted session (activated)",
                per["activated"],
                TARGETS["idle_session_bytes"],
                True,
                "B",
                f"{m.sessions:,} sessions; rows only {per['created']:,.0f} B; passivated {per['passivated']:,.0f} B",
            )
            add(
                "4. host RSS per idle hosted session (after 1 turn)",
                per["after_one_turn"],
                TARGETS["idle_session_bytes"],
                True,
                "B",
                "its history and run kept in memory",
            )
        if self.event_latency is not None:
            e = self.event_latency
            one, loaded, many = e.one_session, e.one_stream_under_load, e.many_streams
            target = TARGETS["event_latency_p50_ms"]
            add(
                "5. event latency p50, one stream, idle host",
                one.publish_to_client.p50_ms,
                target,
                True,
                "ms",
                f"p99 {one.publish_to_client.p99_ms:.1f} ms; from event.at p50 {one.event_at_to_client.p50_ms:.1f}",
            )
            add(
                "5. event latency p50, one stream, host under load",
                loaded.publish_to_client.p50_ms,
                target,
                True,
                "ms",
                f"{loaded.sessions_running_unwatched} unwatched sessions running; "
                f"p99 {loaded.publish_to_client.p99_ms:.1f} ms",
            )
            add(
                "5. event latency p50, a stream per running session",
                many.publish_to_client.p50_ms,
                target,
                True,
                "ms",
                f"{many.sessions_each_with_a_stream} streams; p99 {many.publish_to_client.p99_ms:.1f} ms",
            )
        if self.host_crash is not None:
            for label, r in self.host_crash.rounds.items():
                add(
                    f"6. host crash -> first served call ({label})",
                    r.seconds,
                    TARGETS["host_crash_to_served_s"],
                    True,
                    "s",
                    f"{r.resident_before_kill:,} sessions resident; host __init__ after "
                    f"{r.after_kill_s['host_init_ran']} s",
                )
        return rows

    def render(self) -> str:
        """The summary table, then where the time goes."""
        return _tables(self)


# The Ray report's tables, as printed after a run: every target and its figure, then where the time goes.


DURABILITY = "normal"


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _profile_lines(title: str, p: RayProfile | None, top: int = 10, unit: str = "turn") -> list[str]:
    if p is None:
        return []
    lines = [f"{title}: {p.busy_us_per_turn:.0f} us busy per {unit} (idle epoll wait apart)"]
    lines += [f"    {k:40} {v:9.1f} us/{unit}" for k, v in p.by_layer_us_per_turn.items()]
    lines += ["  top functions by own time:"]
    lines += [f"    {t.us_per_turn:9.1f} us/{unit}  {t.function}" for t in p.top_tottime[:top]]
    return lines


def _tables(report: RayReport) -> str:
    """The summary table (every target, its figure, whether it is met), then where the time goes."""
    m = report.machine
    before, after = (m.load_average_before or [0.0])[0], (m.load_average_after or [0.0])[0]
    head = (
        f"repertory Ray benchmark ({report.mode}) - {m.platform}, {m.cpu_count} CPUs, Python {m.python}, "
        f"Ray {report.versions.get('ray')}; SQLite {m.sqlite_version} durability {DURABILITY} "
        f"(WAL + synchronous=NORMAL); one host; load average before/after {before:.2f}/{after:.2f}"
    )
    rows = [
        [
            r.figure,
            _fmt(r.value),
            r.unit,
            "-" if r.target is None else f"{'<=' if r.target_is == 'at most' else '>='} {_fmt(r.target)}",
            {True: "yes", False: "NO", None: "-"}[r.met],
            r.note,
        ]
        for r in report.rows()
    ]
    headers = ["figure", "value", "unit", "target", "met", "note"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = [
        head,
        "",
        "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    for r in rows:
        cells = [r[0].ljust(widths[0]), r[1].rjust(widths[1])]
        cells += [c.ljust(w) for c, w in zip(r[2:], widths[2:], strict=True)]
        lines.append("  ".join(cells).rstrip())
    if report.turn_overhead is not None:
        o = report.turn_overhead
        lines += ["", "1. turn overhead split (p50 / p99 ms):"]
        for name, b in (("local", o.local), ("ray", o.ray)):
            lines.append(
                f"  {name:5}  run {b.run.p50_ms:.2f} / {b.run.p99_ms:.2f}   "
                f"send {b.send.p50_ms:.2f} / {b.send.p99_ms:.2f}   "
                f"result {b.result.p50_ms:.2f} / {b.result.p99_ms:.2f}"
            )
        ro = o.ray
        ping, meta, hop, queued = (
            ro.bare_ray_call_ping,
            ro.bare_ray_call_metadata,
            ro.one_hop_prototype_run,
            ro.send_that_only_queues,
        )
        if ping and meta and hop and queued:
            lines.append(
                f"  bare Ray call p50: ping {ping.p50_ms:.2f} ms, metadata {meta.p50_ms:.2f} ms; one-hop prototype run "
                f"{hop.p50_ms:.2f} / {hop.p99_ms:.2f} ms"
            )
            lo = o.local
            if ro.run_after_idle is not None and lo.run_after_idle is not None:
                lines.append(
                    f"  handle.run after a 2 ms idle p50: local {lo.run_after_idle.p50_ms:.2f} ms (back to back "
                    f"{lo.run_direct.p50_ms:.2f}), ray {ro.run_after_idle.p50_ms:.2f} ms"
                )
            if ro.host_run_turn is not None:
                lines.append(
                    f"  run_turn timed inside the host p50: {ro.host_run_turn.p50_ms:.2f} ms of handle.run's "
                    f"{ro.run_direct.p50_ms:.2f} (the rest is the Ray call and the client)"
                )
            lines.append(
                f"  send() p50: {ro.send.p50_ms:.2f} ms when its turn starts at once, "
                f"{queued.p50_ms:.2f} ms when it only queues (session busy)"
            )
    if report.load is not None:
        lines += ["", "2. CPU ms per turn under load (client / host / Ray's other processes / unrelated processes):"]
        for label in ("handle_run", "send_many", "one_hop_prototype"):
            d = getattr(report.load, label)
            c = d.cpu_ms_per_turn
            lines.append(
                f"  {label:18} {d.turns_per_s:8,.0f} turns/s   {c['client']:.2f} / {c['host']:.2f} / "
                f"{c['ray_other']:.2f} / {c['unrelated']:.2f}   ({d.cpu['machine_cpus_busy']:.2f} of "
                f"{m.cpu_count} CPUs busy)"
            )
    if report.load_profile is not None:
        lp = report.load_profile
        lines += [""]
        lines += _profile_lines(
            "2. client profile, handle.run (cProfile, event loop thread)", lp.handle_run.client_profile
        )
        lines += _profile_lines(
            "2. host profile, handle.run (cProfile, host event loop thread)", lp.handle_run.host_profile
        )
        lines += _profile_lines(
            "2. host profile, send_many (cProfile, host event loop thread)", lp.send_many.host_profile, 6
        )
        lines += _profile_lines(
            "2. host profile, one-hop prototype (cProfile, host event loop thread)",
            lp.one_hop_prototype.host_profile,
            6,
        )
    if report.creations is not None:
        c = report.creations
        lines += [
            "",
            f"3. ray.get_actor by name (the supervisor does one per creation): p50 "
            f"{c.ray_get_actor_by_name.p50_ms:.2f} ms",
        ]
        lines += _profile_lines("3. host profile, create_sessions(100)", c.batched_100_host_profile, 6, "session")
    if report.host_crash is not None:
        lines += [
            "",
            "6. seconds after ray.kill: old process gone / worker process started (a prestarted one: "
            "before the kill) / host __init__ / store open / first call served",
        ]
        for label, rnd in report.host_crash.rounds.items():
            a = rnd.after_kill_s
            lines.append(
                f"  {label:32} {a['old_process_gone']} / {a['worker_process_started']} / "
                f"{a['host_init_ran']} / {a['store_open_and_recovered']} / {a['first_call_served']}"
            )
    lines += ["", "node hard failure (multi-node): python -m benchmarks.ray_failover"]
    return "\n".join(lines)
