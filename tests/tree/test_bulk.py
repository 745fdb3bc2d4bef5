"""``BulkConformance`` (``repertory.testing.conformance.backend.bulk``) on the built-in backends."""

from __future__ import annotations

import pytest

from repertory.testing.conformance.backend import BulkConformance
from tests.tree.backends import LocalMemory, LocalPostgres, LocalSqlite, RaySqlite


class TestLocalMemory(LocalMemory, BulkConformance):
    """BulkConformance on ``LocalMemory``."""


class TestLocalSqlite(LocalSqlite, BulkConformance):
    """BulkConformance on ``LocalSqlite``."""


class TestLocalPostgres(LocalPostgres, BulkConformance):
    """BulkConformance on ``LocalPostgres``."""


@pytest.mark.slow  # a Ray instance costs seconds: make test-all runs it (backends.py)
class TestRaySqlite(RaySqlite, BulkConformance):
    """BulkConformance on ``RaySqlite``."""
