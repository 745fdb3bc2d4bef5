"""``python -m benchmarks.tracing`` runs end to end on a tiny size and writes its pyperf suite (no figure is read)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyperf
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_the_tracing_benchmark_runs_every_configuration(tmp_path: Path) -> None:
    out = tmp_path / "tracing.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.tracing", "--quick", "--steps", "5", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    suite = pyperf.BenchmarkSuite.load(str(out))
    frame = suite.get_benchmark("tracing: run").get_metadata()
    assert "failed" not in frame and not str(frame["fact baseline"]).startswith("not measured")
    names = set(suite.get_benchmark_names()) | {k.removeprefix("value ") for k in frame if k.startswith("value ")}
    for workload in ("steps", "engine"):
        for mode in ("baseline", "off", "on", "sdk-floor", "on+content"):
            assert f"tracing: {workload}: CPU per model request, {mode}" in names
        assert f"tracing: {workload}: CPU per request, tracing off / no tracing code" in names
        assert f"{workload}: tracing on minus off, CPU a request" in names or (
            f"tracing: {workload}: tracing on minus off, CPU a request" in names
        )
        # Every traced run made a chat span per request, a tool span per call and one invoke_agent span.
        for mode in ("on", "sdk-floor", "on+content"):
            assert frame[f"value {workload}: spans a run, {mode}"] == 5 + 1 + 5 + 1
    assert "| figure | value |" in proc.stdout
