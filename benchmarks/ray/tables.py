"""The Ray report's tables, as printed after a run: every target and its figure, then where the time goes."""

from __future__ import annotations

from typing import Any

from benchmarks.ray.report import RayProfile, RayReport

__all__ = ["render"]

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


def render(report: RayReport) -> str:
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
