"""Timing: a timed phase, microseconds per call, the garbage collector's time, a progress bar."""

from __future__ import annotations

import gc
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

__all__ = ["GcTimer", "async_per_call_us", "per_call_us", "progress", "timed"]


async def timed(work: Callable[[], Awaitable[object]]) -> float:
    """Seconds ``work`` takes, after a collection so an earlier phase's garbage is not billed to it."""
    gc.collect()
    start = time.perf_counter()
    await work()
    return time.perf_counter() - start


def per_call_us(fn: Callable[[], object], calls: int, *, rounds: int = 1, warm: bool = False) -> float:
    """Microseconds per call of ``fn``: the best of ``rounds`` loops of ``calls`` (after one call if ``warm``).

    The best round is the least disturbed one on a shared machine.
    """
    if warm:
        fn()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


async def async_per_call_us(fn: Callable[[], Awaitable[Any]], calls: int, *, rounds: int = 3) -> float:
    """``per_call_us`` for a coroutine function, after one warm-up call."""
    await fn()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            await fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


class GcTimer:
    """Seconds the cyclic garbage collector ran while installed (a ``gc.callbacks`` entry), by generation.

    cProfile bills a collection to whichever function allocated last, so its time is measured apart.
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self.by_generation = [0, 0, 0]
        self.seconds_by_generation = [0.0, 0.0, 0.0]
        self.began = 0.0

    @property
    def collections(self) -> int:
        """Collections of every generation."""
        return sum(self.by_generation)

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.began = time.perf_counter()
        else:
            took = time.perf_counter() - self.began
            self.seconds += took
            self.by_generation[info["generation"]] += 1
            self.seconds_by_generation[info["generation"]] += took

    def __enter__(self) -> GcTimer:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


@contextmanager
def progress(description: str, total: int) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr for a long loop; yields ``advance(n)``.

    On a terminal it redraws in place; captured (a test, a log file) it prints its final state once.
    """
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
    )
    with bar:
        task = bar.add_task(description, total=total)

        def advance(n: int = 1) -> None:
            bar.advance(task, n)

        yield advance
