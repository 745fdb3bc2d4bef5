"""Fixtures of the export tests: a store of each backend, and a runtime with the fleet's agents on it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from repertory import InMemorySessionStore, Runtime
from repertory.storage import SqliteSessionStore, TreeStore
from repertory.storage.postgres.store import PostgresSessionStore
from tests.analytics.fleet import agents
from tests.conftest import truncate_pg

BACKENDS = ("memory", "sqlite", "postgres")


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TreeStore]:
    """An empty store of each backend (PostgreSQL: the session's server, truncated)."""
    opened: TreeStore
    if request.param == "memory":
        opened = InMemorySessionStore()
    elif request.param == "sqlite":
        opened = await SqliteSessionStore.open(tmp_path / "fleet.db")
    else:
        server = request.getfixturevalue("pg_server")
        truncate_pg(server.url)
        opened = await PostgresSessionStore.open(server.url)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def runtime(store: TreeStore) -> AsyncIterator[Runtime]:
    """A local runtime on ``store`` with the fleet's agents (the store stays open after it closes)."""
    rt = await Runtime.start(store=store, agents=agents())
    try:
        yield rt
    finally:
        await rt.close()
