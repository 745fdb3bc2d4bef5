"""A short seeded chaos soak (issue 26): the fleet under faults, then the independent checker, per backend and store.

Each run injects faults of every kind built for its backend and store (the schedule puts each
kind in once before any comes twice) for about half a minute, quiesces and checks. Asserted are
counts, never timings: faults were injected and every planned kind came, the driver quiesced,
no accepted turn was lost, and the checker (``tests.soak.checker``) found no violation.
Without the checker the run proves nothing, and the test says so by failing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.soak.faults import kinds_for
from tests.soak.run import ChaosConfig, run_chaos

MINUTES = 0.5


def _soak(tmp_path: Path, backend: str, store: str, seed: int, minutes: float = MINUTES) -> None:
    cfg = ChaosConfig(
        minutes=minutes,
        backend=backend,
        store=store,
        seed=seed,
        out=tmp_path / "run",
        gap_s=(2, 5),
        quiesce_timeout_s=150,
    )
    outcome = run_chaos(cfg)
    assert outcome.unexpected_exits == [], outcome.unexpected_exits
    # A kind the run could not inject (disk_full without a tmpfs) is left out, and the outcome says why.
    kinds = kinds_for(backend, store, small_disk="disk_full" not in outcome.left_out)
    assert set(kinds) | set(outcome.left_out) == set(kinds_for(backend, store)), outcome.left_out
    assert sum(outcome.faults.values()) >= len(kinds), outcome.faults
    assert set(outcome.faults) == set(kinds), outcome.faults
    assert outcome.quiesced, outcome.lost_detail
    assert outcome.accepted > 0 and outcome.accepted_lost == 0, outcome.lost_detail
    assert sum(outcome.decisions.values()) > 0 and outcome.ledger_lines > 0
    assert outcome.violations is not None, outcome.checker
    assert outcome.violations == 0, outcome.violation_list


@pytest.mark.timeout(300)
def test_local_sqlite_soak_has_faults_and_no_violations(tmp_path: Path) -> None:
    _soak(tmp_path, "local", "sqlite", seed=11)


@pytest.mark.slow  # 45 s; in the suite PostgreSQL has the checker's clean run (test_checker.py) and the SQLite soak
@pytest.mark.timeout(300)
def test_local_postgresql_soak_has_faults_and_no_violations(tmp_path: Path) -> None:
    _soak(tmp_path, "local", "postgresql", seed=12)


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_ray_sqlite_soak_has_faults_and_no_violations(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    _soak(tmp_path, "ray", "sqlite", seed=13, minutes=0.75)


def test_a_run_that_fails_still_copies_its_store_out_and_unmounts_the_disk(tmp_path: Path) -> None:
    cfg = ChaosConfig(minutes=0.1, backend="no-such-backend", store="sqlite", out=tmp_path / "run")
    with pytest.raises(ValueError, match="--backend is local or ray"):
        run_chaos(cfg)  # fails after the store was made (on its tmpfs, where one can be mounted)
    assert not os.path.ismount(tmp_path / "run" / "disk")
    assert (tmp_path / "run" / "store.db").stat().st_size > 0
