"""Fixtures shared by every test package: the PostgreSQL server and the local Ray the suite starts for itself."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest

from repertory import InMemorySessionStore
from repertory.storage import SqliteSessionStore, TreeStore
from repertory.storage.postgres.store import PostgresSessionStore
from repertory.testing.pg_temp import TemporaryPostgres

_TABLES = (
    "repertory.runs, repertory.threads, repertory.history_entries, repertory.history_revisions, "
    "repertory.sessions, repertory.turns, repertory.events, "
    "repertory.memory_messages, repertory.memory_resources, repertory.working_memory, "
    "repertory.timers, repertory.schedules, repertory.webhooks, "
    "repertory.history_pins, repertory.history_shared_entries, repertory.history_entry_namers, "
    "repertory.decision_requests, repertory.host_beats, repertory.ledgers"
)


@pytest.fixture(scope="session")
def ray_instance() -> Iterator[None]:
    """A local Ray for the tests that need it, started once with small resources.

    Only what this fixture started is stopped (Ray is never stopped machine-wide); the detached
    actors tests leave behind die with this instance.
    """
    import ray

    started = False
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        started = True
    try:
        yield
    finally:
        if started:
            ray.shutdown()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[TemporaryPostgres]:
    """One throwaway PostgreSQL 15 server for the whole run, on a free loopback port.

    A missing server binary fails the tests that need it with a clear message (never a skip):
    the suite is meant to prove the PostgreSQL store on every machine it runs on.
    """
    server = TemporaryPostgres().start()
    try:
        yield server
    finally:
        server.cleanup()


def truncate_pg(url: str) -> None:
    """Empty repertory's tables (the schema stays), so each test starts from a clean database."""
    with psycopg.connect(url, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass('repertory.runs') IS NOT NULL").fetchone()
        if exists and exists[0]:
            conn.execute(f"TRUNCATE {_TABLES}")


@contextlib.asynccontextmanager
async def empty_store(backend: str, request: pytest.FixtureRequest, path: Path) -> AsyncIterator[TreeStore]:
    """An empty store of ``backend``, closed on exit: ``memory``, ``sqlite`` at ``path``, ``postgres``.

    For fixtures parametrised over the backends; PostgreSQL is the session's server, truncated.
    """
    opened: TreeStore
    if backend == "memory":
        opened = InMemorySessionStore()
    elif backend == "sqlite":
        opened = await SqliteSessionStore.open(path)
    else:
        server: TemporaryPostgres = request.getfixturevalue("pg_server")
        truncate_pg(server.url)
        opened = await PostgresSessionStore.open(server.url)
    try:
        yield opened
    finally:
        await opened.close()
