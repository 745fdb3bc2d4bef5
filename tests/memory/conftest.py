"""Fixtures for the memory tests: every test that takes ``backend`` or ``store`` runs once per store.

The backends are the in-memory store, a SQLite file and the suite's own PostgreSQL server
(``pg_server`` from ``tests/conftest.py``, emptied with ``truncate_pg``). ``Backend.reopen()`` opens
a new store object on the same data, as a new process would (the in-memory store returns itself).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from repertory.storage import InMemorySessionStore, SqliteSessionStore
from repertory.storage.postgres.store import PostgresSessionStore
from tests.conftest import truncate_pg

BACKENDS = ("memory", "sqlite-file", "postgres")


@dataclass
class Backend:
    """One store under test and how to open another object on the same data."""

    name: str
    store: Any
    durable: bool
    _open: Callable[[], Awaitable[Any]]
    _opened: list[Any] = field(default_factory=list)

    async def reopen(self) -> Any:
        """Close the store and open a new one on the same data (the same store when not durable)."""
        if not self.durable:
            return self.store
        await self.store.close()
        self.store = await self._open()
        self._opened.append(self.store)
        return self.store

    async def close_all(self) -> None:
        for s in [self.store, *self._opened]:
            await s.close()


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """An open, empty store of each kind."""
    if request.param == "memory":
        store = InMemorySessionStore()

        async def same() -> Any:
            return store

        b = Backend("memory", store, False, same)
    elif request.param == "sqlite-file":
        path = tmp_path / "memory.db"

        async def open_sqlite() -> Any:
            return await SqliteSessionStore.open(path)

        b = Backend("sqlite-file", await open_sqlite(), True, open_sqlite)
    else:
        url = request.getfixturevalue("pg_server").url

        async def open_pg() -> Any:
            return await PostgresSessionStore.open(url)

        first = await open_pg()
        truncate_pg(url)
        b = Backend("postgres", first, True, open_pg)
    yield b
    await b.close_all()


@pytest.fixture
def store(backend: Backend) -> Any:
    """The open, empty store of this test instance's backend."""
    return backend.store
