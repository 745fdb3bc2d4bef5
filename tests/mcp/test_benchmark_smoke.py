"""``python -m benchmarks.mcp_overhead --quick`` runs end to end and writes its report (no figure is judged)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.mcp.helpers import ROOT


def test_the_mcp_overhead_benchmark_runs_quick(tmp_path: Path) -> None:
    out = tmp_path / "mcp_overhead.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.mcp_overhead", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        timeout=110,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    report = json.loads(out.read_text())
    assert [r["transport"] for r in report["results"]] == ["stdio", "http"]
    for r in report["results"]:
        for kind in ("direct_call", "repertory_tool_call", "engine_step_with_mcp_call", "engine_step_with_local_tool"):
            assert r[kind]["count"] > 0
    assert any(row["target"] == 1.0 for row in report["summary"])
