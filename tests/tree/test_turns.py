"""``TurnsConformance`` (``repertory.testing.conformance.backend.turns``) on the built-in backends."""

from __future__ import annotations

import pytest

from repertory.testing.conformance.backend import TurnsConformance
from tests.tree.backends import LocalMemory, LocalPostgres, LocalSqlite, RaySqlite


class TestLocalMemory(LocalMemory, TurnsConformance):
    """TurnsConformance on ``LocalMemory``."""


class TestLocalSqlite(LocalSqlite, TurnsConformance):
    """TurnsConformance on ``LocalSqlite``."""


class TestLocalPostgres(LocalPostgres, TurnsConformance):
    """TurnsConformance on ``LocalPostgres``."""


@pytest.mark.slow  # a Ray instance costs seconds: make test-all runs it (backends.py)
class TestRaySqlite(RaySqlite, TurnsConformance):
    """TurnsConformance on ``RaySqlite``."""
