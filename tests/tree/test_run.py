"""``RunConformance`` (``repertory.testing.conformance.backend.run``) on the built-in backends."""

from __future__ import annotations

import pytest

from repertory.testing.conformance.backend import RunConformance
from tests.tree.backends import LocalMemory, LocalPostgres, LocalSqlite, RaySqlite


class TestLocalMemory(LocalMemory, RunConformance):
    """RunConformance on ``LocalMemory``."""


class TestLocalSqlite(LocalSqlite, RunConformance):
    """RunConformance on ``LocalSqlite``."""


class TestLocalPostgres(LocalPostgres, RunConformance):
    """RunConformance on ``LocalPostgres``."""


@pytest.mark.slow  # a Ray instance costs seconds: make test-all runs it (backends.py)
class TestRaySqlite(RaySqlite, RunConformance):
    """RunConformance on ``RaySqlite``."""
