"""``SessionTreeConformance`` (``repertory.testing.conformance.backend.session_tree``) on the built-in backends."""

from __future__ import annotations

import pytest

from repertory.testing.conformance.backend import SessionTreeConformance
from tests.tree.backends import LocalMemory, LocalPostgres, LocalSqlite, RaySqlite


class TestLocalMemory(LocalMemory, SessionTreeConformance):
    """SessionTreeConformance on ``LocalMemory``."""


class TestLocalSqlite(LocalSqlite, SessionTreeConformance):
    """SessionTreeConformance on ``LocalSqlite``."""


class TestLocalPostgres(LocalPostgres, SessionTreeConformance):
    """SessionTreeConformance on ``LocalPostgres``."""


@pytest.mark.slow  # a Ray instance costs seconds: make test-all runs it (backends.py)
class TestRaySqlite(RaySqlite, SessionTreeConformance):
    """SessionTreeConformance on ``RaySqlite``."""
