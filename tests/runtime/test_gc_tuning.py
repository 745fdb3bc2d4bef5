"""``tune_gc`` raises the thresholds for processes holding many sessions; ``freeze_startup`` freezes start-up."""

from __future__ import annotations

import gc
import subprocess
import sys

from repertory.runtime.gc_tuning import GC_THRESHOLDS, tune_gc


def test_tune_gc_sets_the_thresholds_and_returns_the_old_ones() -> None:
    original = gc.get_threshold()
    try:
        assert tune_gc() == original
        assert gc.get_threshold() == GC_THRESHOLDS
        assert gc.isenabled()  # rarer passes, never none: cycles are still collected
    finally:
        gc.set_threshold(*original)


def test_freeze_startup_keeps_what_start_up_made_out_of_later_passes_and_still_collects_new_cycles() -> None:
    # In a process of its own: freezing is for the whole process, and this one is pytest's.
    code = """
import gc, weakref
import repertory
from repertory.runtime.gc_tuning import freeze_startup
frozen = freeze_startup()
assert frozen == gc.get_freeze_count() > 1_000, frozen
class Cycle: pass
made = Cycle(); made.self = made; alive = weakref.ref(made); del made
gc.collect()
assert alive() is None  # a cycle made after start-up is collected as ever
print(frozen)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) > 1_000
