"""``ApprovalsConformance`` (``repertory.testing.conformance.backend.approvals``) on the built-in backends."""

from __future__ import annotations

import pytest

from repertory.testing.conformance.backend import ApprovalsConformance
from tests.tree.backends import LocalMemory, LocalPostgres, LocalSqlite, RaySqlite


class TestLocalMemory(LocalMemory, ApprovalsConformance):
    """ApprovalsConformance on ``LocalMemory``."""


class TestLocalSqlite(LocalSqlite, ApprovalsConformance):
    """ApprovalsConformance on ``LocalSqlite``."""


class TestLocalPostgres(LocalPostgres, ApprovalsConformance):
    """ApprovalsConformance on ``LocalPostgres``."""


@pytest.mark.slow  # a Ray instance costs seconds: make test-all runs it (backends.py)
class TestRaySqlite(RaySqlite, ApprovalsConformance):
    """ApprovalsConformance on ``RaySqlite``."""
