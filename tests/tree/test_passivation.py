"""``PassivationConformance`` (``repertory.testing.conformance.backend.passivation``) on the built-in backends."""

from __future__ import annotations

import pytest

from repertory.testing.conformance.backend import PassivationConformance
from tests.tree.backends import LocalMemory, LocalPostgres, LocalSqlite, RaySqlite


class TestLocalMemory(LocalMemory, PassivationConformance):
    """PassivationConformance on ``LocalMemory``."""


class TestLocalSqlite(LocalSqlite, PassivationConformance):
    """PassivationConformance on ``LocalSqlite``."""


class TestLocalPostgres(LocalPostgres, PassivationConformance):
    """PassivationConformance on ``LocalPostgres``."""


@pytest.mark.slow  # a Ray instance costs seconds: make test-all runs it (backends.py)
class TestRaySqlite(RaySqlite, PassivationConformance):
    """PassivationConformance on ``RaySqlite``."""
