"""A tenant's sessions are listed through an index on their owner (schema version 10), on SQLite and PostgreSQL.

``page_sessions(owner=)`` (the HTTP server's searches and its web UI under a key) tested every
session's JSON back to the oldest for a tenant with few: 63 ms a page at 100,000 sessions on
SQLite. The owner now has a column, written once at creation (it never changes), with an index
that leaves out the operator's sessions. Here: a file or database at version 9 migrates with each
session's owner copied from its record (a ``metadata`` key named ``owner`` is not one), the
listing and the counts find exactly a tenant's sessions, newest first, and the query plan reads
the index instead of scanning the table, so a change that loses the index fails here rather than
slowing every tenant's page.
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

from repertory.core.ids import new_id
from repertory.core.messages import ModelMessage
from repertory.core.state import RunState
from repertory.core.tree import SessionRecord, TurnRecord
from repertory.storage import SqliteSessionStore
from repertory.storage.postgres.schema import MIGRATIONS as PG_MIGRATIONS
from repertory.storage.postgres.store import PostgresSessionStore
from repertory.storage.sqlite.schema import _MIGRATIONS as SQLITE_MIGRATIONS
from repertory.testing.pg_temp import TemporaryPostgres

OLD_VERSION = 9


def _records() -> list[SessionRecord]:
    """Oldest first: alice's three, bob's one, two of the operator's (one with ``owner`` in its metadata)."""
    owners: list[tuple[str | None, dict[str, Any]]] = [
        ("alice", {}),
        (None, {"owner": "alice"}),  # metadata, not the session's owner
        ("bob", {}),
        ("alice", {"note": '"owner":"alice"'}),
        (None, {}),
        ("alice", {}),
    ]
    return [
        SessionRecord(session_id=f"s{i}", agent="a", root_id=f"s{i}", owner=owner, metadata=meta, created_at=i + 1)
        for i, (owner, meta) in enumerate(owners)
    ]


async def _check_listing(store: Any) -> None:
    """What every version-10 store answers for ``_records()`` and one session created after the migration."""
    await store.create_session(SessionRecord(session_id="new", agent="a", root_id="new", owner="bob"))
    assert [r.session_id for r in await store.page_sessions(owner="alice")] == ["s5", "s3", "s0"]
    assert [r.session_id for r in await store.page_sessions(owner="alice", limit=2)] == ["s5", "s3"]
    assert [r.session_id for r in await store.page_sessions(owner="alice", before="s3")] == ["s0"]
    assert [r.session_id for r in await store.page_sessions(owner="bob")] == ["new", "s2"]
    assert [r.session_id for r in await store.page_sessions(owner="carol")] == []
    assert [r.session_id for r in await store.page_sessions(owner="alice", status="idle")] == ["s5", "s3", "s0"]
    assert len(await store.page_sessions()) == 7  # no owner asked: everyone's
    assert await store.session_counts(owner="alice") == {"running": 0, "suspended": 0, "error": 0}


# -- SQLite ---------------------------------------------------------------------------------------------


def _write_v9_file(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        for target in range(1, OLD_VERSION + 1):
            for statement in SQLITE_MIGRATIONS[target]:
                conn.execute(statement)
        conn.execute("INSERT INTO repertory_meta (key, value) VALUES ('schema_version', ?)", (str(OLD_VERSION),))
        for r in _records():
            conn.execute(
                "INSERT INTO sessions (session_id, parent_id, created_at, record) VALUES (?, NULL, ?, ?)",
                (r.session_id, r.created_at, r.model_dump_json()),
            )
            conn.execute(
                "INSERT INTO threads (thread_id, head, created_at, updated_at) VALUES (?, NULL, ?, ?)",
                (r.session_id, r.created_at, r.created_at),
            )
        conn.execute("COMMIT")
    finally:
        conn.close()


async def test_a_version_9_sqlite_file_migrates_its_owners_and_lists_a_tenant_by_them(tmp_path: Path) -> None:
    path = tmp_path / "v9.db"
    _write_v9_file(path)
    store = await SqliteSessionStore.open(path)
    try:
        await _check_listing(store)
    finally:
        await store.close()
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        owners = dict(conn.execute("SELECT session_id, owner FROM sessions").fetchall())
    assert owners == {"s0": "alice", "s1": None, "s2": "bob", "s3": "alice", "s4": None, "s5": "alice", "new": "bob"}


async def test_sqlite_lists_a_tenant_through_the_owner_index_not_a_scan(tmp_path: Path) -> None:
    path = tmp_path / "plan.db"
    store = await SqliteSessionStore.open(path)
    seen: list[str] = []
    try:
        for record in _records():
            await store.create_session(record)
        await store.page_sessions(owner="alice")  # opens the reader connection the listing runs on
        for conn in store.connections:
            conn.set_trace_callback(seen.append)
        for status in (None, "idle", "suspended"):
            await store.page_sessions(owner="alice", before="s3", roots_only=True, status=status)
    finally:
        await store.close()
    listings = [q for q in seen if q.lstrip().startswith("SELECT s.session_id, s.record FROM sessions s")]
    assert len(listings) == 3, seen
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        for query in listings:  # as the store ran it, its parameters bound
            plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + query)]
            assert plan[0].startswith("SEARCH s USING INDEX sessions_by_owner"), plan
            assert not any("TEMP B-TREE" in line for line in plan), plan  # creation order from the index: no sort


