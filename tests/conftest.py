"""Fixtures shared by every test package: the PostgreSQL server the suite starts for itself."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from repertory.storage.pg_temp import TemporaryPostgres

_TABLES = (
    "repertory.runs, repertory.threads, repertory.history_entries, repertory.history_revisions, "
    "repertory.sessions, repertory.turns, repertory.events, "
    "repertory.memory_messages, repertory.memory_resources, repertory.working_memory"
)


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
