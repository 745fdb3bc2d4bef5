"""The built-in backends as mixins: a ``make_runtime`` fixture yielding a ``RuntimeFactory`` of each.

Each ``test_*`` module of the backend suite here lists one subclass per backend,
``class TestLocalSqlite(LocalSqlite, ApprovalsConformance)``, exactly what a third-party backend's
tests do with their own fixture (``tests/testing/conformance/test_third_party_backend.py``). Adding a
built-in backend is one more mixin here and one more line in each module. ``store`` says where the
data lives: one in-memory store object per test (not durable: the restart tests are not listed for
it), a SQLite file in ``tmp_path``, or the session's throwaway PostgreSQL server, truncated per test.

On ``RaySqlite`` models and tools run in a session host process, so the doubles keep their state on
a Ray actor (``board.py``) for the length of the test. A Ray instance costs 2-4 s (a host process
per runtime), so only the classes where the Ray backend differs most run in ``make test``
(``RestartConformance``: host processes restarted under queued turns and decisions;
``DelegationConformance``: children on other hosts); every other Ray class is marked ``slow`` and
runs in ``make test-all``. ``tests/actors``, and the Ray cases of ``tests/mcp``, ``tests/http`` and
``tests/cli``, cover the backend in the suite (approvals and event streams across processes, host
kills, failover).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from repertory import InMemorySessionStore
from repertory.actors import RayOptions
from repertory.testing.conformance import RuntimeFactory
from repertory.testing.pg_temp import TemporaryPostgres
from tests.conftest import truncate_pg
from tests.testing.conformance.probes import probe_for
from tests.tree.board import RayBoard

__all__ = ["LocalMemory", "LocalPostgres", "LocalSqlite", "RaySqlite"]


class LocalMemory:
    """The local backend on one ``InMemorySessionStore`` object per test (not durable)."""

    @pytest.fixture
    async def make_runtime(self) -> AsyncIterator[RuntimeFactory]:
        async with InMemorySessionStore() as store, RuntimeFactory("local", store, probe=probe_for) as factory:
            yield factory


class LocalSqlite:
    """The local backend on a SQLite file in ``tmp_path``."""

    @pytest.fixture
    async def make_runtime(self, tmp_path: Path) -> AsyncIterator[RuntimeFactory]:
        url = f"sqlite:///{tmp_path / 'handles.db'}"  # an absolute path: four slashes
        async with RuntimeFactory("local", url, probe=probe_for) as factory:
            yield factory


class LocalPostgres:
    """The local backend on the session's PostgreSQL server, emptied per test."""

    @pytest.fixture
    async def make_runtime(self, pg_server: TemporaryPostgres) -> AsyncIterator[RuntimeFactory]:
        truncate_pg(pg_server.url)
        async with RuntimeFactory("local", pg_server.url, probe=probe_for) as factory:
            yield factory


class RaySqlite:
    """The Ray backend: one shared host (another process) on a SQLite file; the hosts die with the runtime."""

    @pytest.fixture
    async def make_runtime(self, ray_instance: None, tmp_path: Path) -> AsyncIterator[RuntimeFactory]:
        options = RayOptions(hosts=1, keep_hosts=False)
        async with RuntimeFactory(
            "ray",
            f"sqlite:///{tmp_path / 'handles.db'}",
            start_options={"backend_options": options},
            board=RayBoard.connect(),
            probe=probe_for,
        ) as factory:
            yield factory
