"""Timers: 100,000 armed timers, what they cost in memory, and how late their runs wake.

A timer (a tool's ``repertory.sleep``) is a row in the store's ``timers`` table with an index on
its due time, and each host runs one scheduler task (``repertory.runtime.timekeeper``) that asks
the store for what is due: armed timers should cost rows, not memory or tasks. On the local
backend and one SQLite file (WAL, durability normal), on the wall clock:

- ``real`` sessions (1,000; ``--quick`` 100) each run a turn whose tool sleeps until one moment a
  few seconds ahead: the engine's whole path (the timer row armed before the suspension commits);
- the rest of the 100,000 (``--quick`` 5,000) are armed straight through ``arm_timer``, what a
  suspension writes, due a day later (set-up far faster than 99,000 engine turns);
- memory: the process's RSS and Python's traced allocations before arming and with everything
  armed (sessions passivated, as idle ones are), the asyncio task count, the file's size;
- the scheduler's queries on the full index: ``due_timers`` (a batch of 256) and ``next_timer_due``;
- wake latency: for every real session, the time from its ``wake_at`` to the stored ``tool.result``
  event its wake committed (the token redeemed, the call answered), for timers all due at once;
- the HTTP server's look for firings' webhooks among many pending run deliveries.

``python -m benchmarks.timers [--quick]``.
"""

from __future__ import annotations

import asyncio
import gc
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]  # no stubs in the dev install

from benchmarks.harness.command import Options, main
from benchmarks.harness.figures import Figures
from benchmarks.harness.sqlite_files import file_size
from repertory import Agent, ModelMessage, Runtime, SessionHandle, sleep, tool
from repertory.core.ids import new_id, new_token, now_ms
from repertory.core.timing import TimedStore, TimerRecord, WebhookRecord
from repertory.testing import ScriptedModel

SIZES = {"full": (100_000, 1_000, 10_000), "quick": (5_000, 100, 1_000)}
"""Timers armed in all, real sessions among them, pending webhook deliveries."""
DAY_MS = 86_400_000


def _agent() -> Agent:
    @tool
    def nap(at_ms: int) -> str:
        """Sleep until ``at_ms``."""
        sleep(until_ms=at_ms)

    def step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        last = messages[-1]
        if last.role == "user":
            return {"tool": "nap", "args": {"at_ms": int(last.text)}}
        return {"text": "awake"}

    return Agent(name="napper", model=ScriptedModel(step), tools=[nap])


async def _in_batches(count: int, one: Callable[[int], Awaitable[None]]) -> None:
    for start in range(0, count, 500):  # concurrent writes, so group commit batches them
        await asyncio.gather(*(one(i) for i in range(start, min(start + 500, count))))


async def _samples(n: int, call: Callable[[], Awaitable[object]]) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await call()
        out.append(time.perf_counter() - t0)
    return out


async def _woken(handle: SessionHandle, seq: int) -> int:
    """When the wake's tool result was committed; returns once the run's turn completed."""
    at: int | None = None
    async for event in handle.events(seq):
        if event.type == "tool.result" and event.seq is not None:
            at = event.at
        if event.type == "turn.completed":
            if at is None or event.data["status"] != "done":
                raise RuntimeError(f"a woken turn ended {event}")
            return at
    raise RuntimeError("the event stream ended")


