"""``DeleteConformance`` (``repertory.testing.conformance.backend.delete``) on the built-in backends."""

from __future__ import annotations

import pytest

from repertory.testing.conformance.backend import DeleteConformance
from tests.tree.backends import LocalMemory, LocalPostgres, LocalSqlite, RaySqlite


class TestLocalMemory(LocalMemory, DeleteConformance):
    """DeleteConformance on ``LocalMemory``."""


class TestLocalSqlite(LocalSqlite, DeleteConformance):
    """DeleteConformance on ``LocalSqlite``."""


class TestLocalPostgres(LocalPostgres, DeleteConformance):
    """DeleteConformance on ``LocalPostgres``."""


@pytest.mark.slow  # a Ray instance costs seconds: make test-all runs it (backends.py)
class TestRaySqlite(RaySqlite, DeleteConformance):
    """DeleteConformance on ``RaySqlite``."""
