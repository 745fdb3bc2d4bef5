"""``tune_gc`` raises the collector's thresholds for processes holding many sessions, and says what they were."""

from __future__ import annotations

import gc

from repertory.runtime.gc_tuning import GC_THRESHOLDS, tune_gc


def test_tune_gc_sets_the_thresholds_and_returns_the_old_ones() -> None:
    original = gc.get_threshold()
    try:
        assert tune_gc() == original
        assert gc.get_threshold() == GC_THRESHOLDS
        assert gc.isenabled()  # rarer passes, never none: cycles are still collected
    finally:
        gc.set_threshold(*original)
