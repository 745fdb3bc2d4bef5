"""``Clock``: where the runtime reads the time and waits for a moment, so tests can bring their own.

Timers (``repertory.sleep``), schedules and their catch-up all read "now" from one clock and wait
on it: the engine computes a timer's ``wake_at`` from it, and each host's scheduler sleeps on it
until the next due time. ``SystemClock`` is the wall clock; ``repertory.testing.ManualClock`` is a
clock a test moves by hand, so an hour passes in a microsecond and no test sleeps.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from repertory.core.ids import now_ms

__all__ = ["Clock", "SystemClock", "iso_ms"]


def iso_ms(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 in UTC with milliseconds: ``2026-03-01T10:00:00.000Z``."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@runtime_checkable
class Clock(Protocol):
    """Epoch milliseconds, and a way to wait until one of them."""

    def now_ms(self) -> int:
        """The current time in epoch milliseconds."""
        ...

    async def sleep_until(self, at_ms: int) -> None:
        """Return once ``now_ms() >= at_ms`` (at once if it already is); cancellable."""
        ...


class SystemClock:
    """The wall clock (``time.time_ns``) and ``asyncio.sleep``."""

    def now_ms(self) -> int:
        """Wall-clock time in epoch milliseconds."""
        return now_ms()

    async def sleep_until(self, at_ms: int) -> None:
        """Sleep until the wall clock reaches ``at_ms`` (a caller that must be sure reads ``now_ms()`` again)."""
        delay = at_ms - now_ms()
        if delay > 0:
            await asyncio.sleep(delay / 1000)

    def __repr__(self) -> str:
        return "SystemClock()"
