"""The ``BudgetStore`` contract (``repertory.testing.conformance.BudgetConformance``) on every built-in backend."""

from __future__ import annotations

from repertory.testing.conformance import BudgetConformance
from tests.testing.conformance.backends import (
    InMemory,
    Postgres,
    PostgresGroupOff,
    SqliteFile,
    SqliteFileGroupOff,
    SqliteMemory,
)


class TestInMemory(InMemory, BudgetConformance):
    """BudgetConformance on ``InMemory``."""


class TestSqliteFile(SqliteFile, BudgetConformance):
    """BudgetConformance on ``SqliteFile``."""


class TestSqliteFileGroupOff(SqliteFileGroupOff, BudgetConformance):
    """BudgetConformance on ``SqliteFileGroupOff``."""


class TestSqliteMemory(SqliteMemory, BudgetConformance):
    """BudgetConformance on ``SqliteMemory``."""


class TestPostgres(Postgres, BudgetConformance):
    """BudgetConformance on ``Postgres``."""


class TestPostgresGroupOff(PostgresGroupOff, BudgetConformance):
    """BudgetConformance on ``PostgresGroupOff``."""
