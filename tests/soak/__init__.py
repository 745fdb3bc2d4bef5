"""Chaos soak (issue 26): a mixed fleet under seeded faults for minutes, then an independent check.

    python -m tests.soak [--minutes N] [--backend local|ray] [--store sqlite|postgresql] [--seed S] [--out DIR]

The conductor (``run``) starts a store, a driver process that runs the fleet (``driver``:
orchestrators that delegate and spawn, follow-ups sent mid-turn, notifications, forks, timers,
MCP tools, seeded slow and failing model replies; ``workload``) and an approver process with a
runtime of its own (``approver``), then injects faults on a seeded schedule (``faults``), quiesces
and runs the checker (``checker``, written separately) on what the run left in its folder
(``records`` names the files). Nothing here is a timed assertion: the figures are a report.

It lives with the tests because its checker asserts invariants (the short seeded soaks,
``test_chaos_short.py``, run in the suite); ``python -m benchmarks`` still runs the soaks below
and renders their figures (``--report``) through ``REPORT``, found by ``benchmarks.harness.suite.HOMES``.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.harness.plots import Plot
from benchmarks.harness.report import RESULTS_DIR
from tests.soak.report import ChaosReport

__all__ = ["NAME", "PLOTS", "REPORT", "SOAKS", "run_suite"]

NAME = "chaos"
REPORT = ChaosReport
PLOTS: list[Plot[ChaosReport]] = []
SOAKS = (("local", "sqlite"), ("local", "postgresql"), ("ray", "sqlite"), ("ray", "postgresql"))
"""The soaks the suite runs, one after another (each in a child process: Ray needs one of its own)."""


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> ChaosReport:
    """The suite's entry: each soak for 5 minutes (``quick``: 30 s), into ``out_dir/chaos.json``."""
    import subprocess

    from benchmarks.harness.children import python_m
    from benchmarks.harness.machine import ROOT

    out = out_dir / f"{NAME}.json"
    out.unlink(missing_ok=True)
    minutes = "0.5" if quick else "5"
    for backend, store in SOAKS:
        args = ("--minutes", minutes, "--backend", backend, "--store", store, "--seed", "1", "--report", str(out))
        subprocess.run(python_m("tests.soak", *args), check=False, cwd=ROOT)  # exit 1/2 is in the report
    report = ChaosReport.model_validate_json(out.read_text())
    print(report.render(), flush=True)
    return report
