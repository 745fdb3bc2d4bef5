"""One host process on the million-session database: activate the active fraction, then cold activations.

Runs in a child interpreter (``python -m benchmarks.million --child SPEC``) so its resident set is
its own. Sessions are picked by ``ord`` (the creation order, ``sessions_by_ord``) in four
disjoint stripes, ``ord % 4``: 0 is the untraced child's active set, 2 the traced child's (so
neither activates a session the other ran), 1 the cold samples, 3 the warm-up. Within a stripe the
picks are random (a seeded ``random.sample`` of the range, never materialised).

1. Warm-up: 20 sessions run a turn, so imports, caches and the pool are in place before the
   baseline is read.
2. Steps of the active fraction (half, then all of it): each step's sessions are activated by
   their first handle and run one turn (``rt.send_many`` in batches of 500, then every turn
   awaited), timed with the host's CPU (``time.process_time``), the server's CPU (its processes in
   ``/proc``) and the WAL written (``pg_current_wal_lsn``); each session is its own client
   (``rt.session``, ``handle.send``, ``turn.wait``), 100 at once (500 ran out of the pool's 16
   connections within its 10 s timeout under tracemalloc on a loaded machine); then
   ``gc.collect()`` and the readings (RSS; with ``traced``, tracemalloc's traced size, started after the warm-up).
3. Cold samples (untraced child only), one at a time on an otherwise idle loop: activation alone
   (``host.actor(id)`` of a never-run session: ``load_session`` + ``list_runs(limit=1)``), the
   two store reads alone, first handle + first turn (``rt.session`` then ``handle.run``) with the
   WAL those turns wrote and the server's counters per turn (``_counters``), and, after
   ``passivate_idle(0)``, activation of a session that ran a turn and was passivated, then its
   second turn. A cProfile of 200 activations alone says where the
   time goes in this process (the rest is waiting on the server).
"""

from __future__ import annotations

import asyncio
import cProfile
import gc
import io
import os
import pstats
import random
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from benchmarks.harness.procfs import proc_status
from benchmarks.harness.stats import dist_ms
from benchmarks.million.database import postgres_cpu_seconds, wal_bytes, wal_lsn
from benchmarks.million.report import ActivePart, MemoryStep, TurnPhase
from repertory import Agent
from repertory.core.messages import ModelMessage
from repertory.core.model import ToolSpec
from repertory.runtime.host import LocalHost
from repertory.storage.postgres.connection import normalise_url
from repertory.testing import ScriptedModel
from repertory.tree.runtime import Runtime

__all__ = ["AGENT", "active", "agent"]

AGENT = "assistant"
WARMUP = 20
SEND_BATCH = 100


