"""``MetadataConformance`` (``repertory.testing.conformance.backend.metadata``) on the built-in backends."""

from __future__ import annotations

import pytest

from repertory.testing.conformance.backend import MetadataConformance
from tests.tree.backends import LocalMemory, LocalPostgres, LocalSqlite, RaySqlite


class TestLocalMemory(LocalMemory, MetadataConformance):
    """MetadataConformance on ``LocalMemory``."""


class TestLocalSqlite(LocalSqlite, MetadataConformance):
    """MetadataConformance on ``LocalSqlite``."""


class TestLocalPostgres(LocalPostgres, MetadataConformance):
    """MetadataConformance on ``LocalPostgres``."""


@pytest.mark.slow  # a Ray instance costs seconds: make test-all runs it (backends.py)
class TestRaySqlite(RaySqlite, MetadataConformance):
    """MetadataConformance on ``RaySqlite``."""