# -- PostgreSQL -----------------------------------------------------------------------------------------


@pytest.fixture
def v9_url(pg_server: TemporaryPostgres) -> Iterator[str]:
    """A fresh database of its own at schema version 9, holding ``_records()``; dropped afterwards."""
    name = f"owners_{secrets.token_hex(6)}"
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
                    "INSERT INTO repertory.sessions (session_id, parent_id, created_at, record) "
                    "VALUES (%s, NULL, %s, %s)",
                    (r.session_id, r.created_at, r.model_dump_json()),
                )
                conn.execute(
                    "INSERT INTO repertory.threads (thread_id, head, created_at, updated_at) VALUES (%s, NULL, %s, %s)",
                    (r.session_id, r.created_at, r.created_at),
                )
        yield url
    finally:
        with psycopg.connect(pg_server.url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


async def test_a_version_9_postgres_database_migrates_its_owners_and_lists_a_tenant_by_them(
    v9_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, Any]] = []
    execute = psycopg.AsyncCursor.execute

    async def capturing(self: Any, query: Any, params: Any = None, *args: Any, **kwargs: Any) -> Any:
        listing = isinstance(query, str) and query.startswith("SELECT s.session_id, s.record FROM repertory.sessions s")
        if listing and "owner" in query:
            seen.append((query, params))
        return await execute(self, query, params, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncCursor, "execute", capturing)
    store = await PostgresSessionStore.open(v9_url)
    try:
        await _check_listing(store)
    finally:
        await store.close()
    assert len(seen) == 6  # the tenants' pages of ``_check_listing``
    with psycopg.connect(v9_url, autocommit=True) as conn:
        owners: dict[str, str | None] = dict(
            conn.execute("SELECT session_id, owner FROM repertory.sessions").fetchall()
        )
        # Seven rows cost the planner nothing to scan: with the scan made dear, the index is its to lose.
        conn.execute("SET enable_seqscan = off")
        plans = [[row[0] for row in conn.execute("EXPLAIN " + query, params)] for query, params in seen]
    assert owners == {"s0": "alice", "s1": None, "s2": "bob", "s3": "alice", "s4": None, "s5": "alice", "new": "bob"}
    for plan in plans:
        assert any("sessions_by_owner" in line for line in plan), plan
        assert not any("Sort" in line for line in plan), plan


# -- counts -----------------------------------------------------------------------------------------

_STATES = ("idle", "suspended", "error", "superseded", "busy", "tied")
"""What session ``i`` is made of (``i % 6``): see ``_build``."""


async def _build(store: Any, owner: str | None, count: int) -> dict[str, int]:
    """``count`` sessions of ``owner`` in every state the counts tell apart; the counts they should give."""
    expected = {"running": 0, "suspended": 0, "error": 0}
    for i in range(count):
        sid = new_id()
        await store.create_session(SessionRecord(session_id=sid, agent="a", root_id=sid, owner=owner))
        state = _STATES[i % len(_STATES)]
        run = RunState(run_id=new_id(), thread_id=sid, agent="a", updated_at=1_000)
        if state in ("suspended", "superseded", "busy"):
            await store.save(run.model_copy(update={"status": "suspended"}))
        if state in ("error", "tied"):
            await store.save(run.model_copy(update={"status": "error"}))
        if state == "superseded":  # a later run ended: the session rests idle
            await store.save(RunState(run_id=new_id(), thread_id=sid, agent="a", status="done", updated_at=2_000))
        if state == "tied":  # written after the failed run in the same millisecond: the later write wins
            await store.save(RunState(run_id=new_id(), thread_id=sid, agent="a", status="done", updated_at=1_000))
        if state == "busy":  # a turn open on it: running, whatever its runs say
            message = ModelMessage.user("go")
            await store.add_turn(TurnRecord(submission_id=new_id(), session_id=sid, message=message, run_id=new_id()))
        key = {"suspended": "suspended", "error": "error", "busy": "running"}.get(state)
        if key is not None:
            expected[key] += 1
    return expected


async def _check_counts(store: Any) -> None:
    few = await _build(store, "few", 12)
    many = await _build(store, "many", 1_002)  # over the 1,000 below which SQLite counts from the owner's sessions
    operator = await _build(store, None, 6)
    assert await store.session_counts(owner="few") == few
    assert await store.session_counts(owner="many") == many
    assert await store.session_counts(owner="nobody") == {"running": 0, "suspended": 0, "error": 0}
    assert await store.session_counts() == {k: few[k] + many[k] + operator[k] for k in few}


async def test_sqlite_counts_a_tenant_the_same_from_its_sessions_or_from_the_resting_runs(tmp_path: Path) -> None:
    store = await SqliteSessionStore.open(tmp_path / "counts.db")
    try:
        await _check_counts(store)
    finally:
        await store.close()


async def test_postgres_counts_a_tenant_as_sqlite_does(v9_url: str) -> None:
    store = await PostgresSessionStore.open(v9_url)  # migrated, with _records() in it (none resting or busy)
    try:
        await _check_counts(store)
    finally:
        await store.close()
