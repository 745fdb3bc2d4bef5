"""The ``TreeStore`` contract (``TreeConformance``, ``DeletionConformance``) on every built-in backend."""

from __future__ import annotations

from repertory.testing.conformance import DeletionConformance, TreeConformance
from tests.testing.conformance.backends import (
    InMemory,
    Postgres,
    PostgresGroupOff,
    PostgresTinyCache,
    SqliteFile,
    SqliteFileGroupOff,
    SqliteFileNoCache,
    SqliteFileTinyCache,
    SqliteMemory,
)


class TestInMemory(InMemory, TreeConformance, DeletionConformance):
    """TreeConformance and DeletionConformance on ``InMemory``."""


class TestSqliteFile(SqliteFile, TreeConformance, DeletionConformance):
    """TreeConformance and DeletionConformance on ``SqliteFile``."""


class TestSqliteFileGroupOff(SqliteFileGroupOff, TreeConformance, DeletionConformance):
    """TreeConformance and DeletionConformance on ``SqliteFileGroupOff``."""


class TestSqliteMemory(SqliteMemory, TreeConformance, DeletionConformance):
    """TreeConformance and DeletionConformance on ``SqliteMemory``."""


class TestPostgres(Postgres, TreeConformance, DeletionConformance):
    """TreeConformance and DeletionConformance on ``Postgres``."""


class TestPostgresGroupOff(PostgresGroupOff, TreeConformance, DeletionConformance):
    """TreeConformance and DeletionConformance on ``PostgresGroupOff``."""


class TestSqliteFileNoCache(SqliteFileNoCache, TreeConformance, DeletionConformance):
    """TreeConformance and DeletionConformance on ``SqliteFileNoCache``."""


class TestSqliteFileTinyCache(SqliteFileTinyCache, TreeConformance, DeletionConformance):
    """TreeConformance and DeletionConformance on ``SqliteFileTinyCache``."""


class TestPostgresTinyCache(PostgresTinyCache, TreeConformance, DeletionConformance):
    """TreeConformance and DeletionConformance on ``PostgresTinyCache``."""
