"""Timers benchmark: 100,000 armed timers, what they cost in memory, and how late their runs wake.

Run ``python -m benchmarks.timers [--quick] [--out PATH]``; it prints a table and writes
``benchmarks/results/timers.json``. Nothing here asserts a speed.

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
  event its wake committed (the token redeemed, the call answered), for timers all due at once.
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import time
import tracemalloc
from pathlib import Path
from typing import Any

from benchmarks.harness.cli import in_temp_folder, main_of, suite_entry
from benchmarks.harness.report import RESULTS_DIR, Clock, Report, Row, finish, mode_of, row
from repertory import Agent, ModelMessage, Runtime, sleep, tool
from repertory.core.ids import new_id, new_token, now_ms
from repertory.core.timing import TimedStore, TimerRecord, WebhookRecord
from repertory.testing import ScriptedModel

__all__ = ["NAME", "PLOTS", "REPORT", "TimersReport", "main", "measure", "run_suite"]

NAME = "timers"
PLOTS: list[Any] = []
TARGET_TOTAL = 100_000


class TimersReport(Report):
    """``benchmarks/results/timers.json``."""

    store: str
    timers_armed: int
    real_sessions: int
    bulk_arm_seconds: float
    real_arm_seconds: float
    rss_before_mb: float
    rss_armed_mb: float
    traced_before_mb: float
    traced_armed_mb: float
    tasks_armed: int
    db_mb: float
    due_query_ms: float
    next_due_query_ms: float
    wake_p50_ms: float
    wake_p99_ms: float
    wake_max_ms: float
    wake_all_seconds: float
    pending_webhooks: int = 0
    webhook_look_all_ms: float | None = None
    webhook_look_firings_ms: float | None = None

    def summarise(self) -> list[Row]:
        """Memory per armed timer, the scheduler's queries, and how late the real sessions woke."""
        per_timer = (self.rss_armed_mb - self.rss_before_mb) * 1e6 / self.timers_armed
        traced = (self.traced_armed_mb - self.traced_before_mb) * 1e6 / self.timers_armed
        rows = [
            row(f"RSS growth per armed timer ({self.timers_armed:,} armed)", round(per_timer, 1), "B",
                note=f"RSS {self.rss_before_mb:.0f} -> {self.rss_armed_mb:.0f} MB; Python heap +{traced:.1f} B "
                     f"per timer; {self.tasks_armed} asyncio tasks; file {self.db_mb:.0f} MB"),
            row("due_timers (batch of 256) on the full index", round(self.due_query_ms, 3), "ms",
                note=f"next_timer_due {self.next_due_query_ms:.3f} ms"),
            row(f"wake latency p50, {self.real_sessions:,} timers due at once", round(self.wake_p50_ms, 1), "ms",
                note=f"p99 {self.wake_p99_ms:.0f} ms, max {self.wake_max_ms:.0f} ms; all woken in "
                     f"{self.wake_all_seconds:.2f} s (wake_at to the committed tool result)"),
        ]  # fmt: skip
        if self.webhook_look_firings_ms is not None and self.webhook_look_all_ms is not None:
            rows.append(row(
                f"the HTTP server's look for firings' webhooks, {self.pending_webhooks:,} run deliveries pending",
                self.webhook_look_firings_ms, "ms",
                note=f"{self.webhook_look_all_ms:.1f} ms listing every pending delivery (list_webhooks(firings=True) "
                     "against status='pending' alone)"))  # fmt: skip
        return rows

    def render(self) -> str:
        """The summary as text."""
        return "\n".join(f"  {r.figure}: {r.value} {r.unit}  {r.note}" for r in self.rows())


REPORT = TimersReport


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


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


async def _arm_bulk(store: TimedStore, count: int, wake_at: int) -> None:
    async def one(i: int) -> None:
        await store.arm_timer(TimerRecord(run_id=new_id(), session_id=f"bulk-{i}", token=new_token(),
                                          wake_at=wake_at + i, due_at=wake_at + i))  # fmt: skip

    for start in range(0, count, 500):  # concurrent writes, so group commit batches them
        await asyncio.gather(*(one(i) for i in range(start, min(start + 500, count))))


async def _webhook_looks(store: TimedStore, count: int) -> tuple[float, float]:
    """With ``count`` run deliveries pending, the HTTP server's look for firings' ones, ms: every row, firings only.

    The server looks every ``WebhookSettings.poll`` for deliveries another process wrote (a cron
    firing's, ``repertory.http.webhooks``); runs' stay pending until their run ends.
    """

    async def one(i: int) -> None:
        await store.add_webhook(WebhookRecord(delivery_id=new_id(), session_id=f"hook-{i}", submission_id=new_id(),
                                              run_id=new_id(), url="http://127.0.0.1:9/hook"))  # fmt: skip

    for start in range(0, count, 500):
        await asyncio.gather(*(one(i) for i in range(start, min(start + 500, count))))
    every, firings = [], []
    for _ in range(10):
        t0 = time.perf_counter()
        await store.list_webhooks(status="pending")
        every.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        await store.list_webhooks(status="pending", firings=True)
        firings.append(time.perf_counter() - t0)
    return _timed_ms(every), _timed_ms(firings)


