"""HTTP benchmark: ``repertory serve`` driven by LangGraph's own client, as agent-chat-ui would.

Run ``python -m benchmarks.http [--quick] [--no-ray] [--out PATH]``. It prints a table and writes
``benchmarks/results/http.json``. Nothing here asserts a speed.

For each backend (local; Ray with one shared host unless ``--no-ray`` or ``--quick``) a real
``repertory serve`` process is started on a fresh SQLite file (WAL, durability normal) and a free
loopback port, serving ``benchmarks.http.server:agents``: a zero-delay scripted model that answers
every prompt with one short reply, so the time is the server's and the runtime's. Through
``langgraph_sdk``:

1. ``threads.create`` then ``runs.wait``, one after another (N rounds after a warm-up): p50/p95;
2. ``threads.create`` then ``runs.stream(stream_mode="values")`` read to its end: p50/p95;
3. C clients at once, each creating a thread and waiting for a run, R times: runs per second.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.harness.cli import deliver
from benchmarks.harness.plots import Plot
from benchmarks.harness.report import RESULTS_DIR
from benchmarks.http.report import HttpReport

__all__ = ["NAME", "PLOTS", "REPORT", "run_suite"]

NAME = "http"
REPORT = HttpReport
PLOTS: list[Plot[HttpReport]] = []


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> HttpReport:
    """The suite's entry: measure through a real server, print, write ``out_dir/http.json``."""
    from benchmarks.http.server import measure

    report = measure(quick)
    deliver(report, out_dir / f"{NAME}.json")
    return report
