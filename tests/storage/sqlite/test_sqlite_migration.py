"""A SQLite file written at schema version 1 opens migrated to the current schema, its data intact.

The version-1 file is built by hand from ``_sqlite_schema._MIGRATIONS[1]`` (exactly what a
version-1 store created) and filled with raw SQL, so nothing of the current store touches it
before ``SqliteSessionStore.open`` does.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from repertory import CommitConflict, MessageHistory, ModelMessage, RunState, StoreError, ThreadState
from repertory.core.tree import Lineage, SessionEvent, SessionRecord, TurnRecord
from repertory.storage import SqliteSessionStore
from repertory.storage.sqlite._inbox_tables import PENDING_SQL
from repertory.storage.sqlite.schema import _MIGRATIONS, SCHEMA_VERSION
from repertory.testing.conformance.inbox import decision_request
from tests.records import history_of

V2_TABLES = {"sessions", "turns", "events"}
INBOX_TABLES = {"decision_requests", "host_beats"}
"""Schema version 12: the decision inbox (``repertory.core.inbox``)."""


def tables(path: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def schema_version(path: Path) -> str:
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        row = conn.execute("SELECT value FROM repertory_meta WHERE key = 'schema_version'").fetchone()
    assert row is not None
    return str(row[0])


def write_old_history(
    conn: sqlite3.Connection, version: int, history: MessageHistory, writer: str | None = None
) -> None:
    """In the caller's transaction: the schema of ``version`` from its own migrations, then ``history``'s rows.

    Entries and revisions go in with raw SQL as that version's store wrote them; ``writer`` is the
    revisions' ``thread_id`` (version 6 and later).
    """
    for target in range(1, version + 1):
        for statement in _MIGRATIONS[target]:
            conn.execute(statement)
    conn.execute("INSERT INTO repertory_meta (key, value) VALUES ('schema_version', ?)", (str(version),))
    for entry in history.entries:
        conn.execute(
            "INSERT INTO history_entries (id, created_at, message) VALUES (?, ?, ?)",
            (entry.id, entry.created_at, entry.message.model_dump_json()),
        )
    for rev in history.revisions:
        row = (rev.id, rev.parent_id, rev.entry_id, rev.depth, rev.created_at)
        if writer is None:
            conn.execute(
                "INSERT INTO history_revisions (id, parent_id, entry_id, depth, created_at) VALUES (?, ?, ?, ?, ?)", row
            )
        else:
            conn.execute(
                "INSERT INTO history_revisions (id, parent_id, entry_id, depth, created_at, thread_id) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (*row, writer),
            )


def write_v1_file(path: Path, *, extra: Sequence[str] = ()) -> tuple[RunState, ThreadState, MessageHistory]:
    """A version-1 database holding one thread ``t`` (two messages) and one run ``r`` on it."""
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
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        write_old_history(conn, 1, history)
        conn.execute(
            "INSERT INTO threads (thread_id, head, created_at, updated_at) VALUES (?, ?, ?, ?)",
            (thread.thread_id, thread.history_revision_id, thread.created_at, thread.updated_at),
        )
        conn.execute(
            "INSERT INTO runs (run_id, thread_id, status, updated_at, write_seq, token, state) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (run.run_id, run.thread_id, run.status, run.updated_at, 1, None, run.model_dump_json()),
        )
        for statement in extra:
            conn.execute(statement)
        conn.execute("COMMIT")
    finally:
        conn.close()
    return run, thread, history


def test_the_hand_built_file_is_at_version_one(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    write_v1_file(path)
    assert schema_version(path) == "1"
    assert not tables(path) & V2_TABLES
    assert SCHEMA_VERSION > 1


async def test_a_version_one_file_is_migrated_with_its_data_intact(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    run, thread, history = write_v1_file(path)

    async with await SqliteSessionStore.open(path) as store:
        assert schema_version(path) == str(SCHEMA_VERSION)
        assert tables(path) >= V2_TABLES | INBOX_TABLES

        assert await store.load_run("r") == run
        assert await store.list_runs() == [run]
        assert await store.load_thread("t") == thread
        loaded = await store.load_history(history.revision_id or "")
        assert loaded is not None
        assert loaded.messages == history.messages
        assert [r.id for r in loaded.revisions] == [r.id for r in history.revisions]

        # The old thread keeps taking commits, now with events.
        base = history.revision_id
        history.append(ModelMessage.assistant("after the migration"))
        step = run.model_copy(update={"status": "running", "history_revision_id": history.revision_id})
        new_thread = thread.model_copy(update={"history_revision_id": history.revision_id, "updated_at": 300})
        first = SessionEvent(session_id="t", seq=1, type="checkpoint", data={"step": 1})
        await store.commit_session(run=step, thread=new_thread, history=history, base_revision_id=base, events=[first])
        assert await store.load_events("t") == [first]
        assert (await store.load_thread("t")) == new_thread

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

    # Reopening a migrated file migrates nothing and keeps everything.
    async with await SqliteSessionStore.open(path) as store:
        assert schema_version(path) == str(SCHEMA_VERSION)
        assert await store.load_run("r") == step
        assert await store.load_session("c") == child
        assert await store.load_turn("u1") == turn
        assert await store.last_event_seq("t") == 1


async def test_a_migration_that_fails_leaves_the_file_at_version_one(tmp_path: Path) -> None:
    # A table in the way of migration 2: the migration must roll back whole, not stop halfway.
    path = tmp_path / "v1.db"
    run, _, _ = write_v1_file(path, extra=["CREATE TABLE events (x)"])

    with pytest.raises(StoreError):
        await SqliteSessionStore.open(path)

    assert schema_version(path) == "1"
    assert "sessions" not in tables(path) and "turns" not in tables(path)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        row = conn.execute("SELECT state FROM runs WHERE run_id = 'r'").fetchone()
    assert row is not None and RunState.model_validate_json(row[0]) == run


async def test_a_version_11_file_gains_the_decision_inbox_whose_pending_query_walks_its_index(tmp_path: Path) -> None:
    path = tmp_path / "v11.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        for target in range(1, 12):
            for statement in _MIGRATIONS[target]:
                conn.execute(statement)
        conn.execute("INSERT INTO repertory_meta (key, value) VALUES ('schema_version', '11')")
        conn.execute("COMMIT")
    finally:
        conn.close()
    assert not tables(path) & INBOX_TABLES

    async with await SqliteSessionStore.open(path) as store:
        assert SCHEMA_VERSION >= 12 and schema_version(path) == str(SCHEMA_VERSION)
        assert tables(path) >= INBOX_TABLES
        await store.add_decision_request(decision_request("late", 200))
        await store.add_decision_request(decision_request("early", 100))
        await store.beat_host("h", 5)
        assert [r.request_id for r in await store.pending_decision_requests(1_000, 10)] == ["early", "late"]
        assert await store.live_hosts(5) == ["h"]

    # Pending rows in the query's order, straight from the partial index: no sort, no other row read.
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + PENDING_SQL, (1_000, 10))]
    assert plan == ["SCAN decision_requests USING INDEX decision_requests_pending"], plan
