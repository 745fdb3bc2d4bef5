"""``ContextConformance`` (``repertory.testing.conformance.backend.context``) on the built-in backends."""

from __future__ import annotations

import pytest

from repertory.testing.conformance.backend import ContextConformance
from tests.tree.backends import LocalMemory, LocalPostgres, LocalSqlite, RaySqlite


class TestLocalMemory(LocalMemory, ContextConformance):
    """ContextConformance on ``LocalMemory``."""


class TestLocalSqlite(LocalSqlite, ContextConformance):
    """ContextConformance on ``LocalSqlite``."""


class TestLocalPostgres(LocalPostgres, ContextConformance):
    """ContextConformance on ``LocalPostgres``."""


@pytest.mark.slow  # a Ray instance costs seconds: make test-all runs it (backends.py)
class TestRaySqlite(RaySqlite, ContextConformance):
    """ContextConformance on ``RaySqlite``."""
