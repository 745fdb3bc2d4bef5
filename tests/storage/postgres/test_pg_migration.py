"""A PostgreSQL database at schema version 1 opens migrated to the current schema, its data intact.

Each test gets a database of its own on the shared server, built by hand from
``_pg_schema.MIGRATIONS[1]`` (exactly what a version-1 store created, commit function included) and
filled with raw SQL, so nothing of the current store touches it before ``PostgresSessionStore.open``.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from repertory import CommitConflict, MessageHistory, ModelMessage, RunState, ThreadState
from repertory.core.tree import Lineage, SessionEvent, SessionRecord, TurnRecord
from repertory.storage.postgres._inbox_tables import PENDING_SQL
from repertory.storage.postgres.schema import MIGRATIONS, SCHEMA_VERSION
from repertory.storage.postgres.store import PostgresSessionStore
from repertory.testing.conformance.inbox import decision_request
from repertory.testing.pg_temp import TemporaryPostgres
from tests.records import history_of

V2_TABLES = {"sessions", "turns", "events"}
INBOX_TABLES = {"decision_requests", "host_beats"}
"""Schema version 12: the decision inbox (``repertory.core.inbox``)."""


@pytest.fixture
def v1_url(pg_server: TemporaryPostgres) -> Iterator[str]:
    """The URL of a fresh database of its own, dropped afterwards."""
    name = f"migration_{secrets.token_hex(6)}"
    with psycopg.connect(pg_server.url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield pg_server.url_for(database=name)
    finally:
        with psycopg.connect(pg_server.url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def tables(url: str) -> set[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'repertory'")
        return {r[0] for r in rows.fetchall()}


def schema_version(url: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT value FROM repertory.meta WHERE key = 'schema_version'").fetchone()
    assert row is not None
    return str(row[0])


def commit_functions(url: str) -> list[int]:
    """The argument counts of every ``repertory.repertory_commit`` overload."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT p.pronargs FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace "
            "WHERE n.nspname = 'repertory' AND p.proname = 'repertory_commit'"
        ).fetchall()
    return sorted(int(r[0]) for r in rows)


def write_v1_database(url: str) -> tuple[RunState, ThreadState, MessageHistory]:
    """A version-1 schema holding one thread ``t`` (two messages) and one run ``r`` on it."""
    history = history_of("hello from v1", "ünïcödé 🎉")
    run = RunState(
        run_id="r",
        thread_id="t",
        status="suspended",
        history_revision_id=history.revision_id,
        scratch={"k": [1, "two"]},
        created_at=100,
        updated_at=200,
    )
    thread = ThreadState(thread_id="t", history_revision_id=history.revision_id, created_at=100, updated_at=200)
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        conn.execute("CREATE SCHEMA repertory")
        for statement in MIGRATIONS[1]:
            conn.execute(statement)
        conn.execute("INSERT INTO repertory.meta (key, value) VALUES ('schema_version', '1')")
        for entry in history.entries:
            conn.execute(
                "INSERT INTO repertory.history_entries (id, created_at, message) VALUES (%s, %s, %s)",
                (entry.id, entry.created_at, entry.message.model_dump_json()),
            )
        for rev in history.revisions:
            conn.execute(
                "INSERT INTO repertory.history_revisions (id, parent_id, entry_id, depth, created_at) "
                "VALUES (%s, %s, %s, %s, %s)",
                (rev.id, rev.parent_id, rev.entry_id, rev.depth, rev.created_at),
            )
        conn.execute(
            "INSERT INTO repertory.threads (thread_id, head, created_at, updated_at) VALUES (%s, %s, %s, %s)",
            (thread.thread_id, thread.history_revision_id, thread.created_at, thread.updated_at),
        )
        conn.execute(
            "INSERT INTO repertory.runs (run_id, thread_id, status, updated_at, write_seq, token, state) "
            "VALUES (%s, %s, %s, %s, nextval('repertory.runs_write_seq'), NULL, %s)",
            (run.run_id, run.thread_id, run.status, run.updated_at, run.model_dump_json()),
        )
    return run, thread, history


def test_the_hand_built_database_is_at_version_one(v1_url: str) -> None:
    write_v1_database(v1_url)
    assert schema_version(v1_url) == "1"
    assert not tables(v1_url) & V2_TABLES
    assert commit_functions(v1_url) == [19]
    assert SCHEMA_VERSION > 1


