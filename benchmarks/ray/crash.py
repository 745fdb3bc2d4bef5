"""Part 6: a host crash: ``ray.kill`` with N sessions resident, and how soon a call is served again."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import ray

from benchmarks.harness.procfs import alive
from benchmarks.ray.host import activate, bulk_sessions, host_of
from benchmarks.ray.report import CrashRound, HostCrash
from repertory.tree.runtime import Runtime

__all__ = ["host_crash"]


async def _retry(call: Callable[[], Awaitable[Any]], within: float = 30.0) -> Any:
    """``call()`` until it does not fail (a restarting actor refuses calls for a while)."""
    deadline = time.monotonic() + within
    while True:
        try:
            return await call()
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.01)


async def host_crash(rt: Runtime, n: int) -> HostCrash:
    """Kill the host three times (sessions re-activated before each); time the first call served after."""
    host = host_of(rt)
    t0 = time.perf_counter()
    handles = await bulk_sessions(rt, n)
    created_s = time.perf_counter() - t0
    probe = handles[n // 2]
    await probe.run("before the crash")
    rounds: dict[str, CrashRound] = {}

    async def kill_and_time(label: str, served: Callable[[], Awaitable[Any]]) -> None:
        t0 = time.perf_counter()
        await activate(handles)
        activate_s = time.perf_counter() - t0
        before = await host.ping.remote()
        killed_at = time.time()
        t0 = time.perf_counter()
        ray.kill(host, no_restart=False)
        # ray.kill only asks: until the old process is gone it may still serve a call, which would
        # time nothing. Wait for it to die (the clock runs from the kill), then call.
        for _ in range(6000):  # polling: another process's death, nothing here to await
            if not alive(before["pid"]):
                break
            await asyncio.sleep(0.005)
        gone_at = time.time()
        await served()
        took = time.perf_counter() - t0
        served_at = time.time()
        after = await _retry(host.ping.remote)
        assert after["pid"] != before["pid"], "the host was not restarted"
        boot = await host.boot_times.remote()

        def since(at: float | None) -> float | None:
            return None if at is None else round(at - killed_at, 3)

        rounds[label] = CrashRound(
            seconds=round(took, 3),
            resident_before_kill=before["resident"],
            activate_all_s=round(activate_s, 3),
            resident_after=after["resident"],
            after_kill_s={
                "old_process_gone": since(gone_at),
                "worker_process_started": since(boot["process_started_at"]),  # Ray may reuse a prestarted one
                "host_init_ran": since(boot["init_at"]),
                "store_open_and_recovered": since(boot["booted_at"]),
                "first_call_served": since(served_at),
            },
        )

    async def bare_poll() -> None:
        await _retry(lambda: host.metadata.remote(probe.id))

    async def run_turn() -> None:
        result = await probe.run("after the crash")
        assert result.text == "ok"

    await kill_and_time("handle_metadata", probe.metadata)
    await kill_and_time("handle_run", run_turn)
    await kill_and_time("bare_actor_metadata_polled_10ms", bare_poll)
    return HostCrash(sessions=n, created_in_s=round(created_s, 3), rounds=rounds)
