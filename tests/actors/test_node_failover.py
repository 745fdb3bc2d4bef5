"""Node hard failure: a three-node cluster on this machine loses the node its hosts run on.

The scenario lives in ``benchmarks/ray_failover.py`` (which also records the times); it needs a Ray
cluster of its own, so it runs in a child process and leaves the suite's local Ray alone. The test
checks outcomes only (the counts in its pyperf suite's frame), never speed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyperf

ROOT = Path(__file__).resolve().parents[2]


def test_killing_a_node_moves_its_sessions_to_the_surviving_nodes(tmp_path: Path) -> None:
    out = tmp_path / "failover.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.ray_failover", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    frame = pyperf.BenchmarkSuite.load(str(out)).get_benchmark("ray_failover: run").get_metadata()
    counts = {k.removeprefix("value "): v for k, v in frame.items() if k.startswith("value ")}
    assert counts["hosts that started on the killed node"] == 2  # both hosts ran on the node killed
    assert counts["hosts on the killed node after"] == 0  # and now run on the other one
    assert counts["interrupted turns not done"] == 0  # turns running on the dead node were re-driven to the end
    assert counts["charges written"] == 4 and counts["cards charged twice"] == 0  # no tool ran twice
    assert counts["sessions not answering after"] == 0
