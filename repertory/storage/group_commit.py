"""Group commit: concurrent writes coalesced into shared transactions by the store's writer.

Why: most of a short write's cost is paid per transaction, not per row: SQLite's ``COMMIT`` writes
every dirty page to the WAL (and syncs it with ``durability="full"``), PostgreSQL pays a round trip
and a commit record. With a thousand sessions stepping at once, one transaction per step makes that
fixed cost the ceiling on aggregate throughput; one transaction per batch of steps shares it.

How: while writes come one at a time, ``submit`` runs each straight through, in the caller's own
task, as a batch of one: no queue, no hop through the event loop, so a lone session pays nothing
(a hop costs ~20 us, a quarter of a SQLite commit). A second task writing in the same turn of the
event loop, or a write arriving while the writer is busy, switches to batching: the write is queued
with a future and a worker task, started on the loop's next turn, takes what is queued then (at most
``max_batch``), hands the batch to the store's ``flush`` and resolves each member's future with that
member's own outcome. There is no timer: a batch is exactly the writes that became ready while the
worker waited its turn. Once a batch holds a single write the burst is over and writes go straight
through again. ``flush`` runs one transaction in which a member whose guard fails (or whose
statement fails) is rolled back alone (SQLite reruns such a batch with a savepoint per member;
PostgreSQL gives every member an exception block) and reports its own error while the others
commit; every outcome is delivered only after the batch's ``COMMIT`` returned, so a write is
acknowledged exactly when it is durable, as without group commit.

A caller cancelled while its write is still queued is dropped from the queue (nothing written).
Once its batch is running the write's outcome no longer depends on the caller, exactly as with a
database call interrupted mid-flight.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar, cast
from urllib.parse import parse_qsl, urlencode

from repertory.errors import StoreError

__all__ = ["DEFAULT_MAX_BATCH", "Failed", "GroupCommit", "parse_switch", "take_switch"]

DEFAULT_MAX_BATCH = 256
"""Members per transaction: big enough to share the commit widely, small enough that one batch
holds the write lock (and the event loop, for SQLite) for a few milliseconds at most."""

W = TypeVar("W")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Failed:
    """A member's outcome when it failed: its own error, raised to its own caller."""

    error: BaseException


@dataclass(slots=True)
class _Pending(Generic[W]):
    work: W
    future: asyncio.Future[object]


