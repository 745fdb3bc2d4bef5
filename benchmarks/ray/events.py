"""Part 5: event latency, from an event published in the host to the client receiving it.

The host's listener stamps ``time.time()`` when the bus publishes (right after the commit that
makes the event durable); the client stamps ``time.time()`` when ``handle.events()`` yields it
(same machine clock). The same figure from ``event.at`` (epoch ms, set when the event is emitted,
before its commit) is reported beside it.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Sequence

from benchmarks.harness.stats import dist_ms
from benchmarks.ray.host import bulk_sessions, host_of
from benchmarks.ray.report import EventLatency, ManyStreams, OneSession, UnderLoad
from repertory.tree.handle import SessionHandle
from repertory.tree.runtime import Runtime

__all__ = ["event_latency"]


async def _run_n(h: SessionHandle, n: int) -> None:
    for i in range(n):
        await h.run(f"many {i}")


async def event_latency(rt: Runtime, turns: int, streams: int) -> EventLatency:
    """One watched session alone; the same under unwatched load; M sessions each with its own stream."""
    host = host_of(rt)
    single = (await bulk_sessions(rt, 1))[0]
    many = await bulk_sessions(rt, streams)
    quiet = await bulk_sessions(rt, streams)
    await host.stamp.remote([single.id, *(h.id for h in many)])
    received: dict[str, list[tuple[int, str, int, float]]] = collections.defaultdict(list)

    async def reader(h: SessionHandle) -> None:
        async for event in h.events():
            now = time.time()
            if event.seq is not None:
                received[h.id].append((event.seq, event.type, event.at, now))

    def latencies(ids: Sequence[str], stamps: dict[str, dict[int, float]]) -> tuple[list[float], list[float]]:
        precise: list[float] = []
        from_at: list[float] = []
        for sid in ids:
            for seq, _type, at, now in received[sid]:
                if seq in stamps[sid]:
                    precise.append(now - stamps[sid][seq])
                from_at.append(now - at / 1000)
        return precise, from_at

    async def settle(ids: Sequence[str], expected: int) -> None:
        deadline = time.monotonic() + 30
        while sum(1 for sid in ids for e in received[sid] if e[1] == "turn.completed") < expected:
            if time.monotonic() > deadline:
                raise RuntimeError("events did not arrive within 30 s")
            await asyncio.sleep(0.01)  # polling: events arrive from another process

    tasks = [asyncio.create_task(reader(single))]
    try:
        await single.run("warm")
        await settle([single.id], 1)
        received[single.id].clear()
        for i in range(turns):
            await single.run(f"turn {i}")
        await settle([single.id], turns)
        stamps = await host.stamps.remote([single.id])
        precise_one, at_one = latencies([single.id], stamps)
        types = collections.Counter(e[1] for e in received[single.id])

        # The same one stream while as many sessions as in the next phase run turns with nobody watching.
        per, per_quiet = 10, 30  # the unwatched load runs longer: the watched session gets 1/M of the host
        await asyncio.gather(*(h.run("warm") for h in quiet))
        received[single.id].clear()
        others_done = False

        async def watched_loop() -> int:
            i = 0
            while not others_done or i < 3:
                await single.run(f"under load {i}")
                i += 1
            return i

        t0 = time.perf_counter()
        watched = asyncio.create_task(watched_loop())
        await asyncio.gather(*(_run_n(h, per_quiet) for h in quiet))
        quiet_wall = time.perf_counter() - t0
        others_done = True
        watched_turns = await watched
        await settle([single.id], watched_turns)
        stamps = await host.stamps.remote([single.id])
        precise_loaded, at_loaded = latencies([single.id], stamps)

        tasks += [asyncio.create_task(reader(h)) for h in many]
        await asyncio.gather(*(h.run("warm") for h in many))
        await settle([h.id for h in many], len(many))
        for h in many:
            received[h.id].clear()
        t0 = time.perf_counter()
        await asyncio.gather(*(_run_n(h, per) for h in many))
        wall = time.perf_counter() - t0
        await settle([h.id for h in many], len(many) * per)
        stamps = await host.stamps.remote([h.id for h in many])
        precise_many, at_many = latencies([h.id for h in many], stamps)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return EventLatency(
        one_session=OneSession(
            turns=turns,
            events_per_turn={k: round(v / turns, 2) for k, v in types.items()},
            publish_to_client=dist_ms(precise_one),
            event_at_to_client=dist_ms(at_one),
        ),
        one_stream_under_load=UnderLoad(
            sessions_running_unwatched=len(quiet),
            turns_per_session=per_quiet,
            turns_per_s=round(len(quiet) * per_quiet / quiet_wall, 1),
            watched_turns=watched_turns,
            publish_to_client=dist_ms(precise_loaded),
            event_at_to_client=dist_ms(at_loaded),
        ),
        many_streams=ManyStreams(
            sessions_each_with_a_stream=len(many),
            turns_per_session=per,
            turns_per_s=round(len(many) * per / wall, 1),
            publish_to_client=dist_ms(precise_many),
            event_at_to_client=dist_ms(at_many),
        ),
        note="publish_to_client: host publish stamp (right after the commit, time.time() in the host) to the "
        "client's receive (time.time()); event_at_to_client uses event.at (ms, stamped at emit, before "
        "the commit), so it also counts the commit and up to 1 ms of truncation.",
    )
