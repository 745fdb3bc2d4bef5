"""``python -m benchmarks.mcp_overhead --quick`` runs end to end and writes its pyperf suite (no figure is judged)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyperf

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
    suite = pyperf.BenchmarkSuite.load(str(out))
    names = set(suite.get_benchmark_names())
    for transport in ("stdio", "http"):
        for kind in ("direct SDK session call_tool", "MCPTool.invoke", "engine step with the MCP call",
                     "engine step with a local tool"):  # fmt: skip
            bench = suite.get_benchmark(f"mcp_overhead: MCP {transport}: {kind}")
            assert bench.get_nvalue() > 0
    # The difference may come out at or below zero on a quick run: then it is a value of the run's frame.
    added = "MCP stdio call: what repertory adds beyond the engine's step, p50"
    frame = suite.get_benchmark("mcp_overhead: run").get_metadata()
    assert f"mcp_overhead: {added}" in names or f"value {added}" in frame
