"""Part 3: session creations through one host, next to a dedicated Ray actor per session."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import ray

from benchmarks.harness.procfs import private_bytes
from benchmarks.harness.stats import dist_ms
from benchmarks.ray.host import AGENT, BATCH, Trivial, client_of, create_spec, host_of
from benchmarks.ray.report import AllAtOnce, Creations, DedicatedSessions, RayProfile, TrivialActors
from repertory.actors.names import shared_host_name
from repertory.tree.runtime import Runtime

__all__ = ["creations", "dedicated_sessions", "trivial_actors"]


async def _rate(work: Callable[[], Awaitable[None]], count: int) -> float:
    gc.collect()
    t0 = time.perf_counter()
    await work()
    return round(count / (time.perf_counter() - t0), 1)


async def creations(rt: Runtime, n_call: int, n_batch: int, n_actors: int, n_dedicated: int) -> Creations:
    """Creations per second one per call (client and host), batched, and what a creation costs in the host."""
    host = host_of(rt)
    for _ in range(50):
        await rt.create_session(agent=AGENT)
    await host.create_sessions.remote([create_spec() for _ in range(BATCH)])

    async def loop() -> None:
        for _ in range(n_call):
            await rt.create_session(agent=AGENT)

    async def concurrent() -> None:
        for start in range(0, n_call, BATCH):
            await asyncio.gather(*(rt.create_session(agent=AGENT) for _ in range(min(BATCH, n_call - start))))

    async def host_loop() -> None:
        for _ in range(n_call):
            await host.create_session.remote(create_spec())

    async def host_concurrent() -> None:
        for start in range(0, n_call, BATCH):
            await asyncio.gather(
                *(host.create_session.remote(create_spec()) for _ in range(min(BATCH, n_call - start)))
            )

    async def batched() -> None:
        for start in range(0, n_batch, BATCH):
            await host.create_sessions.remote([create_spec() for _ in range(min(BATCH, n_batch - start))])

    async def batched_1000() -> None:
        for start in range(0, n_batch, 1000):
            await host.create_sessions.remote([create_spec() for _ in range(min(1000, n_batch - start))])

    rates = {
        "per_call_loop_per_s": await _rate(loop, n_call),
        "per_call_concurrent_100_per_s": await _rate(concurrent, n_call),
        "host_direct_loop_per_s": await _rate(host_loop, n_call),
        "host_direct_concurrent_100_per_s": await _rate(host_concurrent, n_call),
        "batched_100_per_s": await _rate(batched, n_batch),
        "batched_1000_per_s": await _rate(batched_1000, n_batch),
    }
    # Where a batched creation's time goes in the host (event loop thread).
    await host.profile_start.remote()
    t0 = time.perf_counter()
    for _ in range(10):
        await host.create_sessions.remote([create_spec() for _ in range(BATCH)])
    profiled_s = time.perf_counter() - t0
    batch_profile = RayProfile.model_validate(await host.profile_stop.remote(10 * BATCH))
    batch_profile.wall_us_per_session = round(profiled_s / (10 * BATCH) * 1e6, 1)
    # The supervisor looks its shared host up by name (ray.get_actor) on every creation: what that costs.
    client = client_of(rt)
    name = shared_host_name(client.prefix, 0)
    lookups: list[float] = []
    for _ in range(200):
        t0 = time.perf_counter()
        ray.get_actor(name, namespace=client.namespace)
        lookups.append(time.perf_counter() - t0)
    return Creations(
        **rates,
        per_call_sessions=n_call,
        batched_sessions=n_batch,
        path_per_call="rt.create_session -> supervisor.create_session -> host.create_session (two Ray hops)",
        batched_100_host_profile=batch_profile,
        ray_get_actor_by_name=dist_ms(lookups),
        dedicated_trivial_actors=await trivial_actors(n_actors),
        dedicated_sessions=await dedicated_sessions(rt, n_dedicated),
    )


async def trivial_actors(n: int) -> TrivialActors:
    """Create ``n`` trivial actors: the first 5 one at a time, the rest all at once; memory of each."""
    remote: Any = ray.remote
    cls = remote(num_cpus=0)(Trivial)
    actors: list[Any] = []
    sequential: list[float] = []
    try:
        for _ in range(min(5, n)):
            t0 = time.perf_counter()
            actor = cls.remote()
            actors.append(actor)
            await actor.ping.remote()
            sequential.append(time.perf_counter() - t0)
        rest = n - len(actors)
        t0 = time.perf_counter()
        batch = [cls.remote() for _ in range(rest)]
        actors += batch
        await asyncio.gather(*(a.ping.remote() for a in batch))
        concurrent_s = time.perf_counter() - t0
        pids = await asyncio.gather(*(a.ping.remote() for a in actors))
        mem = [private_bytes(pid) for pid in pids]
    finally:
        for actor in actors:
            with contextlib.suppress(Exception):
                ray.kill(actor)
    return TrivialActors(
        actors=n,
        one_at_a_time_s=dist_ms(sequential),
        all_at_once=AllAtOnce(
            actors=n - len(sequential),
            seconds=round(concurrent_s, 3),
            per_s=round((n - len(sequential)) / concurrent_s, 2) if concurrent_s else None,
        ),
        rss_mb_median=round(statistics.median(m.rss for m in mem) / 1e6, 1),
        pss_mb_median=round(statistics.median(m.pss for m in mem) / 1e6, 1),
        private_mb_median=round(statistics.median(m.private for m in mem) / 1e6, 1),
        note="private = Private_Clean + Private_Dirty (smaps_rollup): what each actor adds; rss counts shared pages",
    )


async def dedicated_sessions(rt: Runtime, n: int) -> DedicatedSessions:
    """Real ``placement="dedicated"`` sessions: a SessionHost process each."""
    created: list[float] = []
    first_turn: list[float] = []
    for i in range(n):
        t0 = time.perf_counter()
        h = await rt.create_session(agent=AGENT, placement="dedicated")
        t1 = time.perf_counter()
        await h.run(f"hello {i}")
        created.append(t1 - t0)
        first_turn.append(time.perf_counter() - t1)
    facts = [f for f in await client_of(rt).ping() if f["dedicated"]]
    mem = [private_bytes(f["pid"]) for f in facts]
    return DedicatedSessions(
        sessions=n,
        create_s=dist_ms(created),
        first_turn_s=dist_ms(first_turn),
        rss_mb_median=round(statistics.median(m.rss for m in mem) / 1e6, 1) if mem else None,
        private_mb_median=round(statistics.median(m.private for m in mem) / 1e6, 1) if mem else None,
    )