def _timed_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def measure_async(quick: bool, folder: Path) -> TimersReport:
    """Arm, measure, wake."""
    clock = Clock.start(NAME, mode_of(quick))
    total = 5_000 if quick else TARGET_TOTAL
    real = 100 if quick else 1_000
    db = folder / "timers.db"
    gc.collect()
    tracemalloc.start()
    rss_before, traced_before = _rss_mb(), tracemalloc.get_traced_memory()[0] / 1e6
    async with await Runtime.start(f"sqlite:///{db}", agents={"napper": _agent()}, idle_timeout=3600) as rt:
        store = rt.store
        assert isinstance(store, TimedStore)
        started = time.perf_counter()
        await _arm_bulk(store, total - real, now_ms() + 86_400_000)
        bulk_seconds = time.perf_counter() - started
        handles = await rt.create_sessions("napper", real)
        started = time.perf_counter()
        # Due once every real session has gone to sleep: a generous guess, then checked.
        due = now_ms() + 3_000 + real * 10
        turns = await rt.send_many([(h, str(due)) for h in handles])
        await asyncio.gather(*(t.wait() for t in turns))
        real_seconds = time.perf_counter() - started
        if now_ms() >= due:
            raise RuntimeError("the sessions took longer to fall asleep than the timers' lead; raise the lead")
        rt.host.passivate_idle(0)
        gc.collect()
        rss_armed, traced_armed = _rss_mb(), tracemalloc.get_traced_memory()[0] / 1e6
        tasks = len(asyncio.all_tasks())
        armed = len(await store.list_timers())
        due_samples, next_samples = [], []
        for _ in range(20):
            t0 = time.perf_counter()
            await store.due_timers(now_ms() + 86_400_000 * 2, 256)
            due_samples.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await store.next_timer_due()
            next_samples.append(time.perf_counter() - t0)
        seqs = {h.id: await rt.store.last_event_seq(h.id) for h in handles}

        async def woken(handle: Any) -> int:
            """When the wake's tool result was committed; returns once the run's turn completed."""
            at: int | None = None
            async for event in handle.events(seqs[handle.id]):
                if event.type == "tool.result" and event.seq is not None:
                    at = event.at
                if event.type == "turn.completed":
                    assert at is not None and event.data["status"] == "done", event
                    return at
            raise RuntimeError("the event stream ended")

        stamps = await asyncio.wait_for(asyncio.gather(*(woken(h) for h in handles)), 300)
        all_woken = (max(stamps) - due) / 1000
        lateness = sorted(s - due for s in stamps)
        hooks = 1_000 if quick else 10_000
        look_all, look_firings = await _webhook_looks(store, hooks)
    tracemalloc.stop()
    report = TimersReport(
        **clock.frame(),
        store="sqlite (WAL, durability normal)",
        timers_armed=armed,
        real_sessions=real,
        bulk_arm_seconds=round(bulk_seconds, 2),
        real_arm_seconds=round(real_seconds, 2),
        rss_before_mb=round(rss_before, 1),
        rss_armed_mb=round(rss_armed, 1),
        traced_before_mb=round(traced_before, 2),
        traced_armed_mb=round(traced_armed, 2),
        tasks_armed=tasks,
        db_mb=round(os.path.getsize(db) / 1e6 + _wal_mb(db), 1),
        due_query_ms=round(_timed_ms(due_samples), 3),
        next_due_query_ms=round(_timed_ms(next_samples), 3),
        wake_p50_ms=float(statistics.median(lateness)),
        wake_p99_ms=float(lateness[min(len(lateness) - 1, int(len(lateness) * 0.99))]),
        wake_max_ms=float(lateness[-1]),
        wake_all_seconds=round(all_woken, 2),
        pending_webhooks=hooks,
        webhook_look_all_ms=round(look_all, 3),
        webhook_look_firings_ms=round(look_firings, 3),
    )
    return finish(report, clock)


def _wal_mb(db: Path) -> float:
    wal = Path(str(db) + "-wal")
    return wal.stat().st_size / 1e6 if wal.exists() else 0.0


def measure(quick: bool) -> TimersReport:
    """The whole measurement in a fresh temporary folder."""
    return in_temp_folder(NAME, measure_async, quick)


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> TimersReport:
    """The suite's entry: measure, print, write ``out_dir/timers.json``."""
    return suite_entry(NAME, measure, quick, out_dir)


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.timers [--quick] [--out PATH]``."""
    main_of(NAME, __doc__, "5,000 timers, 100 real sessions (seconds)", measure, argv)


if __name__ == "__main__":
    main()