def _reply(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    # ``usage`` given: the model does not estimate tokens (which keeps a memo in the model object).
    return {"text": "ok", "usage": {"input_tokens": 8, "output_tokens": 1}}


def agent() -> Agent:
    """The one agent every session runs: one short scripted reply per turn, no delay."""
    return Agent(name=AGENT, model=ScriptedModel(_reply), instructions="Answer in one word.")


def _picks(total: int, stripe: int, count: int, seed: int) -> list[int]:
    """``count`` random ords ``o`` with ``o % 4 == stripe`` among ``1..total``."""
    pool = range(stripe if stripe else 4, total + 1, 4)
    return random.Random(seed).sample(pool, min(count, len(pool)))


async def _ids(conn: psycopg.AsyncConnection[Any], ords: list[int]) -> list[str]:
    cur = await conn.execute("SELECT session_id FROM repertory.sessions WHERE ord = ANY(%s)", (ords,))
    return [r[0] for r in await cur.fetchall()]


async def _run_turns(rt: Runtime, ids: list[str]) -> None:
    async def one(session_id: str) -> None:
        handle = await rt.session(session_id)
        turn = await handle.send("hi")
        await turn.wait()

    for first in range(0, len(ids), SEND_BATCH):  # each session its own client, SEND_BATCH at a time
        await asyncio.gather(*(one(sid) for sid in ids[first : first + SEND_BATCH]))


async def _counters(conn: psycopg.AsyncConnection[Any]) -> dict[str, int]:
    """The server's transactions committed and WAL records, full-page images and syncs so far.

    From ``pg_stat_database`` and ``pg_stat_wal``, read after the backends' once-a-second stats
    flush. Every autocommit statement is a transaction, so reads count too; a WAL sync is a flush
    to disk, shared by every transaction that committed behind it.
    """
    await asyncio.sleep(1.2)
    await conn.execute("SELECT pg_stat_clear_snapshot()")
    cur = await conn.execute(
        "SELECT d.xact_commit, w.wal_records, w.wal_fpi, w.wal_sync FROM pg_stat_database AS d, pg_stat_wal AS w "
        "WHERE d.datname = current_database()"
    )
    row = await cur.fetchone()
    assert row is not None
    return dict(zip(("transactions", "wal_records", "wal_fpi", "wal_syncs"), (int(x) for x in row), strict=True))


def _per(after: dict[str, int], before: dict[str, int], turns: int) -> dict[str, float]:
    # The two readings' own statements (two transactions) are taken off.
    return {k: round((after[k] - before[k] - (2 if k == "transactions" else 0)) / max(1, turns), 2) for k in after}


async def _timed(items: list[str], call: Callable[[str], Awaitable[Any]]) -> list[float]:
    out = []
    for item in items:
        t0 = time.perf_counter()
        await call(item)
        out.append(time.perf_counter() - t0)
    return out


def _reading(active: int, host: LocalHost, traced: bool) -> MemoryStep:
    gc.collect()
    return MemoryStep(
        active=active,
        resident=host.resident,
        rss_bytes=proc_status()["VmRSS"],
        traced_bytes=tracemalloc.get_traced_memory()[0] if traced else None,
    )


async def active(spec: dict[str, Any]) -> ActivePart:
    """The child's whole measurement (see the module docstring); ``spec`` comes from ``run``."""
    total, traced, samples = int(spec["sessions"]), bool(spec["traced"]), int(spec["samples"])
    postmaster, seed = int(spec["postmaster"]), int(spec["seed"])
    conninfo, _ = normalise_url(spec["url"], 5.0)
    steps = [int(s) for s in spec["steps"]]
    load_before = list(os.getloadavg())
    async with (
        await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn,
        await Runtime.start(store=spec["url"], agents={AGENT: agent()}, idle_timeout=3600.0) as rt,
    ):
        host = rt.host
        assert isinstance(host, LocalHost)
        stripe = 2 if traced else 0
        active_ids = await _ids(conn, _picks(total, stripe, steps[-1], seed))
        cold = await _ids(conn, _picks(total, 1, 4 * samples + 200, seed + 1))
        await _run_turns(rt, await _ids(conn, _picks(total, 3, WARMUP, seed + 2)))
        if traced:
            tracemalloc.start()
        memory = [_reading(0, host, traced)]
        phases: list[TurnPhase] = []
        done = 0
        for upto in steps:
            batch = active_ids[done:upto]
            counters = await _counters(conn)
            lsn, cpu, pg_cpu, t0 = (
                await wal_lsn(conn),
                time.process_time(),
                postgres_cpu_seconds(postmaster),
                time.perf_counter(),
            )
            await _run_turns(rt, batch)
            seconds = time.perf_counter() - t0
            wal = await wal_bytes(conn, lsn)
            per_turn = _per(await _counters(conn), counters, len(batch))
            phases.append(TurnPhase(
                turns=len(batch), seconds=round(seconds, 3), turns_per_second=round(len(batch) / seconds, 1),
                host_cpu_seconds=round(time.process_time() - cpu, 3),
                postgres_cpu_seconds=round(postgres_cpu_seconds(postmaster) - pg_cpu, 3),
                wal_bytes=wal, wal_bytes_per_turn=round(wal / len(batch), 1), per_turn=per_turn,
            ))  # fmt: skip
            done = upto
            memory.append(_reading(done, host, traced))
        part = ActivePart(traced=traced, sessions_in_database=total, memory=memory, turn_phases=phases)
        if traced:
            tracemalloc.stop()
        else:
            await _cold(rt, host, conn, part, cold, active_ids, samples, seed)
    part.load_average_before_after = [load_before, list(os.getloadavg())]
    return part


async def _cold(
    rt: Runtime,
    host: LocalHost,
    conn: psycopg.AsyncConnection[Any],
    part: ActivePart,
    cold: list[str],
    warm: list[str],
    samples: int,
    seed: int,
) -> None:
    """The cold samples of part 3, one at a time, written into ``part``."""
    alone, reads = cold[:samples], cold[samples : 2 * samples]
    turned, profiled = cold[2 * samples : 3 * samples], cold[3 * samples : 3 * samples + 200]
    part.activation_alone = dist_ms(await _timed(alone, host.actor))
    store = rt.store
    part.activation_store_calls = {
        "load_session": dist_ms(await _timed(reads, store.load_session)),
        "list_runs(limit=1)": dist_ms(await _timed(reads, lambda sid: store.list_runs(sid, limit=1))),
    }
    handle_s: list[float] = []
    total_s: list[float] = []
    lsn, counters = await wal_lsn(conn), await _counters(conn)
    for sid in turned:
        t0 = time.perf_counter()
        handle = await rt.session(sid)
        t1 = time.perf_counter()
        await handle.run("hi")
        total_s.append(time.perf_counter() - t0)
        handle_s.append(t1 - t0)
    part.sequential_wal_bytes_per_turn = round(await wal_bytes(conn, lsn) / max(1, len(turned)), 1)
    part.sequential_per_turn = _per(await _counters(conn), counters, len(turned))
    part.handle_alone = dist_ms(handle_s)
    part.handle_and_first_turn = dist_ms(total_s)
    profile = cProfile.Profile()
    profile.enable()
    for sid in profiled:
        await host.actor(sid)
    profile.disable()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(15)
    part.activation_profile = [line for line in text.getvalue().splitlines() if line.strip()][:30]
    host.passivate_idle(0)
    again = random.Random(seed + 3).sample(warm, min(samples, len(warm)))
    part.activation_with_history = dist_ms(await _timed(again, host.actor))
    second: list[float] = []
    for sid in again:
        handle = await rt.session(sid)
        t0 = time.perf_counter()
        await handle.run("again")
        second.append(time.perf_counter() - t0)
    part.turn_after_activation = dist_ms(second)
