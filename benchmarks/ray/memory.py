"""Part 4: memory per idle hosted session, from the host process's resident set."""

from __future__ import annotations

import asyncio

from benchmarks.harness.procfs import private_bytes, proc_status
from benchmarks.ray.host import activate, bulk_sessions, host_of, send_many, wait_no_open_turns
from benchmarks.ray.report import HostMemory, HostReading
from repertory.tree.runtime import Runtime

__all__ = ["host_memory"]


async def host_memory(rt: Runtime, n: int) -> HostMemory:
    """The host's VmRSS after a warm-up, N sessions created, activated, after a turn each, passivated."""
    host = host_of(rt)
    pid = (await host.ping.remote())["pid"]
    readings: dict[str, HostReading] = {}

    async def read(label: str) -> None:
        await asyncio.sleep(0.2)
        facts = await host.ping.remote()
        status, smaps = proc_status(pid), private_bytes(pid)
        readings[label] = HostReading(
            VmRSS=status["VmRSS"],
            VmHWM=status["VmHWM"],
            smaps_rss=smaps.rss,
            smaps_pss=smaps.pss,
            smaps_private=smaps.private,
            resident=facts["resident"],
        )

    warm = await bulk_sessions(rt, 500)  # code paths, caches and the connection warmed up, then passivated
    await activate(warm)
    await send_many(rt, warm, 1, "warm")
    await wait_no_open_turns(rt)
    await host.passivate_idle.remote(0)
    await read("baseline")
    handles = await bulk_sessions(rt, n)
    await read("created")
    await activate(handles)
    await read("activated")
    await send_many(rt, handles, 1, "one")
    await wait_no_open_turns(rt)
    await read("after_one_turn")
    passivated = await host.passivate_idle.remote(0)
    await read("passivated")
    base = readings["baseline"].VmRSS
    return HostMemory(
        sessions=n,
        host_pid=pid,
        readings=readings,
        rss_growth_bytes_per_session={
            k: round((v.VmRSS - base) / n, 1) for k, v in readings.items() if k != "baseline"
        },
        passivated=passivated,
        note="VmRSS of the host process, read from /proc/<pid>/status; growth over the baseline, over N. "
        "RSS includes allocator slack and SQLite's page cache and hardly shrinks when objects are freed.",
    )
