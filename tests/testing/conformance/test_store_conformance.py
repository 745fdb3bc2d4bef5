"""The ``SessionStore`` contract (``repertory.testing.conformance.StoreConformance``) on every built-in backend."""

from __future__ import annotations

from repertory.testing.conformance import StoreConformance
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


class TestInMemory(InMemory, StoreConformance):
    """StoreConformance on ``InMemory``."""


class TestSqliteFile(SqliteFile, StoreConformance):
    """StoreConformance on ``SqliteFile``."""


class TestSqliteFileGroupOff(SqliteFileGroupOff, StoreConformance):
    """StoreConformance on ``SqliteFileGroupOff``."""


class TestSqliteMemory(SqliteMemory, StoreConformance):
    """StoreConformance on ``SqliteMemory``."""


class TestPostgres(Postgres, StoreConformance):
    """StoreConformance on ``Postgres``."""


class TestPostgresGroupOff(PostgresGroupOff, StoreConformance):
    """StoreConformance on ``PostgresGroupOff``."""


class TestSqliteFileNoCache(SqliteFileNoCache, StoreConformance):
    """StoreConformance on ``SqliteFileNoCache``."""


class TestSqliteFileTinyCache(SqliteFileTinyCache, StoreConformance):
    """StoreConformance on ``SqliteFileTinyCache``."""


class TestPostgresTinyCache(PostgresTinyCache, StoreConformance):
    """StoreConformance on ``PostgresTinyCache``."""
