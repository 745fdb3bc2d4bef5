"""``TimeKeeper``: one host's scheduler task, which wakes due timers and fires due schedules.

Armed timers and schedules are rows with a due-time index (``repertory.core.timing``), not tasks:
the keeper asks the store for what is due now (a bounded index walk), sleeps on its clock until the
earliest due time or ``poll_interval`` (so rows armed by other processes are seen too), and wakes
early when this host arms something sooner (``nudge``). A hundred thousand armed timers cost their
rows and this one task.

Exactly once, with any number of hosts on one store:

- A timer is taken with a compare-and-set on its ``due_at`` (a lease of ``lease`` seconds), then
  woken by redeeming the run's single-use resume token, the same path a human ``resume`` takes, so
  only one wake can ever commit. Afterwards the row is dropped once its token is no longer live;
  if the wake failed before redeeming, the row stays and comes due again when the lease ends.
- A schedule's firing is a turn whose submission id is derived from (schedule id, fire time)
  (``firing_submission_id``): queued idempotently first, then ``next_at`` is advanced with a
  compare-and-set. A crash between the two queues the same submission id again, which is a no-op.
  Firings missed while nothing ran are caught up once: the earliest missed fire time fires, and
  ``next_at`` jumps to the first fire time after now.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from repertory.core.clock import Clock
from repertory.core.timing import ScheduleRecord, TimedStore, TimerRecord
from repertory.runtime.cron import next_fire

__all__ = ["TimeKeeper", "TimerArm", "following_fire"]

log = logging.getLogger("repertory.time")


class TimerArm(Protocol):
    """What a drive calls when a run suspends on a timer: make the timer durable (before the commit)."""

    async def arm(self, run_id: str, session_id: str, token: str, wake_at: int) -> None:
        """Write the run's timer row and tell the scheduler about it."""
        ...


def following_fire(schedule: ScheduleRecord, now: int) -> int | None:
    """The schedule's next fire time after ``now``, or ``None`` once it passes ``end_at``."""
    at = next_fire(schedule.cron, schedule.tz, now)
    return None if schedule.end_at is not None and at > schedule.end_at else at


WakeTimer = Callable[[TimerRecord, int], Awaitable[None]]
"""``(timer, now)``: redeem the timer's token (the host's mailbox path). Raising is fine: the row decides."""
FireSchedule = Callable[[ScheduleRecord, int], Awaitable[None]]
"""``(schedule, fire_at)``: queue the firing's turn durably and idempotently."""


