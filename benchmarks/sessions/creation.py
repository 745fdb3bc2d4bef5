"""Part 3: sessions created per second, then the same work one layer down at a time.

``rt.create_session`` in a loop and in ``asyncio.gather`` batches of 100, then the host's
``create_session``, the store's alone (records built beforehand), and building the record alone,
so the figure can be split; and the loop again with durability full.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable

from benchmarks.sessions.report import CreationPart, FullRates, Rate
from benchmarks.sessions.shared import AGENT, local_host, reply, runtime
from repertory.core.ids import new_id, now_ms
from repertory.core.tree import Lineage, NewSession, SessionRecord
from repertory.testing import ScriptedModel
from repertory.tree.runtime import Runtime

__all__ = ["BATCH", "creation"]

BATCH = 100


async def _rate(work: Callable[[int], Awaitable[object]], count: int) -> float:
    gc.collect()
    t0 = time.perf_counter()
    await work(count)
    return count / (time.perf_counter() - t0)


def _records(count: int) -> list[SessionRecord]:
    at = now_ms()
    out = []
    for _ in range(count):
        sid = new_id()
        out.append(
            SessionRecord(
                session_id=sid, agent=AGENT, lineage=Lineage(kind="root"), root_id=sid, created_at=at, updated_at=at
            )
        )
    return out


def _summary(rates: list[float]) -> Rate:
    return Rate(
        median_per_s=statistics.median(rates),
        best_per_s=max(rates),
        rounds_per_s=rates,
        median_us_each=1e6 / statistics.median(rates),
    )


async def _normal(rt: Runtime, n: int, rounds: int) -> dict[str, Rate]:
    host = local_host(rt)

    async def loop(count: int) -> None:
        for _ in range(count):
            await rt.create_session(agent=AGENT)

    async def batched(count: int) -> None:
        for _ in range(count // BATCH):
            await asyncio.gather(*(rt.create_session(agent=AGENT) for _ in range(BATCH)))

    async def host_only(count: int) -> None:
        for _ in range(count):
            await host.create_session(NewSession(agent=AGENT))

    async def store_only(count: int) -> float:
        """Sessions per second of the store alone, records built beforehand."""
        prepared = _records(count)
        store = rt.store
        gc.collect()
        t0 = time.perf_counter()
        for record in prepared:
            await store.create_session(record)
        return count / (time.perf_counter() - t0)

    await loop(500)  # warm-up
    variants: dict[str, list[float]] = {"runtime_loop": [], "runtime_gather_100": [], "host_create_session": []}
    store_rates: list[float] = []
    record_us: list[float] = []
    for _ in range(rounds):
        variants["runtime_loop"].append(await _rate(loop, n))
        variants["runtime_gather_100"].append(await _rate(batched, n))
        variants["host_create_session"].append(await _rate(host_only, n))
        store_rates.append(await store_only(n))
        gc.collect()
        t0 = time.perf_counter()
        _records(n)
        record_us.append((time.perf_counter() - t0) / n * 1e6)
    summary = {
        name: _summary(rates)
        for name, rates in {**variants, "store_create_session_prebuilt_records": store_rates}.items()
    }
    summary["build_session_record_alone"] = Rate(median_us_each=statistics.median(record_us))
    return summary


async def creation(folder: str, n: int, rounds: int, full_n: int) -> CreationPart:
    """Creation rates with durability normal, then the runtime loop with durability full."""
    model = ScriptedModel(reply)
    rt = await runtime(folder, "create.db", model)
    try:
        normal = await _normal(rt, n, rounds)
    finally:
        await rt.close()

    rt = await runtime(folder, "create_full.db", model, durability="full")
    try:

        async def loop_full(count: int) -> None:
            for _ in range(count):
                await rt.create_session(agent=AGENT)

        await loop_full(100)
        full_rates = [await _rate(loop_full, full_n) for _ in range(rounds)]
    finally:
        await rt.close()
    return CreationPart(
        sessions_per_round=n,
        rounds=rounds,
        normal=normal,
        full=FullRates(sessions_per_round=full_n, runtime_loop=_summary(full_rates)),
    )
