"""Node hard failure: a three-node cluster on this machine loses the node its hosts run on.

The scenario lives in ``benchmarks/ray_failover.py`` (which also reports the times); it needs a Ray
cluster of its own, so it runs in a child process and leaves the suite's local Ray alone. The test
checks outcomes only, never speed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
    f = json.loads(out.read_text())["figures"]
    assert f["hosts_started_on_killed_node"] and f["hosts_moved"]  # both hosts now run on the other node
    assert f["interrupted_turns_done"]  # turns running on the dead node were re-driven to the end
    assert f["charges_written"] == f["running_turns"] and f["charged_twice"] == []  # no tool ran twice
    assert f["every_session_answers_after"]
