"""``python -m benchmarks --quick`` runs end to end and writes its reports, table and plots.

A smoke test of the suite, not of speed: nothing here reads a figure (docs/performance/index.md). The
suite runs as a subprocess, as a user runs it, into a temporary folder so the committed results
in ``benchmarks/results/`` are never touched. LangGraph is left out (``--skip-peers``) and quick
mode leaves Ray out, so the test needs neither the ``bench`` extra nor a Ray start.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Every benchmark quick mode runs; group_commit is registered but may not exist yet.
EXPECTED = (
    "store",
    "latency",
    "steps",
    "deltas",
    "fork",
    "concurrency",
    "recovery",
    "sessions",
    "memory",
    "export",
    "turns",
    "limits",
    "sse_readers",
    "mcp_server",
    "a2a_server",
)
PLOTS = ("throughput_vs_concurrency.png", "fork_cost_vs_history_length.png", "bytes_per_step_vs_run_length.png")


@pytest.mark.timeout(170)
def test_quick_suite_writes_reports_table_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--skip-peers", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=160,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]

    status = json.loads((out / "suite.json").read_text())
    by_name = {s["name"]: s for s in status["benchmarks"]}
    assert status["mode"] == "quick"
    for name in EXPECTED:
        assert by_name[name]["status"] == "ran", by_name[name]
        report = json.loads((out / f"{name}.json").read_text())
        assert report["benchmark"] == name
    assert by_name["ray"]["status"] == "skipped"
    assert by_name["group_commit"]["status"] in ("ran", "not present", "skipped")
    assert "skipped" in by_name["steps"]["detail"]  # the peer left out is said, not silently dropped

    table = (out / "RESULTS.md").read_text()
    assert "| benchmark | metric | value | target | met? |" in table
    assert "cores" in table and "git commit" in table
    for name in EXPECTED:
        assert f"| {name} |" in table
    for plot in PLOTS:
        png = out / "plots" / plot
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"plots/{plot}" in table


def test_every_registered_benchmark_loads_and_reads_its_committed_report() -> None:
    # The renderer reads each committed report through its benchmark's typed report: one that no
    # longer validates (a field renamed, a single-file benchmark without REPORT) would drop its rows.
    # The chaos soak's package is tests.soak (suite.HOMES); a row naming its own command (the soak's
    # options) must name a module that is there, not where the soak used to live.
    from benchmarks.harness.report import RESULTS_DIR, Report
    from benchmarks.harness.suite import BENCHMARKS, load

    read = []
    for bench in BENCHMARKS:
        loaded = load(bench.name)
        assert loaded is not None, bench.name
        path = RESULTS_DIR / f"{bench.name}.json"
        if path.exists():
            report = loaded.report.model_validate_json(path.read_text())
            assert isinstance(report, Report) and report.benchmark == bench.name
            assert all(r.figure for r in report.summarise()), bench.name
            for r in report.rows():
                if r.command:
                    python, dash_m, module, *_ = r.command.split()
                    assert (python, dash_m) == ("python", "-m") and importlib.util.find_spec(module), r.command
            read.append(bench.name)
    assert {"compaction", "tracing", "concurrency", "chaos"} <= set(read)
