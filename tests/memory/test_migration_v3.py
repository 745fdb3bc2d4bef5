"""Schema version 2 -> 3 (the memory tables) keeps every row, on SQLite and on PostgreSQL.

The version-2 databases are built by hand: version 1 by the existing migration tests' builders,
then migration 2's statements and a session with an event, all as raw SQL, so nothing of the
current store touches them before ``open`` does.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import psycopg
import pytest

from repertory import ModelMessage, StoreError
from repertory.core.tree import SessionEvent, SessionRecord
from repertory.memory import StoreMemory
from repertory.storage import SqliteSessionStore
from repertory.storage.postgres.schema import MIGRATIONS as PG_MIGRATIONS
from repertory.storage.postgres.schema import SCHEMA_VERSION as PG_SCHEMA_VERSION
from repertory.storage.postgres.store import PostgresSessionStore
from repertory.storage.sqlite.schema import _MIGRATIONS, SCHEMA_VERSION
from tests.storage.postgres.test_pg_migration import v1_url, write_v1_database
from tests.storage.sqlite.test_sqlite_migration import schema_version, tables, write_v1_file

__all__ = ["v1_url"]  # the fixture, re-exported so pytest finds it here

MEMORY_TABLES = {"memory_messages", "memory_resources", "working_memory"}
SESSION = SessionRecord(session_id="s", agent="a", root_id="s", title="kept", created_at=7)
EVENT = SessionEvent(session_id="s", seq=1, type="turn.started", at=8, data={"n": 1})


def write_v2_file(path: Path, *, extra: list[str] | None = None) -> None:
    write_v1_file(path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        for statement in _MIGRATIONS[2]:
            conn.execute(statement)
        conn.execute("UPDATE repertory_meta SET value = '2' WHERE key = 'schema_version'")
        conn.execute(
            "INSERT INTO sessions (session_id, parent_id, created_at, record) VALUES (?, NULL, ?, ?)",
            (SESSION.session_id, SESSION.created_at, SESSION.model_dump_json()),
        )
        conn.execute(
            "INSERT INTO events (session_id, seq, submission_id, type, at, data) VALUES (?, ?, NULL, ?, ?, ?)",
            (EVENT.session_id, EVENT.seq, EVENT.type, EVENT.at, '{"n": 1}'),
        )
        for statement in extra or []:
            conn.execute(statement)
        conn.execute("COMMIT")
    finally:
        conn.close()


def test_the_hand_built_file_is_at_version_two(tmp_path: Path) -> None:
    write_v2_file(tmp_path / "v2.db")
    assert schema_version(tmp_path / "v2.db") == "2"
    assert not tables(tmp_path / "v2.db") & MEMORY_TABLES
    assert SCHEMA_VERSION >= 3  # later versions (listing, time, deletion) come on top


async def test_a_version_two_sqlite_file_gains_the_memory_tables_and_keeps_its_data(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    write_v2_file(path)
    async with await SqliteSessionStore.open(path) as store:
        assert schema_version(path) == str(SCHEMA_VERSION)
        assert tables(path) >= MEMORY_TABLES
        run = await store.load_run("r")
        assert run is not None and run.scratch == {"k": [1, "two"]}
        thread = await store.load_thread("t")
        assert thread is not None and thread.history_revision_id is not None
        history = await store.load_history(thread.history_revision_id)
        assert history is not None and [m.text for m in history.messages] == ["hello from v1", "ünïcödé 🎉"]
        assert await store.load_session("s") == SESSION
        assert await store.load_events("s") == [EVENT]
        memory = StoreMemory(store, resource="ada", min_score=0.0)
        await memory.append(thread_id="t", messages=[ModelMessage.user("first memory after the upgrade")])
        await memory.set_working_memory({"upgraded": True})
        await memory.close()
    async with await SqliteSessionStore.open(path) as store:
        assert schema_version(path) == str(SCHEMA_VERSION)
        memory = StoreMemory(store, resource="ada", min_score=0.0)
        recalled = await memory.recall(thread_id="other", query=[ModelMessage.user("memory upgrade")])
        assert [m.text for m in recalled.messages] == ["first memory after the upgrade"]
        assert recalled.working_memory == {"upgraded": True}
        assert await store.load_session("s") == SESSION


async def test_a_failed_migration_three_leaves_the_file_at_version_two(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    write_v2_file(path, extra=["CREATE TABLE working_memory (x)"])
    with pytest.raises(StoreError):
        await SqliteSessionStore.open(path)
    assert schema_version(path) == "2"
    assert "memory_messages" not in tables(path)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        assert conn.execute("SELECT count(*) FROM events").fetchone() == (1,)


async def test_a_version_two_postgres_database_gains_the_memory_tables_and_keeps_its_data(v1_url: str) -> None:
    write_v1_database(v1_url)
    with psycopg.connect(v1_url, autocommit=True) as conn, conn.transaction():
        for statement in PG_MIGRATIONS[2]:
            conn.execute(statement)
        conn.execute("UPDATE repertory.meta SET value = '2' WHERE key = 'schema_version'")
        conn.execute(
            "INSERT INTO repertory.sessions (session_id, parent_id, created_at, record) VALUES (%s, NULL, %s, %s)",
            (SESSION.session_id, SESSION.created_at, SESSION.model_dump_json()),
        )
    assert PG_SCHEMA_VERSION >= 3  # version 4 (group commit's batch function) comes on top
    async with await PostgresSessionStore.open(v1_url) as store:
        with psycopg.connect(v1_url, autocommit=True) as conn:
            row = conn.execute("SELECT value FROM repertory.meta WHERE key = 'schema_version'").fetchone()
            found = conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'repertory'"
            ).fetchall()
        assert row == (str(PG_SCHEMA_VERSION),)
        assert {r[0] for r in found} >= MEMORY_TABLES
        run = await store.load_run("r")
        assert run is not None and run.scratch == {"k": [1, "two"]}
        assert await store.load_session("s") == SESSION
        memory = StoreMemory(store, resource="ada")
        await memory.append(thread_id="t", messages=[ModelMessage.user("stored after the upgrade")])
        await memory.close()
        assert [r.text for r in await store.recent_memory("ada", limit=5)] == ["stored after the upgrade"]
