"""The ``TreeStore`` contract (``repertory.testing.conformance.TreeConformance``) on every built-in backend."""

from __future__ import annotations

from repertory.testing.conformance import TreeConformance
from tests.conformance.backends import (
    InMemory,
    Postgres,
    PostgresGroupOff,
    SqliteFile,
    SqliteFileGroupOff,
    SqliteMemory,
)


class TestInMemory(InMemory, TreeConformance):
    """TreeConformance on ``InMemory``."""


class TestSqliteFile(SqliteFile, TreeConformance):
    """TreeConformance on ``SqliteFile``."""


class TestSqliteFileGroupOff(SqliteFileGroupOff, TreeConformance):
    """TreeConformance on ``SqliteFileGroupOff``."""


class TestSqliteMemory(SqliteMemory, TreeConformance):
    """TreeConformance on ``SqliteMemory``."""


class TestPostgres(Postgres, TreeConformance):
    """TreeConformance on ``Postgres``."""


class TestPostgresGroupOff(PostgresGroupOff, TreeConformance):
    """TreeConformance on ``PostgresGroupOff``."""
