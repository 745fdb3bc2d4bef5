"""``BudgetsConformance`` (``repertory.testing.conformance.backend.budgets``) on the built-in backends."""

from __future__ import annotations

from repertory.testing.conformance.backend import BudgetsConformance
from tests.tree.backends import LocalMemory, LocalPostgres, LocalSqlite, RaySqlite


class TestLocalMemory(LocalMemory, BudgetsConformance):
    """BudgetsConformance on ``LocalMemory``."""


class TestLocalSqlite(LocalSqlite, BudgetsConformance):
    """BudgetsConformance on ``LocalSqlite``."""


class TestLocalPostgres(LocalPostgres, BudgetsConformance):
    """BudgetsConformance on ``LocalPostgres``."""


class TestRaySqlite(RaySqlite, BudgetsConformance):
    """BudgetsConformance on ``RaySqlite``."""
