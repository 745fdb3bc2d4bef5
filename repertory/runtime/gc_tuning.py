"""Garbage-collector settings for a process that holds many sessions at once.

CPython's cyclic collector runs a young-generation pass every 700 net allocations and a full pass
every 100 of those; with thousands of resident sessions (each some dozens of tracked objects: its
actor, records, cached history) the full passes scan them all again and again. Measured: about half
the CPU of 10,000 concurrent approvals was the collector (24 full passes of ~0.35 s), and 31-36% of
the wall time of 1,000 sessions stepping at once. Raising the first threshold makes passes rarer
without turning the collector off (cycles are still collected): recovery of 10,000 suspended
sessions went from 18.4 s to 11.1 s with it.

The setting is process-wide, so the library never applies it by itself: the processes repertory
owns (Ray session hosts, ``repertory serve``, ``repertory demo``) call ``tune_gc()``, and an
application embedding a ``Runtime`` with many sessions may call it too.
"""

from __future__ import annotations

import gc

__all__ = ["GC_THRESHOLDS", "tune_gc"]

GC_THRESHOLDS = (100_000, 20, 10)


def tune_gc() -> tuple[int, int, int]:
    """Set the collector's thresholds for many resident sessions; returns the previous ones."""
    before = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    return before
