"""Part 4: N sessions each run T turns, all at once, against a model with a fixed delay.

Per-turn overhead is the turn's wall time minus the delay; ``StampedModel`` splits it into before
the model, the model's sleep running late (event loop lag) and after the model. A task that sleeps
10 ms in a loop measures the event loop's lag throughout. With ``profile``, cProfile runs on the
event loop thread (worker threads are not profiled) and the profile is grouped by layer.
"""

from __future__ import annotations

import asyncio
import collections
import cProfile
import gc
import os
import time
from typing import Any

from benchmarks.harness.procfs import proc_status
from benchmarks.harness.profiling import Key, by_category, label, stats_of, top_by_tottime, total_tottime
from benchmarks.harness.stats import dist_ms
from benchmarks.harness.timing import GcTimer
from benchmarks.sessions.report import (
    CallerCost,
    ConcurrentPart,
    GcFigures,
    GroupShare,
    LoopProfile,
    Split,
    TopFunction,
)
from benchmarks.sessions.shared import AGENT, StampedModel, local_host, runtime
from repertory.runtime.host import LocalHost
from repertory.tree.handle import SessionHandle

__all__ = ["concurrent", "layer", "loop_profile"]

IDLE = "idle: waiting in epoll"


async def _lag_sampler(
    lags: list[float], progress: list[tuple[float, int]], host: LocalHost, interval: float = 0.01
) -> None:
    """Event loop lag every ``interval``, and the host's activation count over time."""
    while True:
        t0 = time.perf_counter()
        await asyncio.sleep(interval)
        now = time.perf_counter()
        lags.append(now - t0 - interval)
        progress.append((now, host.activations))


async def concurrent(folder: str, n: int, turns: int, delay: float, profile: bool) -> ConcurrentPart:
    """``n`` sessions x ``turns`` turns at once; every turn's overhead and where it went."""
    model = StampedModel(delay)
    rt = await runtime(folder, f"concurrent_{n}.db", model, idle_timeout=3600.0)
    host = local_host(rt)
    try:
        # Warm-up outside the figures (imports, validators, reader connections, executor threads).
        for _ in range(20):
            h = await rt.create_session(agent=AGENT)
            await h.run("warm-up")
        host.passivate_idle(0)
        model.started.clear()
        model.replied.clear()

        t0 = time.perf_counter()
        handles = [await rt.create_session(agent=AGENT) for _ in range(n)]
        create_s = time.perf_counter() - t0

        spans: list[tuple[str, int, float, float]] = []
        failures: collections.Counter[str] = collections.Counter()

        async def one(i: int, h: SessionHandle) -> None:
            for t in range(turns):
                key = f"session {i} turn {t}"
                start = time.perf_counter()
                try:
                    result = await h.run(key)
                except Exception as exc:  # measured, not asserted: count and go on
                    failures[type(exc).__name__] += 1
                    continue
                end = time.perf_counter()
                if result.status != "done" or result.text != "ok":
                    failures[f"status {result.status}"] += 1
                spans.append((key, t, start, end))

        lags: list[float] = []
        progress: list[tuple[float, int]] = []
        activations0 = host.activations
        sampler = asyncio.get_running_loop().create_task(_lag_sampler(lags, progress, host))
        profiler = cProfile.Profile() if profile else None
        gc.collect()
        with GcTimer() as gc_time:
            cpu0, wall0 = time.process_time(), time.perf_counter()
            if profiler is not None:
                profiler.enable()
            await asyncio.gather(*(one(i, h) for i, h in enumerate(handles)))
            if profiler is not None:
                profiler.disable()
            wall = time.perf_counter() - wall0
            cpu = time.process_time() - cpu0
        sampler.cancel()
        await asyncio.gather(sampler, return_exceptions=True)
        status = proc_status()
        resident = host.resident
        activations = host.activations - activations0
    finally:
        await rt.close()

    done = len(spans)
    overhead = [end - start - delay for _, _, start, end in spans]
    before = [model.started[k] - start for k, _, start, _ in spans]
    late = [model.replied[k] - model.started[k] - delay for k, _, _, _ in spans]
    after = [end - model.replied[k] for k, _, _, end in spans]
    first = [end - start - delay for _, t, start, end in spans if t == 0]
    later = [end - start - delay for _, t, start, end in spans if t > 0]

    def activated_by(share: float) -> float | None:
        """Seconds after launch until ``share`` of the sessions had an actor (10 ms resolution)."""
        goal = activations0 + share * n
        return next((t - wall0 for t, count in progress if count >= goal), None)

    return ConcurrentPart(
        sessions=n,
        turns_per_session=turns,
        seconds_until_activated={f"{int(q * 100)}%": activated_by(q) for q in (0.1, 0.5, 0.9, 1.0)},
        model_delay_ms=delay * 1e3,
        turns_done=done,
        failures=dict(failures),
        create_sessions_seconds=create_s,
        wall_seconds=wall,
        ideal_wall_seconds=turns * delay,
        turns_per_s=done / wall if wall else 0.0,
        process_cpu_seconds=cpu,
        cpu_ms_per_turn=cpu / done * 1e3 if done else None,
        cpu_utilisation_cores=cpu / wall if wall else None,
        gc=GcFigures(
            seconds=gc_time.seconds,
            ms_per_turn=gc_time.seconds / done * 1e3 if done else None,
            collections_by_generation=gc_time.by_generation,
        ),
        per_turn_overhead=dist_ms(overhead),
        overhead_first_turn=dist_ms(first),
        overhead_later_turns=dist_ms(later),
        split=Split(before_model=dist_ms(before), model_sleep_late=dist_ms(late), after_model=dist_ms(after)),
        event_loop_lag=dist_ms(lags),
        resident_actors_at_end=resident,
        activations=activations,
        rss_bytes_at_end=status["VmRSS"],
        peak_rss_bytes=status["VmHWM"],
        profile=loop_profile(profiler, done) if profiler is not None else None,
    )


