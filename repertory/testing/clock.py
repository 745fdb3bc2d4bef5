"""``ManualClock``: a clock a test moves by hand, so timers and schedules run without waiting.

    clock = ManualClock()
    rt = await Runtime.start(store="memory://", agents=..., clock=clock)
    ...                      # a tool calls sleep(seconds=3600)
    clock.advance(3600)      # the scheduler wakes at once; nothing slept for an hour

Everything waiting in ``sleep_until`` for a moment at or before the new time is released when
the clock moves; moving it is synchronous and must happen on the event loop that waits on it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

__all__ = ["ManualClock"]

DEFAULT_START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: a fixed, round start for readable tests


class ManualClock:
    """Epoch milliseconds that change only when ``advance``/``set`` says so (``repertory.core.clock.Clock``)."""

    def __init__(self, start_ms: int = DEFAULT_START_MS) -> None:
        self._now = int(start_ms)
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def now_ms(self) -> int:
        """The clock's current time."""
        return self._now

    async def sleep_until(self, at_ms: int) -> None:
        """Return once the clock has been moved to ``at_ms`` or later."""
        if self._now >= at_ms:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (at_ms, next(self._order), future))
        await future

    @property
    def waiting(self) -> int:
        """How many sleepers wait on a future moment (cancelled ones may still count until the next move)."""
        return sum(1 for _, _, f in self._waiters if not f.done())

    def set(self, at_ms: int) -> None:
        """Move the clock to ``at_ms`` (never backwards) and release the sleepers that are due."""
        if at_ms < self._now:
            raise ValueError(f"a clock does not go backwards ({at_ms} < {self._now})")
        self._now = int(at_ms)
        while self._waiters and self._waiters[0][0] <= self._now:
            _, _, future = heapq.heappop(self._waiters)
            if not future.done():
                future.set_result(None)

    def advance(self, seconds: float = 0.0, *, ms: int = 0) -> int:
        """Move the clock forward by ``seconds`` and ``ms``; returns the new time."""
        self.set(self._now + round(seconds * 1000) + ms)
        return self._now

    def __repr__(self) -> str:
        return f"ManualClock(now_ms={self._now})"
