"""``ReadbackConformance`` on every built-in store: rows that cannot be read back as written."""

from __future__ import annotations

from repertory.testing.conformance import ReadbackConformance
from tests.testing.conformance.backends import InMemory, Postgres, SqliteFile


class TestInMemory(InMemory, ReadbackConformance):
    pass


class TestSqliteFile(SqliteFile, ReadbackConformance):
    pass


class TestPostgres(Postgres, ReadbackConformance):
    pass
