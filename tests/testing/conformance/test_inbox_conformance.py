"""The ``DecisionInbox`` contract (``repertory.testing.conformance.InboxConformance``) on every built-in backend."""

from __future__ import annotations

from repertory.testing.conformance import InboxConformance
from tests.testing.conformance.backends import (
    InMemory,
    Postgres,
    PostgresGroupOff,
    SqliteFile,
    SqliteFileGroupOff,
    SqliteMemory,
)


class TestInMemory(InMemory, InboxConformance):
    """InboxConformance on ``InMemory``."""


class TestSqliteFile(SqliteFile, InboxConformance):
    """InboxConformance on ``SqliteFile``."""


class TestSqliteFileGroupOff(SqliteFileGroupOff, InboxConformance):
    """InboxConformance on ``SqliteFileGroupOff``."""


class TestSqliteMemory(SqliteMemory, InboxConformance):
    """InboxConformance on ``SqliteMemory``."""


class TestPostgres(Postgres, InboxConformance):
    """InboxConformance on ``Postgres``."""


class TestPostgresGroupOff(PostgresGroupOff, InboxConformance):
    """InboxConformance on ``PostgresGroupOff``."""
