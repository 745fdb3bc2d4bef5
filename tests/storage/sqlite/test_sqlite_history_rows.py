"""Where ``SqliteSessionStore`` keeps a message (schema version 7, ``repertory.storage.sqlite._history``).

A step's revision carries its message; a commit that does not grow from its base (a thread's first,
a compaction re-adding the messages it keeps) keeps its entries in ``history_entry_rows``, copying a
message another revision holds inline (``copy_of``). These tests look at the rows, then check what
every reader sees: lineages, the ``history_entries`` view, deletion's counts and an export, each
entry once. A version-6 file is migrated without copying a message, and an export position taken
before the migration still reads exactly the rows written after it.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import duckdb

from repertory import MessageHistory, ModelMessage
from repertory.core.tree import SessionRecord
from repertory.storage import SqliteSessionStore
from repertory.storage.export import export_parquet, reader_for
from repertory.storage.sqlite.schema import SCHEMA_VERSION
from tests.records import commit, history_of
from tests.storage.sqlite.test_sqlite_migration import write_old_history


def _rows(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        return conn.execute(sql, params).fetchall()


async def _compacted(store: SqliteSessionStore) -> tuple[MessageHistory, list[str]]:
    """Thread ``t``: a first commit of two messages, two steps, then a summary inserted after the first message."""
    history = history_of("one", "two")
    await commit(store, history)
    for text in ("three", "four"):
        base = history.revision_id
        history.append(ModelMessage.user(text))
        await commit(store, history, base=base)
    base = history.revision_id
    first = history.lineage()[0].id
    history.insert(ModelMessage.user("summary"), after=first)
    await commit(store, history, base=base)
    return history, [m.text for m in history.messages]


async def test_a_step_keeps_its_message_in_its_revision(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with await SqliteSessionStore.open(path) as store:
        history = history_of("one", "two")
        await commit(store, history)  # a thread's first commit: entries of their own
        base = history.revision_id
        history.append(ModelMessage.assistant("three"))
        await commit(store, history, base=base)
        loaded = await store.load_history(history.revision_id or "")
        assert loaded is not None and [m.text for m in loaded.messages] == ["one", "two", "three"]
    assert _rows(path, "SELECT count(*) FROM history_entry_rows") == [(2,)]
    inline = _rows(path, "SELECT entry_id, message IS NOT NULL FROM history_revisions ORDER BY depth")
    assert [flag for _, flag in inline] == [0, 0, 1]
    assert _rows(path, "SELECT count(*) FROM history_entries") == [(3,)]


async def test_a_compaction_copies_the_inline_messages_it_re_adds_once(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with await SqliteSessionStore.open(path) as store:
        history, texts = await _compacted(store)
        assert texts == ["one", "summary", "two", "three", "four"]
        fresh = await SqliteSessionStore.open(path, history_cache_bytes=0)
        async with fresh:
            loaded = await fresh.load_history(history.revision_id or "")
            assert loaded is not None and [m.text for m in loaded.messages] == texts
        # The old head still reads as it was.
        old = await store.load_history(history.lineage()[0].id)
        assert old is not None and [m.text for m in old.messages] == ["one"]
    # "three" and "four" were inline: each is copied once, marked as the copy it is.
    copies = _rows(path, "SELECT e.id FROM history_entry_rows AS e WHERE copy_of IS NOT NULL")
    assert len(copies) == 2
    # Five entries (four messages and the summary), each once in the view, whichever place holds it.
    assert _rows(path, "SELECT count(*), count(DISTINCT id) FROM history_entries") == [(5, 5)]


async def test_an_export_writes_each_entry_once_and_then_only_what_is_new(tmp_path: Path) -> None:
    path, out = tmp_path / "s.db", tmp_path / "export"
    async with await SqliteSessionStore.open(path) as store:
        history, _ = await _compacted(store)
        await export_parquet(store, out)
        base = history.revision_id
        history.append(ModelMessage.assistant("five"))
        await commit(store, history, base=base)
        await export_parquet(store, out)
    entries = duckdb.execute(f"SELECT entry_id FROM read_parquet('{out / 'entries'}/*.parquet')").fetchall()
    revisions = duckdb.execute(f"SELECT revision_id FROM read_parquet('{out / 'revisions'}/*.parquet')").fetchall()
    assert len(entries) == len({e for (e,) in entries}) == 6
    # Two first, two steps, the summary and the three it re-added, one step after it.
    assert len(revisions) == len({r for (r,) in revisions}) == 9
    assert {r for (r,) in revisions} == {r[0] for r in _rows(path, "SELECT id FROM history_revisions")}


async def test_deleting_the_holder_of_a_copied_message_keeps_the_copy(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with await SqliteSessionStore.open(path) as store:
        for sid in ("a", "b"):
            await store.create_session(SessionRecord(session_id=sid, agent="x", root_id=sid))
        history = history_of("one", "two")
        await commit(store, history, thread_id="a", run_id="ra")
        base = history.revision_id
        history.append(ModelMessage.user("inline"))
        await commit(store, history, thread_id="a", run_id="ra", base=base)
        # Session b's history is a's with a summary before the last message: a copy of a's inline row.
        b = history.branch()
        b.insert(ModelMessage.user("b's summary"), after=history.lineage()[1].id)
        await commit(store, b, thread_id="b", run_id="rb")
        assert _rows(path, "SELECT count(*) FROM history_entry_rows WHERE copy_of IS NOT NULL") == [(1,)]

        deleted = await store.delete_sessions(["a"])

        # a's last revision goes (b's lineage joins a's at "two"); its message stays, as b's copy.
        assert (deleted.sessions, deleted.revisions, deleted.entries) == (1, 1, 0)
        loaded = await store.load_history(b.revision_id or "")
        assert loaded is not None and [m.text for m in loaded.messages] == ["one", "two", "b's summary", "inline"]
    assert _rows(path, "SELECT count(*) FROM history_entry_rows WHERE copy_of IS NOT NULL") == [(0,)]
    texts = _rows(path, "SELECT json_extract(message, '$.parts[0].text') FROM history_entries")
    assert sorted(t for (t,) in texts) == sorted(["one", "two", "b's summary", "inline"])


def _v6_file(path: Path) -> MessageHistory:
    """A version-6 database (its own migrations, raw SQL) holding thread ``t`` with two messages."""
    history = history_of("old one", "old two")
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        write_old_history(conn, 6, history, writer="t")
        conn.execute("INSERT INTO threads VALUES ('t', ?, 1, 1)", (history.revision_id,))
        conn.execute("COMMIT")
    finally:
        conn.close()
    return history


async def test_a_version_six_file_migrates_without_copying_a_message(tmp_path: Path) -> None:
    path = tmp_path / "v6.db"
    history = _v6_file(path)
    async with await SqliteSessionStore.open(path) as store:
        loaded = await store.load_history(history.revision_id or "")
        assert loaded is not None and loaded.messages == history.messages
        base = history.revision_id
        history.append(ModelMessage.assistant("new"))
        await commit(store, history, base=base)

        # An export that read the first entry (entry rowid 1) before the migration goes on from there.
        async with reader_for(store) as reader:
            entries = [row for page in [p async for p in (await reader.scan("entries", 1)).pages] for row in page.rows]
            revisions = [row for p in [p async for p in (await reader.scan("revisions", 1)).pages] for row in p.rows]
    assert _rows(path, "SELECT value FROM repertory_meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
    assert _rows(path, "SELECT count(*) FROM history_revisions WHERE message IS NOT NULL") == [(1,)]
    assert [row[0] for row in entries] == [history.entries[2].id, history.entries[1].id]
    assert sorted(row[0] for row in revisions) == sorted(r.id for r in history.revisions[1:])
