"""Kinds of one call timed side by side in interleaved blocks, so a busy machine slows every kind alike.

Every kind is warmed up first; then each block times ``calls`` calls of every kind in turn, the
order reversed every other block so no kind always follows another (a kind that ran after a
garbage-heavy one would pay for its collections).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping

__all__ = ["Call", "interleaved", "timed_calls"]

Call = Callable[[], Awaitable[None]]
"""One call of a kind: raises when the call did not do what was asked."""


async def timed_calls(n: int, call: Call) -> list[float]:
    """Seconds each of ``n`` calls in a row took."""
    out: list[float] = []
    for _ in range(n):
        started = time.perf_counter()
        await call()
        out.append(time.perf_counter() - started)
    return out


async def interleaved(kinds: Mapping[str, Call], *, blocks: int, calls: int, warmup: int) -> dict[str, list[float]]:
    """Each kind's call seconds: ``warmup`` untimed calls a kind, then ``blocks`` blocks of ``calls`` a kind."""
    for call in kinds.values():
        await timed_calls(warmup, call)
    times: dict[str, list[float]] = {k: [] for k in kinds}
    for block in range(blocks):
        order = list(kinds) if block % 2 == 0 else list(reversed(list(kinds)))
        for k in order:
            times[k] += await timed_calls(calls, kinds[k])
        print(f"  block {block + 1}/{blocks}", flush=True)
    return times