async def _run(figures: Figures, options: Options, db: Path) -> None:
    total, real, hooks = SIZES[options.mode]
    proc = psutil.Process()
    gc.collect()
    tracemalloc.start()
    rss_before, traced_before = proc.memory_info().rss, tracemalloc.get_traced_memory()[0]
    async with await Runtime.start(f"sqlite:///{db}", agents={"napper": _agent()}, idle_timeout=3600) as rt:
        store = rt.store
        assert isinstance(store, TimedStore)
        later = now_ms() + DAY_MS

        async def arm(i: int) -> None:
            await store.arm_timer(TimerRecord(run_id=new_id(), session_id=f"bulk-{i}", token=new_token(),
                                              wake_at=later + i, due_at=later + i))  # fmt: skip

        started = time.perf_counter()
        await _in_batches(total - real, arm)
        figures.time("arming the bulk timers (arm_timer)", time.perf_counter() - started,
                     note=f"{total - real:,} rows, 500 at once")  # fmt: skip
        handles = await rt.create_sessions("napper", real)
        started = time.perf_counter()
        due = now_ms() + 3_000 + real * 10  # once every real session has gone to sleep: a guess, then checked
        turns = await rt.send_many([(h, str(due)) for h in handles])
        await asyncio.gather(*(t.wait() for t in turns))
        figures.time("arming the real sessions' timers (a turn each)", time.perf_counter() - started,
                     note=f"{real:,} sessions")  # fmt: skip
        if now_ms() >= due:
            raise RuntimeError("the sessions took longer to fall asleep than the timers' lead; raise the lead")
        rt.host.passivate_idle(0)
        gc.collect()
        rss_armed, traced_armed = proc.memory_info().rss, tracemalloc.get_traced_memory()[0]
        armed = len(await store.list_timers())
        figures.count("timers armed", armed)
        figures.fact("real sessions", real)
        figures.size("RSS before arming", rss_before)
        figures.size("RSS with every timer armed", rss_armed, note="sessions passivated")
        figures.size("RSS growth per armed timer", (rss_armed - rss_before) / armed)
        figures.size("Python heap before arming", traced_before, note="tracemalloc")
        figures.size("Python heap with every timer armed", traced_armed)
        figures.size("Python heap growth per armed timer", (traced_armed - traced_before) / armed)
        figures.count("asyncio tasks with every timer armed", len(asyncio.all_tasks()))
        figures.size("database file with every timer armed", file_size(db) + file_size(f"{db}-wal"))
        figures.time("due_timers (batch of 256) on the full index",
                     await _samples(20, lambda: store.due_timers(now_ms() + 2 * DAY_MS, 256)))  # fmt: skip
        figures.time("next_timer_due on the full index", await _samples(20, store.next_timer_due))
        seqs = {h.id: await rt.store.last_event_seq(h.id) for h in handles}
        stamps = await asyncio.wait_for(asyncio.gather(*(_woken(h, seqs[h.id]) for h in handles)), 300)
        lateness = [(s - due) / 1000 for s in stamps]
        figures.time(f"wake latency, {real:,} timers due at once", lateness,
                     note="wake_at to the committed tool result")  # fmt: skip
        figures.time("all woken, from wake_at (the latest wake)", max(lateness))

        async def hook(i: int) -> None:
            await store.add_webhook(WebhookRecord(delivery_id=new_id(), session_id=f"hook-{i}", submission_id=new_id(),
                                                  run_id=new_id(), url="http://127.0.0.1:9/hook"))  # fmt: skip

        await _in_batches(hooks, hook)  # run deliveries stay pending until their run ends
        figures.fact("pending webhook deliveries", hooks)
        figures.time("the server's look for firings' webhooks (list_webhooks(firings=True))",
                     await _samples(10, lambda: store.list_webhooks(status="pending", firings=True)),
                     note=f"{hooks:,} run deliveries pending")  # fmt: skip
        figures.time("listing every pending webhook delivery",
                     await _samples(10, lambda: store.list_webhooks(status="pending")))  # fmt: skip
    tracemalloc.stop()


async def scenario(figures: Figures, options: Options) -> None:
    """Arm, measure, wake, in a temporary folder."""
    figures.fact("store", "sqlite (WAL, durability normal)")
    with tempfile.TemporaryDirectory(prefix="repertory-timers-") as folder:
        await _run(figures, options, Path(folder) / "timers.db")


if __name__ == "__main__":
    main("timers", __doc__, scenario=scenario)
