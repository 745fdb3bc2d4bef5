"""The backends the conformance suite runs against: one fixture each, yielding an open store.

Adding a backend (PostgreSQL, say) is one more fixture function here under ``@backend(...)``; every
test in ``tests/conformance/`` then runs against it too. A fixture may request any other fixture
(a server, ``tmp_path``) and may ``pytest.skip`` when its server is not available. If the store
class is new, also teach ``probes.py`` how to look inside it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from repertory.storage import InMemorySessionStore, SqliteSessionStore
from repertory.storage.postgres.store import PostgresSessionStore
from repertory.testing.pg_temp import TemporaryPostgres
from tests.conftest import truncate_pg

__all__ = ["BACKENDS", "DURABLE", "backend"]

BACKENDS: dict[str, str] = {}
"""Test id (``memory``, ``sqlite-file``, ...) -> name of the fixture that yields that backend's store."""

DURABLE: set[str] = set()
"""Test ids of backends whose data outlives the store object (a reopened store sees it)."""

_F = TypeVar("_F", bound=Callable[..., Any])


def backend(test_id: str, *, durable: bool = False) -> Callable[[_F], _F]:
    """Register a fixture as a conformance backend under ``test_id``."""

    def register(fn: _F) -> _F:
        BACKENDS[test_id] = fn.__name__
        if durable:
            DURABLE.add(test_id)
        return pytest.fixture(fn)  # type: ignore[return-value]

    return register


@backend("memory")
async def memory_store() -> AsyncIterator[InMemorySessionStore]:
    async with InMemorySessionStore() as store:
        yield store


@backend("sqlite-file", durable=True)
async def sqlite_file_store(tmp_path: Path) -> AsyncIterator[SqliteSessionStore]:
    async with await SqliteSessionStore.open(tmp_path / "conformance.db") as store:
        yield store


@backend("sqlite-file-group-off", durable=True)
async def sqlite_file_store_group_off(tmp_path: Path) -> AsyncIterator[SqliteSessionStore]:
    # Group commit is on by default; the contract holds with it off too (one transaction per write).
    async with await SqliteSessionStore.open(tmp_path / "conformance.db", group_commit=False) as store:
        yield store


@backend("sqlite-memory")
async def sqlite_memory_store() -> AsyncIterator[SqliteSessionStore]:
    async with await SqliteSessionStore.open(":memory:") as store:
        yield store


@backend("postgres", durable=True)
async def postgres_store(pg_server: TemporaryPostgres) -> AsyncIterator[PostgresSessionStore]:
    async with await PostgresSessionStore.open(pg_server.url) as store:
        truncate_pg(pg_server.url)
        yield store


@backend("postgres-group-off", durable=True)
async def postgres_store_group_off(pg_server: TemporaryPostgres) -> AsyncIterator[PostgresSessionStore]:
    async with await PostgresSessionStore.open(pg_server.url, group_commit=False) as store:
        truncate_pg(pg_server.url)
        yield store
