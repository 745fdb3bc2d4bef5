"""Parts 1 and 2: a turn's overhead through Ray, and turns/s through one host under load."""

from __future__ import annotations

import asyncio
import cProfile
import gc
import time
from collections.abc import Awaitable, Callable
from typing import Any

from benchmarks.harness.procfs import CpuWindow
from benchmarks.harness.stats import dist_ms
from benchmarks.ray.host import AGENT as AGENT_NAME
from benchmarks.ray.host import SLOW, bulk_sessions, host_of, message, send_many, wait_no_open_turns
from benchmarks.ray.profile import ray_profile
from benchmarks.ray.report import Load, Measured, Overhead, RayProfile
from repertory.core.ids import new_id
from repertory.tree.handle import SessionHandle
from repertory.tree.runtime import Runtime

__all__ = ["IDLE_BEFORE", "load", "turn_overhead"]

IDLE_BEFORE = 0.002
"""Seconds idle before each ``run_after_idle`` turn: about one Ray round trip (1.1-1.7 ms here), the
time a host waits between the calls of ``run_direct``."""


async def turn_overhead(rt: Runtime, sessions: int, rounds: int) -> Overhead:
    """``handle.run`` one at a time round-robin, split in ``send()`` and ``result()``; Ray's floors beside it."""
    handles = [await rt.create_session(agent=AGENT_NAME) for _ in range(sessions)]
    for i in range(max(20, sessions * 2)):
        await handles[i % sessions].run(f"warm {i}")
    runs: list[float] = []
    sends: list[float] = []
    results: list[float] = []
    gc.collect()
    for i in range(rounds):
        h = handles[i % sessions]
        t0 = time.perf_counter()
        turn = await h.send(f"turn {i}")
        t1 = time.perf_counter()
        result = await turn.result()
        t2 = time.perf_counter()
        assert result.text == "ok"
        runs.append(t2 - t0)
        sends.append(t1 - t0)
        results.append(t2 - t1)
    # handle.run() is send() + result(); one more pass through run() itself, to show it is the same.
    direct: list[float] = []
    for i in range(min(rounds, 200)):
        t0 = time.perf_counter()
        await handles[i % sessions].run(f"run {i}")
        direct.append(time.perf_counter() - t0)
    # The same, each turn after the process idled IDLE_BEFORE seconds: what a Ray host does between
    # its calls. A turn back to back with the last one finds its code and data in the CPU's caches.
    after_idle: list[float] = []
    for i in range(min(rounds, 200)):
        await asyncio.sleep(IDLE_BEFORE)
        t0 = time.perf_counter()
        await handles[i % sessions].run(f"idle {i}")
        after_idle.append(time.perf_counter() - t0)
    out = Overhead(
        backend=rt.backend,
        sessions=sessions,
        rounds=rounds,
        run=dist_ms(runs),
        send=dist_ms(sends),
        result=dist_ms(results),
        run_direct=dist_ms(direct),
        run_after_idle=dist_ms(after_idle),
    )
    if rt.backend == "ray":
        host = host_of(rt)
        pings: list[float] = []
        meta: list[float] = []
        for i in range(500):
            t0 = time.perf_counter()
            await host.ping.remote()
            t1 = time.perf_counter()
            await host.metadata.remote(handles[i % sessions].id)
            meta.append(time.perf_counter() - t1)
            pings.append(t1 - t0)
        out.bare_ray_call_ping = dist_ms(pings)
        out.bare_ray_call_metadata = dist_ms(meta)
        one_hop: list[float] = []
        for i in range(rounds):
            t0 = time.perf_counter()
            text = await host.bench_run_turn.remote(handles[i % sessions].id, message(f"hop {i}"), new_id())
            one_hop.append(time.perf_counter() - t0)
            assert text == "ok"
        out.one_hop_prototype_run = dist_ms(one_hop)
        inside: list[float] = []
        for i in range(rounds):
            sid = handles[i % sessions].id
            inside.append(await host.bench_timed_run.remote(sid, message(f"timed {i}"), new_id()))
        out.host_run_turn = dist_ms(inside)
        # send() whose turn only queues (its session is busy) next to one whose turn starts at once.
        busy = await rt.create_session(agent=SLOW)
        await busy.send("hold the session")
        queued: list[float] = []
        for i in range(min(rounds, 300)):
            t0 = time.perf_counter()
            await busy.send(f"queued {i}")
            queued.append(time.perf_counter() - t0)
        await busy.cancel()
        out.send_that_only_queues = dist_ms(queued)
    return out


async def load(rt: Runtime, n: int, turns: int, profile: bool = False) -> Load:
    """N sessions x T turns through one host, three ways; with ``profile``, cProfile on both sides."""
    host = host_of(rt)
    handles = await bulk_sessions(rt, n)
    await asyncio.gather(*(h.run("warm") for h in handles))  # every session active, client caches filled
    host_pid = (await host.ping.remote())["pid"]

    async def measured(work: Callable[[], Awaitable[dict[str, Any]]], count: int) -> Measured:
        gc.collect()
        client_profiler = cProfile.Profile() if profile else None
        if profile:
            await host.profile_start.remote()
        window = CpuWindow(host_pid)
        if client_profiler is not None:
            client_profiler.enable()
        extra = await work()
        if client_profiler is not None:
            client_profiler.disable()
        cpu = window.close()
        result = Measured(
            turns=count,
            turns_per_s=round(count / cpu["wall_s"], 1),
            cpu=cpu,
            cpu_ms_per_turn={
                k.removesuffix("_cpu_s"): round(v / count * 1e3, 3) for k, v in cpu.items() if k.endswith("_cpu_s")
            },
            **extra,
        )
        if client_profiler is not None:
            result.host_profile = RayProfile.model_validate(await host.profile_stop.remote(count))
            result.client_profile = ray_profile(client_profiler, count)
        return result

    async def handle_run() -> dict[str, Any]:
        latencies: list[float] = []

        async def one(h: SessionHandle) -> None:
            for t in range(turns):
                t0 = time.perf_counter()
                await h.run(f"load {t}")
                latencies.append(time.perf_counter() - t0)

        await asyncio.gather(*(one(h) for h in handles))
        return {"turn_latency": dist_ms(latencies)}

    async def batched() -> dict[str, Any]:
        t0 = time.perf_counter()
        await send_many(rt, handles, turns, "batched")
        queued_s = time.perf_counter() - t0
        await wait_no_open_turns(rt)
        return {
            "send_many_batch": 256,
            "queued_in_s": round(queued_s, 3),
            "completion": "polled from the store (list_open_turns every 20 ms)",
        }

    async def one_hop() -> dict[str, Any]:
        latencies: list[float] = []

        async def one(h: SessionHandle) -> None:
            for t in range(turns):
                t0 = time.perf_counter()
                await host.bench_run_turn.remote(h.id, message(f"hop {t}"), new_id())
                latencies.append(time.perf_counter() - t0)

        await asyncio.gather(*(one(h) for h in handles))
        return {"turn_latency": dist_ms(latencies)}

    return Load(
        sessions=n,
        turns_per_session=turns,
        max_in_flight=256,
        handle_run=await measured(handle_run, n * turns),
        send_many=await measured(batched, n * turns),
        one_hop_prototype=await measured(one_hop, n * turns),
    )
