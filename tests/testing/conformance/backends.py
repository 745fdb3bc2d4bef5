"""The built-in backends as mixins: a ``store`` fixture yielding an open, empty store and its ``probe``.

Each test module here lists one subclass per backend, ``class TestSqliteFile(SqliteFile,
StoreConformance)``, exactly what a third-party store's tests do with their own fixture. Adding a
built-in backend is one more mixin here and one more line in each ``test_*`` module.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from repertory.storage import InMemorySessionStore, SqliteSessionStore
from repertory.storage.postgres.store import PostgresSessionStore
from repertory.testing.conformance.in_memory_probe import InMemoryProbe
from repertory.testing.conformance.postgres_probe import PostgresProbe
from repertory.testing.conformance.sqlite_probe import SqliteProbe
from repertory.testing.pg_temp import TemporaryPostgres
from tests.conftest import truncate_pg

__all__ = [
    "TINY_HISTORY_CACHE",
    "InMemory",
    "Postgres",
    "PostgresGroupOff",
    "PostgresTinyCache",
    "SqliteFile",
    "SqliteFileGroupOff",
    "SqliteFileNoCache",
    "SqliteFileTinyCache",
    "SqliteMemory",
]

TINY_HISTORY_CACHE = 1_500
"""A history cache budget of a few records: loads then mix cached tops with lineages read below them."""


class InMemory:
    """``InMemorySessionStore``: not durable, no transactions."""

    @pytest.fixture
    async def store(self) -> AsyncIterator[InMemorySessionStore]:
        async with InMemorySessionStore() as store:
            yield store

    @pytest.fixture
    def probe(self, store: InMemorySessionStore) -> InMemoryProbe:
        return InMemoryProbe(store)


class _Sqlite:
    @pytest.fixture
    def probe(self, store: SqliteSessionStore) -> SqliteProbe:
        return SqliteProbe(store)


class SqliteFile(_Sqlite):
    """A SQLite file in ``tmp_path``, group commit on (the default)."""

    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[SqliteSessionStore]:
        async with await SqliteSessionStore.open(tmp_path / "conformance.db") as store:
            yield store


class SqliteFileGroupOff(_Sqlite):
    """A SQLite file with group commit off: the contract holds with one transaction per write too."""

    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[SqliteSessionStore]:
        async with await SqliteSessionStore.open(tmp_path / "conformance.db", group_commit=False) as store:
            yield store


class SqliteFileNoCache(_Sqlite):
    """A SQLite file with the history cache off: every load decodes its whole lineage from the rows."""

    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[SqliteSessionStore]:
        async with await SqliteSessionStore.open(tmp_path / "conformance.db", history_cache_bytes=0) as store:
            yield store


class SqliteFileTinyCache(_Sqlite):
    """A SQLite file whose history cache holds a few records (``TINY_HISTORY_CACHE``)."""

    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[SqliteSessionStore]:
        path = tmp_path / "conformance.db"
        async with await SqliteSessionStore.open(path, history_cache_bytes=TINY_HISTORY_CACHE) as store:
            yield store


class SqliteMemory(_Sqlite):
    """SQLite's ``":memory:"`` database: not durable, but transactional."""

    @pytest.fixture
    async def store(self) -> AsyncIterator[SqliteSessionStore]:
        async with await SqliteSessionStore.open(":memory:") as store:
            yield store


class _Postgres:
    @pytest.fixture
    def probe(self, store: PostgresSessionStore) -> PostgresProbe:
        return PostgresProbe(store)


class Postgres(_Postgres):
    """The test session's PostgreSQL server (``pg_server``), emptied per test, group commit on."""

    @pytest.fixture
    async def store(self, pg_server: TemporaryPostgres) -> AsyncIterator[PostgresSessionStore]:
        async with await PostgresSessionStore.open(pg_server.url) as store:
            truncate_pg(pg_server.url)
            yield store


class PostgresGroupOff(_Postgres):
    """The same server with group commit off."""

    @pytest.fixture
    async def store(self, pg_server: TemporaryPostgres) -> AsyncIterator[PostgresSessionStore]:
        async with await PostgresSessionStore.open(pg_server.url, group_commit=False) as store:
            truncate_pg(pg_server.url)
            yield store


class PostgresTinyCache(_Postgres):
    """The same server, the history cache holding a few records (``TINY_HISTORY_CACHE``)."""

    @pytest.fixture
    async def store(self, pg_server: TemporaryPostgres) -> AsyncIterator[PostgresSessionStore]:
        async with await PostgresSessionStore.open(pg_server.url, history_cache_bytes=TINY_HISTORY_CACHE) as store:
            truncate_pg(pg_server.url)
            yield store
