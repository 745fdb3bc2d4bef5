"""The cyclic garbage collector's time while a workload runs, measured apart from any profiler."""

from __future__ import annotations

import gc
import time

__all__ = ["GcTimer"]


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
