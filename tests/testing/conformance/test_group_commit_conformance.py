"""Concurrent commits (``repertory.testing.conformance.GroupCommitConformance``) on every built-in backend.

The ``*GroupOff`` backends run the same tests with one transaction per commit: grouped or not,
the outcome of each commit must be the same.
"""

from __future__ import annotations

from repertory.testing.conformance import GroupCommitConformance
from tests.testing.conformance.backends import (
    InMemory,
    Postgres,
    PostgresGroupOff,
    SqliteFile,
    SqliteFileGroupOff,
    SqliteMemory,
)


class TestInMemory(InMemory, GroupCommitConformance):
    """GroupCommitConformance on ``InMemory``."""


class TestSqliteFile(SqliteFile, GroupCommitConformance):
    """GroupCommitConformance on ``SqliteFile``."""


class TestSqliteFileGroupOff(SqliteFileGroupOff, GroupCommitConformance):
    """GroupCommitConformance on ``SqliteFileGroupOff``."""


class TestSqliteMemory(SqliteMemory, GroupCommitConformance):
    """GroupCommitConformance on ``SqliteMemory``."""


class TestPostgres(Postgres, GroupCommitConformance):
    """GroupCommitConformance on ``Postgres``."""


class TestPostgresGroupOff(PostgresGroupOff, GroupCommitConformance):
    """GroupCommitConformance on ``PostgresGroupOff``."""