def layer(key: Key) -> str:
    """The layer a profiled function belongs to."""
    filename, _, name = key
    if filename == "~":
        if "select.epoll" in name:
            return IDLE
        if "sqlite3" in name:
            return "SQLite (C)"
        if "pydantic_core" in name:
            return "pydantic (C)"
        if "_thread" in name or "acquire" in name:
            return "thread hops (executor, locks)"
        return "other builtins"
    path = filename.replace("\\", "/")
    base = os.path.basename(path)
    if "/repertory/storage/" in path:
        return "store (Python)"
    if "/repertory/testing/" in path:
        return "ScriptedModel"
    if "/repertory/tree/" in path or ("/repertory/runtime/" in path and base in ("actor.py", "host.py", "events.py")):
        return "actor layer (actor/host/handle/events)"
    if "/repertory/runtime/" in path or "/repertory/core/" in path:
        return "engine (session/_loop/history/...)"
    if "/pydantic/" in path:
        return "pydantic (Python)"
    if "/asyncio/threads.py" in path or "/concurrent/futures/" in path or base in ("threading.py", "queue.py"):
        return "thread hops (executor, locks)"
    if "/asyncio/" in path:
        return "asyncio machinery"
    if base == "copy.py":
        return "copy (deep copies of RunState)"
    if "/json/" in path:
        return "json (stdlib)"
    if "/benchmarks/" in path:
        return "benchmark harness"
    return "other Python"


KEY_FUNCTIONS = (
    "run", "send", "result", "actor", "_run_turn", "_finish", "start", "_start", "commit", "request",
    "supersede_open_runs", "list_runs", "to_thread", "wait_turn", "append", "_work",
)  # fmt: skip


def loop_profile(profiler: cProfile.Profile, turns: int) -> LoopProfile:
    """The event loop thread's profile, per turn: by layer, top functions with callers, store calls."""
    stats = stats_of(profiler)
    total = total_tottime(stats)
    groups = by_category(stats, layer)
    busy = total - groups.get(IDLE, 0.0)
    store_calls: dict[str, float] = {
        key[2]: v[1] / turns
        for key, v in stats.items()
        if "/repertory/storage/" in key[0] and not key[2].startswith("_") and key[2] != "<lambda>"
    }
    cumulative = {
        label(key): CallerCost(ncalls_per_turn=v[1] / turns, cumtime_us_per_turn=v[3] / turns * 1e6)
        for key, v in stats.items()
        if key[2] in KEY_FUNCTIONS and ("/repertory/" in key[0] or "asyncio/threads.py" in key[0])
    }

    def callers(callers_of: dict[Key, tuple[Any, ...]]) -> dict[str, CallerCost]:
        ranked = sorted(callers_of.items(), key=lambda kv: -kv[1][3])[:4]
        return {
            label(c): CallerCost(ncalls_per_turn=cv[1] / turns, cumtime_us_per_turn=cv[3] / turns * 1e6)
            for c, cv in ranked
        }

    return LoopProfile(
        turns=turns,
        profiled_seconds=total,
        busy_seconds=busy,
        busy_us_per_turn=busy / turns * 1e6,
        groups={
            k: GroupShare(
                seconds=v,
                share_of_busy=(v / busy if busy and not k.startswith("idle") else None),
                us_per_turn=v / turns * 1e6,
            )
            for k, v in groups.items()
        },
        top_by_tottime=[
            TopFunction(
                function=label(k),
                ncalls_per_turn=v[1] / turns,
                tottime_us_per_turn=v[2] / turns * 1e6,
                cumtime_us_per_turn=v[3] / turns * 1e6,
                top_callers=callers(v[4]),
            )
            for k, v in top_by_tottime(stats, 30)
        ],
        store_calls_per_turn=dict(sorted(store_calls.items(), key=lambda kv: -kv[1])),
        cumulative_of_key_functions=dict(sorted(cumulative.items(), key=lambda kv: -kv[1].cumtime_us_per_turn)),
        note="event loop thread only (worker threads are not profiled); profiler overhead included",
    )
