"""``DelegationConformance`` (``repertory.testing.conformance.backend.delegation``) on the built-in backends."""

from __future__ import annotations

from repertory.testing.conformance.backend import DelegationConformance
from tests.tree.backends import LocalMemory, LocalPostgres, LocalSqlite, RaySqlite


class TestLocalMemory(LocalMemory, DelegationConformance):
    """DelegationConformance on ``LocalMemory``."""


class TestLocalSqlite(LocalSqlite, DelegationConformance):
    """DelegationConformance on ``LocalSqlite``."""


class TestLocalPostgres(LocalPostgres, DelegationConformance):
    """DelegationConformance on ``LocalPostgres``."""


class TestRaySqlite(RaySqlite, DelegationConformance):
    """DelegationConformance on ``RaySqlite``."""
