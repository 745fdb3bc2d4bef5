"""``TreeStore.move_head`` (``repertory.testing.conformance.HeadConformance``) on every built-in backend."""

from __future__ import annotations

from repertory.testing.conformance import HeadConformance
from tests.testing.conformance.backends import (
    InMemory,
    Postgres,
    PostgresGroupOff,
    SqliteFile,
    SqliteFileGroupOff,
    SqliteMemory,
)


class TestInMemory(InMemory, HeadConformance):
    """HeadConformance on ``InMemory``."""


class TestSqliteFile(SqliteFile, HeadConformance):
    """HeadConformance on ``SqliteFile``."""


class TestSqliteFileGroupOff(SqliteFileGroupOff, HeadConformance):
    """HeadConformance on ``SqliteFileGroupOff``."""


class TestSqliteMemory(SqliteMemory, HeadConformance):
    """HeadConformance on ``SqliteMemory``."""


class TestPostgres(Postgres, HeadConformance):
    """HeadConformance on ``Postgres``."""


class TestPostgresGroupOff(PostgresGroupOff, HeadConformance):
    """HeadConformance on ``PostgresGroupOff``."""
