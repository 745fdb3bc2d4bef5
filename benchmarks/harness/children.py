"""Parts of a benchmark run in fresh interpreters, so one part's heap and caches do not leak into the next.

The child is ``python -m <module> ... --result PATH``; it writes its figures as JSON to ``PATH``,
which the parent reads back. A child that fails or runs past its time limit raises ``ChildFailed``
with why, so the parent can report the part as not finished rather than stop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchmarks.harness.versions import ROOT

__all__ = ["ChildFailed", "python_m", "run_json"]


class ChildFailed(Exception):
    """A child process exited non-zero, wrote nothing, or did not finish within its limit."""


def python_m(module: str, *args: str) -> list[str]:
    """The command line running ``module`` in this interpreter."""
    return [sys.executable, "-m", module, *args]


def run_json(module: str, args: list[str], timeout: float) -> tuple[Any, float]:
    """Run ``python -m module *args --result PATH``; its JSON result and the seconds it took."""
    with tempfile.TemporaryDirectory(prefix="repertory-bench-child-") as folder:
        out = os.path.join(folder, "result.json")
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                python_m(module, *args, "--result", out), cwd=ROOT, capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            raise ChildFailed(f"did not finish within {timeout:.0f} s") from None
        elapsed = time.perf_counter() - t0
        if proc.returncode != 0 or not os.path.exists(out):
            raise ChildFailed(f"exit {proc.returncode}: {proc.stderr[-2000:]}")
        with open(out) as f:
            return json.load(f), elapsed
