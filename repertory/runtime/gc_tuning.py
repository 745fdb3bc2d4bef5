"""Garbage-collector settings for a process that holds many sessions at once.

CPython's cyclic collector runs a young-generation pass every 700 net allocations and a full pass
every 100 of those; with thousands of resident sessions (each some dozens of tracked objects: its
actor, records, cached history) the full passes scan them all again and again. Measured: about half
the CPU of 10,000 concurrent approvals was the collector (24 full passes of ~0.35 s), and 31-36% of
the wall time of 1,000 sessions stepping at once. Raising the first threshold makes passes rarer
without turning the collector off (cycles are still collected): recovery of 10,000 suspended
sessions went from 18.4 s to 11.1 s with it.

The setting is process-wide, so the library never applies it by itself: the processes repertory
owns (Ray session hosts and the supervisor, ``repertory serve``, ``ui``, ``mcp``, ``demo``) call
``tune_gc()``, then ``freeze_startup()`` once they have started, and an application embedding a
``Runtime`` with many sessions may do the same (``benchmarks.gc_settings`` measures both, side by
side with the interpreter's defaults).

``freeze_startup`` moves everything alive after start-up (the modules, the agents, the runtime's
own objects: tens of thousands of objects that live as long as the process) out of the collector's
reach with ``gc.freeze()``, so a full pass no longer scans them each time.
"""

from __future__ import annotations

import gc

__all__ = ["GC_THRESHOLDS", "freeze_startup", "tune_gc"]

GC_THRESHOLDS = (100_000, 20, 10)


def tune_gc() -> tuple[int, int, int]:
    """Set the collector's thresholds for many resident sessions; returns the previous ones."""
    before = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    return before


def freeze_startup() -> int:
    """Collect once, then keep what a started process holds out of every later pass; returns how many objects."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