class TimeKeeper:
    """The scheduler of one host: wakes due timers and fires due schedules of the sessions it owns."""

    def __init__(
        self,
        store: TimedStore,
        clock: Clock,
        *,
        wake: WakeTimer,
        fire: FireSchedule,
        poll_interval: float = 5.0,
        lease: float = 60.0,
        batch: int = 256,
        concurrency: int = 256,
    ) -> None:
        if poll_interval <= 0 or lease <= 0:
            raise ValueError("poll_interval and lease must be > 0 seconds")
        self.store = store
        self.clock = clock
        self._wake = wake
        self._fire = fire
        self.poll_ms = max(1, int(poll_interval * 1000))
        self.lease_ms = max(1, int(lease * 1000))
        self.batch = batch
        self._slots = asyncio.Semaphore(concurrency)
        self._owns: Callable[[str], bool] | None = None
        self._task: asyncio.Task[None] | None = None
        self._kick = asyncio.Event()
        self._deadline: int | None = None
        self._held: dict[str, int] = {}  # schedule id -> until when a failed firing is not retried
        self._inflight: set[asyncio.Task[None]] = set()
        self._closing = False
        self.woken = 0  # timers taken and tried by this keeper
        self.fired = 0  # schedule firings queued by this keeper
        self.passes = 0  # finished passes over the due rows (tests wait for one after moving a clock)

    # -- lifecycle ----------------------------------------------------------------------------------

    def start(self, owns: Callable[[str], bool] | None = None) -> None:
        """Start the one scheduler task; the first pass fires whatever is overdue."""
        self._owns = owns
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="repertory-timekeeper")

    async def close(self) -> None:
        """Stop the task and the wakes in flight; nothing durable changes (leases simply run out)."""
        self._closing = True
        tasks = [t for t in (self._task, *self._inflight) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None

    def nudge(self, at: int | None = None) -> None:
        """Look again now: something was armed or scheduled (at ``at``, if known) on this host."""
        if at is None or self._deadline is None or at < self._deadline:
            self._kick.set()

    @property
    def idle(self) -> bool:
        """No wake is in flight (tests and benchmarks wait for this)."""
        return not self._inflight

    # -- the loop -----------------------------------------------------------------------------------

    def _mine(self, key: str) -> bool:
        return self._owns is None or self._owns(key)

    def _stopping(self) -> bool:
        # A driver may turn a cancelled query into its own error (psycopg: "query canceled"), which
        # the handlers below would take for a store hiccup: closing wins over keeping time.
        task = asyncio.current_task()
        return self._closing or (task is not None and task.cancelling() > 0)

    async def _run(self) -> None:
        while not self._closing:
            self._kick.clear()
            try:
                more = await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:  # a store hiccup: try again at the next poll, never stop keeping time
                if self._stopping():
                    raise asyncio.CancelledError from None
                log.exception("the scheduler's pass failed; retrying at the next poll")
                more = False
            self.passes += 1
            if more:
                await asyncio.sleep(0)
                continue
            now = self.clock.now_ms()
            deadline = now + self.poll_ms
            for due in (await self._next_due(), min(self._held.values(), default=None)):
                if due is not None and now < due < deadline:
                    deadline = due
            self._deadline = deadline
            sleeper = asyncio.ensure_future(self.clock.sleep_until(deadline))
            kicked = asyncio.ensure_future(self._kick.wait())
            try:
                await asyncio.wait({sleeper, kicked}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                kicked.cancel()
                self._deadline = None

    async def _next_due(self) -> int | None:
        try:
            times = [await self.store.next_timer_due(), await self.store.next_schedule_due()]
        except Exception:
            if self._stopping():
                raise asyncio.CancelledError from None
            log.exception("reading the next due time failed")
            return None
        return min((t for t in times if t is not None), default=None)

    async def tick(self) -> bool:
        """One pass: take every due timer and schedule of this host; True if a batch was full (more wait)."""
        now = self.clock.now_ms()
        timers = await self.store.due_timers(now, self.batch)
        for timer in timers:
            if not self._mine(timer.session_id):
                continue
            await self._slots.acquire()
            try:
                taken = await self.store.claim_timer(timer.run_id, timer.token, timer.due_at, now + self.lease_ms)
            except BaseException:
                self._slots.release()
                raise
            if not taken:
                self._slots.release()
                continue  # another host took it
            task = asyncio.get_running_loop().create_task(self._wake_one(timer, now))
            self._inflight.add(task)
            task.add_done_callback(self._inflight.discard)
        schedules = await self.store.due_schedules(now, self.batch)
        for schedule in schedules:
            held = self._held.get(schedule.schedule_id)
            if held is not None and held > now:
                continue
            self._held.pop(schedule.schedule_id, None)
            if self._mine(schedule.session_id or schedule.schedule_id):
                await self._fire_one(schedule, now)
        return len(timers) >= self.batch or len(schedules) >= self.batch

    async def _wake_one(self, timer: TimerRecord, now: int) -> None:
        try:
            try:
                await self._wake(timer, now)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self._stopping():
                    raise asyncio.CancelledError from None
                # Most often the token was already used (a human resumed early, the run was
                # cancelled or superseded, another host won): the row tells which below.
                log.debug("waking run %s: %s", timer.run_id, exc)
            self.woken += 1
            run = await self.store.load_run(timer.run_id)
            on = None if run is None else run.suspended_on
            if run is None or run.status != "suspended" or on is None or on.token != timer.token:
                await self.store.delete_timer(timer.run_id, timer.token)
            # Else the wake did not happen (say, a store error before the redemption): the row
            # stays claimed until the lease ends, and then it is tried again.
        finally:
            self._slots.release()

    async def _fire_one(self, schedule: ScheduleRecord, now: int) -> None:
        fire_at = schedule.next_at
        assert fire_at is not None
        try:
            following = following_fire(schedule, now)
        except ValueError:
            log.exception("schedule %s has an expression that no longer parses; it stops", schedule.schedule_id)
            following = None
        else:
            try:
                await self._fire(schedule, fire_at)
            except asyncio.CancelledError:
                raise
            except Exception:
                if self._stopping():
                    raise asyncio.CancelledError from None
                log.exception("firing schedule %s failed; retrying at the next poll", schedule.schedule_id)
                self._held[schedule.schedule_id] = now + self.poll_ms
                return
            self.fired += 1
        try:
            await self.store.advance_schedule(schedule.schedule_id, fire_at, following, now)
        except Exception:
            if self._stopping():
                raise asyncio.CancelledError from None
            # Left due: the next pass queues the same submission id again (a no-op) and retries this.
            log.exception("advancing schedule %s failed", schedule.schedule_id)
