"""A third-party backend runs the shipped backend suite from a fixture alone (``third_party_backend.py``).

The module is copied into an empty folder and run by a pytest of its own, in strict asyncio mode
with warnings as errors, so no conftest, backend mixin or board of this repository is in reach.
Every test of the suite must pass there: its store is a SQLite file, so nothing is left to skip.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from repertory.testing.conformance import BackendConformance
from tests.testing.conformance.test_third_party import run_outside


@pytest.mark.timeout(300)  # the whole suite in a pytest of its own (about 120 tests, a few per second)
async def test_a_wrapped_backend_passes_the_suite_from_its_fixture_alone(tmp_path: Path) -> None:
    outcomes = await run_outside(tmp_path, "third_party_backend.py")
    assert set(outcomes) == {"TestWrappedBackend"}
    ran = outcomes["TestWrappedBackend"]
    suite = {name for name in dir(BackendConformance) if name.startswith("test_")}
    assert set(ran) == suite | {"test_the_suite_runs_through_the_wrapper"}
    assert {t: o for t, o in ran.items() if o != "passed"} == {}