class GroupCommit(Generic[W, R]):
    """Runs writes through ``flush``, batched when they come together, at most ``max_inflight`` transactions at once.

    ``flush`` receives the members' work in submission order and returns one outcome per member:
    the member's result (``R``), or ``Failed`` with the error that member's caller gets. If ``flush``
    raises, every member of the batch fails with that exception. A store whose writes never suspend
    (SQLite) may ask ``alone_now()`` first and run a lone write itself, at once: the straight-through
    path then costs no coroutine, no queue entry and no list.
    """

    def __init__(
        self,
        flush: Callable[[Sequence[W]], Awaitable[Sequence[R | Failed]]],
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        max_inflight: int = 1,
    ) -> None:
        if max_batch < 1 or max_inflight < 1:
            raise ValueError("max_batch and max_inflight must be at least 1")
        self._flush = flush
        self.max_batch = max_batch
        self.max_inflight = max_inflight
        self._queue: collections.deque[_Pending[W]] = collections.deque()
        self._workers: set[asyncio.Task[None]] = set()
        self._solo = True  # no concurrency seen lately: a write on an idle writer goes straight through
        self._tick_task: asyncio.Task[object] | None = None  # the task that wrote first in this loop turn
        self._inline = 0  # writes going straight through right now
        self._inline_over: asyncio.Event | None = None  # made by drain() while one is in flight
        self.batches = 0
        """Transactions run so far, lone writes included (members / batches is the mean batch)."""
        self.members = 0
        """Writes run so far."""

    async def submit(self, work: W) -> R:
        """Write ``work``; returns its result once its transaction committed, or raises its own error.

        A write goes straight through, in the caller's task and with no hop through the event loop,
        while writes come one at a time: the writer is idle and no other task wrote since the loop's
        last turn. Otherwise it is queued for a worker, and the writer stays in batching mode until
        a batch turns out to hold one write again.
        """
        if self._may_go_alone():
            return await self._straight_through(work)
        self._solo = False
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._queue.append(_Pending(work, future))
        self._start_worker_if_room()
        try:
            return cast(R, await future)
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                future.exception()  # resolved just before the cancel landed: mark the outcome as seen
            raise

    def alone_now(self) -> bool:
        """True when a write may go straight through now; the caller must then run it synchronously.

        Only for a store whose writes never suspend: between this call and the end of the write
        nothing else may run on the event loop. Counted as a batch of one.
        """
        if self._may_go_alone():
            self.batches += 1
            self.members += 1
            return True
        return False

    def _may_go_alone(self) -> bool:
        """No burst lately, nothing queued or running, and no other task wrote in this turn of the loop."""
        return self._solo and not self._queue and not self._workers and not self._inline and self._first_this_turn()

    def _first_this_turn(self) -> bool:
        """Whether no other task has written since the event loop's last turn (one task may write twice)."""
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        # A mark from another loop is left over from one that closed before it turned again.
        if self._tick_task is None or self._tick_task.get_loop() is not loop:
            self._tick_task = task
            loop.call_soon(self._next_turn)
            return True
        return self._tick_task is task

    def _next_turn(self) -> None:
        self._tick_task = None

    async def _straight_through(self, work: W) -> R:
        self._inline += 1
        self.batches += 1
        self.members += 1
        try:
            outcome = (await self._flush([work]))[0]
        finally:
            self._inline -= 1
            if not self._inline and self._inline_over is not None:
                self._inline_over.set()
            self._start_worker_if_room()  # writes queued behind this one
        if isinstance(outcome, Failed):
            raise outcome.error
        return outcome

    async def drain(self) -> None:
        """Wait until every write submitted so far has been committed or failed (used by ``close``)."""
        while self._workers or self._inline:
            if self._workers:
                await asyncio.gather(*self._workers, return_exceptions=True)
            else:
                self._inline_over = asyncio.Event()
                await self._inline_over.wait()
                self._inline_over = None

    def _start_worker_if_room(self) -> None:
        """Start a worker for queued writes unless ``max_inflight`` transactions are running already."""
        queue = self._queue
        while queue and queue[0].future.done():  # callers cancelled while queued: nothing to write
            queue.popleft()
        if queue and len(self._workers) + self._inline < self.max_inflight:
            task = asyncio.get_running_loop().create_task(self._work())
            self._workers.add(task)
            task.add_done_callback(self._worker_done)

    def _worker_done(self, task: asyncio.Task[None]) -> None:
        # A worker cancelled before it ran (its loop shutting down) never reached its ``finally``.
        self._workers.discard(task)
        if not task.get_loop().is_closed():
            self._start_worker_if_room()  # a worker that stopped early leaves writes behind

    def _take(self) -> list[_Pending[W]]:
        batch: list[_Pending[W]] = []
        queue = self._queue
        while queue and len(batch) < self.max_batch:
            pending = queue.popleft()
            if not pending.future.done():  # a cancelled caller's write is never written
                batch.append(pending)
        return batch

    async def _work(self) -> None:
        try:
            while self._queue:
                await self._run_batch()
        finally:
            # Here rather than in a done callback, so a write arriving on the next turn finds the
            # writer idle and may go straight through.
            task = asyncio.current_task()
            if task is not None:
                self._workers.discard(task)

    async def _run_batch(self) -> None:
        batch = self._take()
        if not batch:
            return
        self.batches += 1
        self.members += len(batch)
        if len(batch) == 1 and not self._queue:
            self._solo = True  # the burst is over: back to writing straight through
        try:
            outcomes = await self._flush([p.work for p in batch])
        except asyncio.CancelledError:
            for pending in batch:  # the loop is going away: so are the callers
                pending.future.cancel()
            raise
        except BaseException as exc:
            for pending in batch:
                if not pending.future.done():
                    pending.future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        if len(outcomes) != len(batch):
            error = RuntimeError(f"group commit: {len(outcomes)} outcomes for {len(batch)} writes")
            outcomes = [Failed(error)] * len(batch)
        for pending, outcome in zip(batch, outcomes, strict=True):
            if pending.future.done():
                continue
            if isinstance(outcome, Failed):
                pending.future.set_exception(outcome.error)
            else:
                pending.future.set_result(outcome)


_ON = {"on", "true", "yes", "1"}
_OFF = {"off", "false", "no", "0"}


def parse_switch(value: str, option: str) -> bool:
    """Read an on/off store option (``on``/``off``, ``true``/``false``, ``yes``/``no``, ``1``/``0``)."""
    lowered = value.strip().lower()
    if lowered in _ON:
        return True
    if lowered in _OFF:
        return False
    raise StoreError(f"{option} must be 'on' or 'off' in a store URL, not {value!r}")


def take_switch(url: str, option: str) -> tuple[str, bool | None]:
    """Remove ``option=on|off`` from a URL's query; returns the URL without it and its value, if given.

    The PostgreSQL URL goes on to libpq, which refuses parameters it does not know.
    """
    base, sep, query = url.partition("?")
    if not sep:
        return url, None
    pairs = parse_qsl(query, keep_blank_values=True)
    values = [v for k, v in pairs if k == option]
    if not values:
        return url, None
    rest = urlencode([(k, v) for k, v in pairs if k != option])
    return (f"{base}?{rest}" if rest else base), parse_switch(values[-1], option)
