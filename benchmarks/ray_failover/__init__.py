"""Node hard failure on a multi-node Ray cluster: a node dies, its sessions are served by the others.

Run ``python -m benchmarks.ray_failover [--quick] [--out FILE]``. It starts its own three-node
cluster on this machine with ``ray.cluster_utils.Cluster`` (a head node and two worker nodes, one
CPU each, health checks tuned so a dead node is noticed in about two seconds) and stops it at the
end; nothing else of Ray is touched. ``tests/actors/test_node_failover.py`` runs the quick version in
a subprocess and checks the outcome; this benchmark reports the times. The suite runs it in a child
process too (``run_suite``): it needs a Ray of its own.

The scenario: the runtime's two shared hosts ask for a custom resource (``session_hosts``) that only
the worker nodes have; node B joins first, so they start there, then node C joins. The store is a
SQLite file every node can open (one machine). N sessions are
created and answer a turn; then R of them start a turn that charges a card (a non-idempotent tool,
recorded in a file) and waits in the model. While those turns run, node B is killed hard
(``remove_node(allow_graceful=False)``: raylet and workers die at once). Measured: from the kill to
the first call served on one of B's sessions once B's host processes are gone (``metadata()``,
through the client's own retries; before that an old process may still answer),
to every session answering, and to every interrupted turn done. Checked: each host's node changed,
every turn ended ``done``, no card was charged twice, every session still answers.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.harness.plots import Plot
from benchmarks.harness.report import RESULTS_DIR
from benchmarks.ray_failover.report import FailoverReport

__all__ = ["NAME", "PLOTS", "REPORT", "run_suite"]

NAME = "ray_failover"
REPORT = FailoverReport
PLOTS: list[Plot[FailoverReport]] = []


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> FailoverReport:
    """The suite's entry: run the scenario in a child process (it needs a Ray of its own); its report."""
    import subprocess

    from benchmarks.harness.children import python_m
    from benchmarks.harness.machine import ROOT

    out = out_dir / f"{NAME}.json"
    subprocess.run(
        python_m("benchmarks.ray_failover", "--out", str(out), *(["--quick"] if quick else [])), check=True, cwd=ROOT
    )
    return FailoverReport.model_validate_json(out.read_text())