async def test_a_version_one_database_is_migrated_with_its_data_intact(v1_url: str) -> None:
    run, thread, history = write_v1_database(v1_url)

    async with await PostgresSessionStore.open(v1_url) as store:
        assert schema_version(v1_url) == str(SCHEMA_VERSION)
        assert tables(v1_url) >= V2_TABLES | INBOX_TABLES
        assert commit_functions(v1_url) == [24]  # the version-1 function is gone, not overloaded

        assert await store.load_run("r") == run
        assert await store.list_runs() == [run]
        assert await store.load_thread("t") == thread
        loaded = await store.load_history(history.revision_id or "")
        assert loaded is not None
        assert loaded.messages == history.messages
        assert [r.id for r in loaded.revisions] == [r.id for r in history.revisions]

        # The old thread keeps taking commits, now with events, through the new commit function.
        base = history.revision_id
        history.append(ModelMessage.assistant("after the migration"))
        step = run.model_copy(update={"status": "running", "history_revision_id": history.revision_id})
        new_thread = thread.model_copy(update={"history_revision_id": history.revision_id, "updated_at": 300})
        first = SessionEvent(session_id="t", seq=1, type="checkpoint", data={"step": 1})
        await store.commit_session(run=step, thread=new_thread, history=history, base_revision_id=base, events=[first])
        assert await store.load_events("t") == [first]
        assert await store.load_thread("t") == new_thread
        assert await store.load_run("r") == step
        # The new function still guards the thread head.
        with pytest.raises(CommitConflict):
            await store.commit_session(run=step, thread=new_thread, history=history, base_revision_id=base)

        # A session cannot take over the old thread; new sessions, turns and events work.
        with pytest.raises(CommitConflict):
            await store.create_session(SessionRecord(session_id="t", agent="a", root_id="t"))
        await store.create_session(SessionRecord(session_id="s", agent="a", root_id="s", created_at=1))
        child = SessionRecord(
            session_id="c", agent="a", root_id="s", lineage=Lineage(kind="spawned", parent_id="s"), created_at=2
        )
        await store.create_session(child)
        assert await store.list_children("s") == [child]
        turn = await store.add_turn(
            TurnRecord(submission_id="u1", session_id="s", message=ModelMessage.user("hi"), run_id="run-u1")
        )
        assert turn.seq == 1
        assert await store.list_open_turns() == [turn]
        await store.append_events([SessionEvent(session_id="s", seq=1, type="turn.started")])
        assert await store.last_event_seq("s") == 1

    # Reopening a migrated database migrates nothing and keeps everything.
    async with await PostgresSessionStore.open(v1_url) as store:
        assert schema_version(v1_url) == str(SCHEMA_VERSION)
        assert commit_functions(v1_url) == [24]
        assert await store.load_run("r") == step
        assert await store.load_session("c") == child
        assert await store.load_turn("u1") == turn
        assert await store.last_event_seq("t") == 1


async def test_stores_opening_a_version_one_database_at_once_migrate_it_once(v1_url: str) -> None:
    run, _, _ = write_v1_database(v1_url)
    opened = await asyncio.gather(*(PostgresSessionStore.open(v1_url) for _ in range(4)), return_exceptions=True)
    stores = [s for s in opened if isinstance(s, PostgresSessionStore)]
    try:
        assert [e for e in opened if isinstance(e, BaseException)] == []
        assert schema_version(v1_url) == str(SCHEMA_VERSION)
        assert commit_functions(v1_url) == [24]
        for store in stores:
            assert await store.load_run("r") == run
        await stores[0].create_session(SessionRecord(session_id="s", agent="a", root_id="s"))
        assert await stores[-1].load_session("s") is not None
    finally:
        for store in stores:
            await store.close()


async def test_a_version_11_database_gains_the_decision_inbox_whose_pending_query_walks_its_index(
    v1_url: str,
) -> None:
    with psycopg.connect(v1_url, autocommit=True) as conn, conn.transaction():
        conn.execute("CREATE SCHEMA repertory")
        for target in range(1, 12):
            for statement in MIGRATIONS[target]:
                conn.execute(statement)
        conn.execute("INSERT INTO repertory.meta (key, value) VALUES ('schema_version', '11')")
    assert not tables(v1_url) & INBOX_TABLES

    async with await PostgresSessionStore.open(v1_url) as store:
        assert SCHEMA_VERSION >= 12 and schema_version(v1_url) == str(SCHEMA_VERSION)
        assert tables(v1_url) >= INBOX_TABLES
        await store.add_decision_request(decision_request("late", 200))
        await store.add_decision_request(decision_request("early", 100))
        await store.beat_host("h", 5)
        assert [r.request_id for r in await store.pending_decision_requests(1_000, 10)] == ["early", "late"]
        assert await store.live_hosts(5) == ["h"]

    # The partial index gives pending rows in the query's order: walked from its start, no sort. (Two
    # rows cost nothing to scan or sort: the other plans are turned off, the index is the planner's to lose.)
    with psycopg.connect(v1_url, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_bitmapscan = off")
        plan = [str(row[0]) for row in conn.execute("EXPLAIN " + PENDING_SQL, (1_000, 10))]
    assert any("Index Scan using decision_requests_pending" in line for line in plan), plan
    assert not any("Sort" in line for line in plan), plan
