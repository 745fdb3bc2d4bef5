"""The ``MemoryStore`` contract (``repertory.testing.conformance.MemoryConformance``) on every built-in backend."""

from __future__ import annotations

from repertory.testing.conformance import MemoryConformance
from tests.testing.conformance.backends import (
    InMemory,
    Postgres,
    PostgresGroupOff,
    SqliteFile,
    SqliteFileGroupOff,
    SqliteMemory,
)


class TestInMemory(InMemory, MemoryConformance):
    """MemoryConformance on ``InMemory``."""


class TestSqliteFile(SqliteFile, MemoryConformance):
    """MemoryConformance on ``SqliteFile``."""


class TestSqliteFileGroupOff(SqliteFileGroupOff, MemoryConformance):
    """MemoryConformance on ``SqliteFileGroupOff``."""


class TestSqliteMemory(SqliteMemory, MemoryConformance):
    """MemoryConformance on ``SqliteMemory``."""


class TestPostgres(Postgres, MemoryConformance):
    """MemoryConformance on ``Postgres``."""


class TestPostgresGroupOff(PostgresGroupOff, MemoryConformance):
    """MemoryConformance on ``PostgresGroupOff``."""
