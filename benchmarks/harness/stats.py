"""Percentiles and latency distributions, the one way every benchmark summarises a series of timings."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from pydantic import model_validator

from benchmarks.harness.model import BenchModel

__all__ = ["NAN", "Dist", "dist_ms", "percentile"]

NAN = float("nan")


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) of ``values`` with linear interpolation; ``values`` need not be sorted."""
    s = sorted(values)
    if not s:
        return NAN
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


class Dist(BenchModel):
    """p50, p90, p99, max, mean and min of a series of durations, in milliseconds, and its length.

    An empty series (nothing was timed) has ``count == 0`` and NaN everywhere else, so a table
    prints ``nan`` for it instead of failing.
    """

    p50_ms: float = NAN
    p90_ms: float = NAN
    p99_ms: float = NAN
    max_ms: float = NAN
    mean_ms: float = NAN
    min_ms: float = NAN
    count: int = 0

    @model_validator(mode="before")
    @classmethod
    def _legacy_count(cls, data: Any) -> Any:
        # Ray's reports named the length ``n``.
        if isinstance(data, dict) and "n" in data and "count" not in data:
            return {k if k != "n" else "count": v for k, v in data.items()}
        return data


def dist_ms(seconds: Sequence[float]) -> Dist:
    """The distribution of durations given in seconds."""
    if not seconds:
        return Dist()
    return Dist(
        p50_ms=percentile(seconds, 0.5) * 1e3,
        p90_ms=percentile(seconds, 0.9) * 1e3,
        p99_ms=percentile(seconds, 0.99) * 1e3,
        max_ms=max(seconds) * 1e3,
        mean_ms=statistics.fmean(seconds) * 1e3,
        min_ms=min(seconds) * 1e3,
        count=len(seconds),
    )
