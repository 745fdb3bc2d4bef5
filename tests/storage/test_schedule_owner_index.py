"""An owner's schedules are counted through an index on the owner (schema version 11), on SQLite and PostgreSQL.

The HTTP server bounds each tenant's crons (``ServerLimits.max_crons_per_owner``); counting them
must not read every other tenant's schedules. Here: a file or database at version 10 migrates
with each schedule's owner copied from its record (a ``metadata`` key named ``owner`` is not
one), ``count_schedules`` answers per owner, and the query plan reads the index.
"""

from __future__ import annotations

import contextlib
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from repertory.core.messages import ModelMessage
from repertory.core.timing import ScheduleRecord
from repertory.storage import SqliteSessionStore
from repertory.storage.postgres.schema import MIGRATIONS as PG_MIGRATIONS
from repertory.storage.postgres.store import PostgresSessionStore
from repertory.storage.sqlite.schema import _MIGRATIONS as SQLITE_MIGRATIONS
from repertory.testing.pg_temp import TemporaryPostgres

OLD_VERSION = 10


def _records() -> list[ScheduleRecord]:
    """Alice's two, bob's one, one of the operator's that names ``owner`` in its metadata only."""
    owners: list[tuple[str | None, dict[str, Any]]] = [
        ("alice", {}),
        (None, {"owner": "alice"}),  # metadata, not the schedule's owner
        ("bob", {}),
        ("alice", {}),
    ]
    return [
        ScheduleRecord(
            schedule_id=f"c{i}",
            session_id=None,
            agent="a",
            owner=owner,
            cron="0 * * * *",
            message=ModelMessage.user("tick"),
            next_at=1_000,
            metadata=meta,
        )
        for i, (owner, meta) in enumerate(owners)
    ]


async def _check_counts(store: Any) -> None:
    """What a version-11 store answers for ``_records()`` and one schedule added after the migration."""
    added = _records()[0].model_copy(update={"schedule_id": "new", "owner": "bob"})
    await store.add_schedule(added)
    assert [await store.count_schedules(o) for o in ("alice", "bob", None, "carol")] == [2, 2, 1, 0]


def _write_v10_file(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        for target in range(1, OLD_VERSION + 1):
            for statement in SQLITE_MIGRATIONS[target]:
                conn.execute(statement)
        conn.execute("INSERT INTO repertory_meta (key, value) VALUES ('schema_version', ?)", (str(OLD_VERSION),))
        for r in _records():
            conn.execute(
                "INSERT INTO schedules (schedule_id, session_id, enabled, next_at, record) VALUES (?, NULL, 1, ?, ?)",
                (r.schedule_id, r.next_at, r.model_dump_json()),
            )
        conn.execute("COMMIT")
    finally:
        conn.close()


async def test_a_version_10_sqlite_file_migrates_schedule_owners_and_counts_through_the_index(tmp_path: Path) -> None:
    path = tmp_path / "v10.db"
    _write_v10_file(path)
    store = await SqliteSessionStore.open(path)
    seen: list[str] = []
    try:
        await _check_counts(store)
        for conn in store.connections:
            conn.set_trace_callback(seen.append)
        await store.count_schedules("alice")
    finally:
        await store.close()
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        owners = dict(conn.execute("SELECT schedule_id, owner FROM schedules").fetchall())
        (query,) = [q for q in seen if "COUNT(*) FROM schedules" in q]
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + query)]
    assert owners == {"c0": "alice", "c1": None, "c2": "bob", "c3": "alice", "new": "bob"}
    assert any("USING COVERING INDEX schedules_by_owner" in line for line in plan), plan


@pytest.fixture
def v10_url(pg_server: TemporaryPostgres) -> Iterator[str]:
    """A fresh database of its own at schema version 10, holding ``_records()``; dropped afterwards."""
    name = f"cron_owners_{secrets.token_hex(6)}"
    with psycopg.connect(pg_server.url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = pg_server.url_for(database=name)
    try:
        with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
            conn.execute("CREATE SCHEMA repertory")
            for target in range(1, OLD_VERSION + 1):
                for statement in PG_MIGRATIONS[target]:
                    conn.execute(statement)
            conn.execute("INSERT INTO repertory.meta (key, value) VALUES ('schema_version', %s)", (str(OLD_VERSION),))
            for r in _records():
                conn.execute(
                    "INSERT INTO repertory.schedules (schedule_id, session_id, enabled, next_at, record) "
                    "VALUES (%s, NULL, true, %s, %s)",
                    (r.schedule_id, r.next_at, r.model_dump_json()),
                )
        yield url
    finally:
        with psycopg.connect(pg_server.url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


async def test_a_version_10_postgres_database_migrates_schedule_owners_and_counts_through_the_index(
    v10_url: str,
) -> None:
    store = await PostgresSessionStore.open(v10_url)
    try:
        await _check_counts(store)
    finally:
        await store.close()
    with psycopg.connect(v10_url, autocommit=True) as conn:
        owners: dict[str, str | None] = dict(
            conn.execute("SELECT schedule_id, owner FROM repertory.schedules").fetchall()
        )
        conn.execute("SET enable_seqscan = off")  # five rows cost nothing to scan: the index is the planner's to lose
        plan = [row[0] for row in conn.execute("EXPLAIN SELECT COUNT(*) FROM repertory.schedules WHERE owner = 'a'")]
    assert owners == {"c0": "alice", "c1": None, "c2": "bob", "c3": "alice", "new": "bob"}
    assert any("schedules_by_owner" in line for line in plan), plan
