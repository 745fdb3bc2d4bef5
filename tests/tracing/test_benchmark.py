"""``python -m benchmarks.tracing`` runs end to end on a tiny size and writes its report (no figure is read)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_the_tracing_benchmark_runs_every_configuration(tmp_path: Path) -> None:
    out = tmp_path / "tracing.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.tracing", "--steps", "5", "--rounds", "1", "--runs", "1", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(out.read_text())
    assert report["benchmark"] == "tracing" and report["baseline"] == "measured"
    workloads = report.get("workloads", report.get("rows"))  # the typed report names them "workloads"
    assert workloads
    for row in workloads:
        assert set(row["us_per_step_median"]) == {"baseline", "off", "on", "sdk-floor", "on+content"}
        assert row["off_vs_baseline_pct"] is not None and row["on_minus_off_us_per_step"] is not None
    # Every traced run made a chat span per request, a tool span per call and one invoke_agent span.
    assert set(report["spans_per_run"].values()) == {5 + 1 + 5 + 1}
    assert "| workload | baseline | off | on |" in proc.stdout
