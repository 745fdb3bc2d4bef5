"""The recovery scenario's parent: start the workload, SIGKILL it, run the recoveries, read the store."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.harness.children import python_m
from benchmarks.harness.machine import ROOT
from benchmarks.harness.report import Clock, finish, mode_of
from benchmarks.recovery.report import TARGET_S, Probe, Recovered, RecoveryReport, Scenario

__all__ = ["SIZES", "measure"]

SIZES = {"full": (10_000, 100), "quick": (100, 5)}
SETUP_LIMIT_S = 900.0
RECOVER_LIMIT_S = 600.0


def _counts(db: Path) -> dict[str, dict[str, int]]:
    """Runs and turns by status, read straight from the file (the way an operator would look)."""
    conn = sqlite3.connect(db)
    try:
        return {
            table: dict(conn.execute(f"SELECT status, count(*) FROM {table} GROUP BY status").fetchall())
            for table in ("runs", "turns")
        }
    finally:
        conn.close()


def _copy_store(db: Path, to: Path) -> Path:
    """The database file and its WAL, as the killed process left them (the index file is rebuilt)."""
    to.mkdir()
    for suffix in ("", "-wal"):
        if Path(f"{db}{suffix}").exists():
            shutil.copyfile(f"{db}{suffix}", f"{to / db.name}{suffix}")
    return to / db.name


def _child(role: str, *args: str) -> list[str]:
    return python_m("benchmarks.recovery", "--child", role, *args)


def _run_child(role: str, *args: str) -> None:
    subprocess.run(_child(role, *args), cwd=ROOT, check=True, timeout=RECOVER_LIMIT_S)


def scenario(suspended: int, running: int) -> Scenario:
    """Set up in one process, SIGKILL it, recover in fresh ones; every figure of the scenario."""
    with tempfile.TemporaryDirectory(prefix="repertory-recovery-") as folder:
        db, manifest, out = Path(folder) / "recovery.db", Path(folder) / "manifest.json", Path(folder) / "out.json"
        t0 = time.perf_counter()
        workload = subprocess.Popen(_child("workload", str(db), str(manifest), str(suspended), str(running)), cwd=ROOT)
        try:
            while not manifest.exists():  # polling: another process's readiness, nothing here to await
                if workload.poll() is not None:
                    raise RuntimeError(f"the workload process exited with {workload.returncode} before it was ready")
                if time.perf_counter() - t0 > SETUP_LIMIT_S:
                    raise RuntimeError(f"the workload was not ready within {SETUP_LIMIT_S:.0f} s")
                time.sleep(0.05)
            setup = time.perf_counter() - t0
        finally:
            os.kill(workload.pid, signal.SIGKILL)  # also on failure: never leave it running
            workload.wait()
        at_kill = _counts(db)
        copy = _copy_store(db, Path(folder) / "probe")
        tuned_copy = _copy_store(db, Path(folder) / "tuned")
        load_before = os.getloadavg()[0]
        _run_child("recover", str(db), str(manifest), str(out))
        recovered = Recovered.model_validate_json(out.read_text())
        _run_child("probe", str(copy), str(manifest), str(out))
        probe = Probe.model_validate_json(out.read_text())
        _run_child("recover-tuned", str(tuned_copy), str(manifest), str(out))
        tuned = Recovered.model_validate_json(out.read_text())
        return Scenario(
            suspended=suspended,
            running=running,
            setup_seconds=setup,
            workload_exit=workload.returncode,
            at_kill=at_kill,
            **recovered.model_dump(),
            probe_without_answers=probe,
            with_tune_gc=tuned,
            after=_counts(db),
            load_average_before_after=[load_before, os.getloadavg()[0]],
        )


def measure(quick: bool) -> RecoveryReport:
    """Set up, kill, recover; the report with its summary."""
    mode = mode_of(quick)
    clock = Clock.start("recovery", mode)
    result = scenario(*SIZES[mode])
    report = RecoveryReport(
        **clock.frame(),
        store="SQLite file (WAL), durability normal",
        target_seconds=TARGET_S,
        model="ScriptedModel step functions, zero delay",
        result=result,
    )
    return finish(report, clock)
