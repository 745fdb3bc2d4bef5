"""Fixtures of the export tests: a store of each backend, and a runtime with the fleet's agents on it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from repertory import Runtime
from repertory.storage import TreeStore
from tests.conftest import empty_store
from tests.storage.export.fleet import agents

BACKENDS = ("memory", "sqlite", "postgres")


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TreeStore]:
    """An empty store of each backend (PostgreSQL: the session's server, truncated)."""
    async with empty_store(request.param, request, tmp_path / "fleet.db") as opened:
        yield opened


@pytest.fixture
async def runtime(store: TreeStore) -> AsyncIterator[Runtime]:
    """A local runtime on ``store`` with the fleet's agents (the store stays open after it closes)."""
    rt = await Runtime.start(store=store, agents=agents())
    try:
        yield rt
    finally:
        await rt.close()
