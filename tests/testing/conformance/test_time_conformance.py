"""The ``TimeStore`` contract (``repertory.testing.conformance.TimeConformance``) on every built-in backend."""

from __future__ import annotations

from repertory.testing.conformance import TimeConformance
from tests.testing.conformance.backends import (
    InMemory,
    Postgres,
    PostgresGroupOff,
    SqliteFile,
    SqliteFileGroupOff,
    SqliteMemory,
)


class TestInMemory(InMemory, TimeConformance):
    """TimeConformance on ``InMemory``."""


class TestSqliteFile(SqliteFile, TimeConformance):
    """TimeConformance on ``SqliteFile``."""


class TestSqliteFileGroupOff(SqliteFileGroupOff, TimeConformance):
    """TimeConformance on ``SqliteFileGroupOff``."""


class TestSqliteMemory(SqliteMemory, TimeConformance):
    """TimeConformance on ``SqliteMemory``."""


class TestPostgres(Postgres, TimeConformance):
    """TimeConformance on ``Postgres``."""


class TestPostgresGroupOff(PostgresGroupOff, TimeConformance):
    """TimeConformance on ``PostgresGroupOff``."""
