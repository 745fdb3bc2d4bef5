"""Fixtures for the engine tests: every test that takes ``store`` or ``backend`` runs once per backend.

A backend is one fixture function registered with ``@register_backend("id")`` that yields a ``Backend``: the
open store, how to "restart" (open a new store object on the same data, as a new process would) and
how to count the history entries the store holds. The backends are memory, a SQLite file and the
suite's own PostgreSQL server (``pg_server`` from ``tests/conftest.py``).

Tests marked ``@pytest.mark.durable`` (a restart must find the data again) run only on backends
registered with ``durable=True``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest

from repertory.storage import InMemorySessionStore, SessionStore, SqliteSessionStore
from repertory.storage.postgres.store import PostgresSessionStore
from repertory.testing.pg_temp import TemporaryPostgres
from tests.conftest import truncate_pg

BACKENDS: dict[str, str] = {}
"""Test id -> name of the fixture yielding that backend."""

DURABLE: set[str] = set()

_F = TypeVar("_F", bound=Callable[..., object])


@dataclass
class Backend:
    """One store under test, plus the few backend-specific things the engine tests need."""

    name: str
    store: SessionStore
    durable: bool
    _reopen: Callable[[], Awaitable[SessionStore]]
    _count_entries: Callable[[SessionStore], Awaitable[int]]
    _opened: list[SessionStore] = field(default_factory=list)

    async def restart(self) -> SessionStore:
        """Close the current store object and open a new one on the same data (a process restart).

        For a non-durable backend this returns the same store (there is nothing to reopen).
        """
        if not self.durable:
            return self.store
        await self.store.close()
        self.store = await self._reopen()
        self._opened.append(self.store)
        return self.store

    async def open_another(self) -> SessionStore:
        """A second, independent store object on the same data (another process's view)."""
        if not self.durable:
            return self.store
        other = await self._reopen()
        self._opened.append(other)
        return other

    async def entry_count(self) -> int:
        """How many history entries the store holds."""
        return await self._count_entries(self.store)

    async def close_all(self) -> None:
        for s in [self.store, *self._opened]:
            await s.close()


def register_backend(test_id: str, *, durable: bool = False) -> Callable[[_F], _F]:
    """Register an async-generator fixture yielding a ``Backend`` under ``test_id``."""

    def register(fn: _F) -> _F:
        BACKENDS[test_id] = fn.__name__
        if durable:
            DURABLE.add(test_id)
        return pytest.fixture(fn)  # type: ignore[return-value]

    return register


@register_backend("memory")
async def memory_backend() -> AsyncIterator[Backend]:
    store = InMemorySessionStore()

    async def reopen() -> SessionStore:
        return store

    async def count(s: SessionStore) -> int:
        assert isinstance(s, InMemorySessionStore)
        return len(s.snapshot().entries)

    b = Backend("memory", store, False, reopen, count)
    yield b
    await b.close_all()


@register_backend("sqlite-file", durable=True)
async def sqlite_backend(tmp_path: Path) -> AsyncIterator[Backend]:
    path = tmp_path / "engine.db"

    async def reopen() -> SessionStore:
        return await SqliteSessionStore.open(path)

    async def count(s: SessionStore) -> int:
        assert isinstance(s, SqliteSessionStore)
        return int(await s.read("count", lambda c: c.execute("SELECT count(*) FROM history_entries").fetchone()[0]))

    b = Backend("sqlite-file", await reopen(), True, reopen, count)
    yield b
    await b.close_all()


@register_backend("postgres", durable=True)
async def postgres_backend(pg_server: TemporaryPostgres) -> AsyncIterator[Backend]:
    async def reopen() -> SessionStore:
        return await PostgresSessionStore.open(pg_server.url)

    async def count(s: SessionStore) -> int:
        assert isinstance(s, PostgresSessionStore)
        async with s.connection("count") as conn:
            cur = await conn.execute("SELECT count(*) FROM repertory.history_entries")
            row = await cur.fetchone()
        assert row is not None
        return int(row[0])

    first = await reopen()
    truncate_pg(pg_server.url)
    b = Backend("postgres", first, True, reopen, count)
    yield b
    await b.close_all()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "durable: run only on backends whose data outlives the store object")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    ids = list(BACKENDS)
    if metafunc.definition.get_closest_marker("durable") is not None:
        ids = [i for i in ids if i in DURABLE]
    metafunc.parametrize("backend", ids, ids=ids, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> Backend:
    """The backend this test instance is parametrized with."""
    return request.getfixturevalue(BACKENDS[request.param])  # type: ignore[no-any-return]


@pytest.fixture
def store(backend: Backend) -> SessionStore:
    """The open, empty store of this test instance's backend."""
    return backend.store
