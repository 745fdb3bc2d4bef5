"""``python -m benchmarks --quick`` runs end to end and writes its pyperf suites, the page and the plots.

A smoke test of the suite, not of speed: nothing here reads a figure's value (docs/performance/index.md).
The suite runs as a subprocess, as a user runs it, into a temporary folder so the stored results in
``benchmarks/results/`` are never touched. LangGraph is left out (``--skip-peers``) and quick mode
leaves Ray, PostgreSQL and the long soaks out, so the test needs neither the ``bench`` extra nor them.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pyperf
import pytest

from benchmarks.harness.command import RESULTS_DIR
from benchmarks.harness.render import load_suites, render_results
from benchmarks.harness.suite import BENCHMARKS

ROOT = Path(__file__).resolve().parent.parent
PLOTS = ("fork_cost_vs_history_length.png", "throughput_vs_concurrency.png", "bytes_per_step_vs_run_length.png")


@pytest.mark.timeout(200)
def test_quick_suite_writes_suites_page_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--skip-peers", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=190,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    suites = load_suites(out)
    ran = [b.name for b in BENCHMARKS if not b.quick_skip]
    assert set(suites) == set(ran), proc.stderr[-2000:]
    for name in ran:
        suite = pyperf.BenchmarkSuite.load(str(out / f"{name}.json"))  # pyperf's own reader takes it
        frame = suite.get_benchmark(f"{name}: run").get_metadata()
        assert frame["mode"] == "quick" and frame["command"] == f"python -m benchmarks.{name} --quick"
        assert "failed" not in frame, frame["failed"]
        assert len(suite.get_benchmark_names()) > 1 or any(k.startswith("value ") for k in frame), name
    page = (out / "RESULTS.md").read_text()
    for name in ran:
        assert f"### {name}\n" in page
    for plot in PLOTS:
        png = out / "plots" / plot
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"plots/{plot}" in page


def test_every_registered_benchmark_is_a_module_and_its_stored_suite_renders(tmp_path: Path) -> None:
    # Each registered name is a module `python -m` can run (the soak's is tests.soak.suite), and the
    # stored suites render: a suite the renderer could not read would drop its figures from the page.
    for bench in BENCHMARKS:
        assert importlib.util.find_spec(bench.module) is not None, bench.module
    stored = load_suites(RESULTS_DIR)
    assert set(stored) <= {b.name for b in BENCHMARKS}
    markdown, _ = render_results(RESULTS_DIR, tmp_path / "RESULTS.md", tmp_path / "plots")
    page = markdown.read_text()
    for name in stored:
        assert f"### {name}\n" in page


def test_no_import_circle_in_benchmarks() -> None:
    # A circle (report <-> tables, as there were) couples modules that must change together; the
    # harness stays below the benchmarks, which import it and never each other in a circle.
    import grimp

    graph = grimp.build_graph("benchmarks", cache_dir=None)
    modules = sorted(graph.modules)
    imports = {m: graph.find_modules_directly_imported_by(m) & graph.modules for m in modules}
    circles = [(m, n) for m in modules for n in imports[m] if m != n and graph.chain_exists(importer=n, imported=m)]
    assert circles == []
    harness = {m for m in modules if m.startswith("benchmarks.harness")}
    assert all(imports[m] <= harness for m in harness), "the harness imports no benchmark"
