"""``CreateConformance`` (``repertory.testing.conformance.backend.create``) on the built-in backends."""

from __future__ import annotations

import pytest

from repertory.testing.conformance.backend import CreateConformance
from tests.tree.backends import LocalMemory, LocalPostgres, LocalSqlite, RaySqlite


class TestLocalMemory(LocalMemory, CreateConformance):
    """CreateConformance on ``LocalMemory``."""


class TestLocalSqlite(LocalSqlite, CreateConformance):
    """CreateConformance on ``LocalSqlite``."""


class TestLocalPostgres(LocalPostgres, CreateConformance):
    """CreateConformance on ``LocalPostgres``."""


@pytest.mark.slow  # a Ray instance costs seconds: make test-all runs it (backends.py)
class TestRaySqlite(RaySqlite, CreateConformance):
    """CreateConformance on ``RaySqlite``."""
