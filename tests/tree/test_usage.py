"""``UsageConformance`` (``repertory.testing.conformance.backend.usage``) on the built-in backends."""

from __future__ import annotations

import pytest

from repertory.testing.conformance.backend import UsageConformance
from tests.tree.backends import LocalMemory, LocalPostgres, LocalSqlite, RaySqlite


class TestLocalMemory(LocalMemory, UsageConformance):
    """UsageConformance on ``LocalMemory``."""


class TestLocalSqlite(LocalSqlite, UsageConformance):
    """UsageConformance on ``LocalSqlite``."""


class TestLocalPostgres(LocalPostgres, UsageConformance):
    """UsageConformance on ``LocalPostgres``."""


@pytest.mark.slow  # a Ray instance costs seconds: make test-all runs it (backends.py)
class TestRaySqlite(RaySqlite, UsageConformance):
    """UsageConformance on ``RaySqlite``."""
