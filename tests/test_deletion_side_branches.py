"""A known data-loss bug in ``delete_sessions``, held as a strict xfail so it flips when fixed.

A deletion keeps what a remaining thread pins only when its walk up from the deleted heads
reaches the pinned revision. A fork pins its fork point; when that point is on a side branch of
the parent's lineage (the head a compaction left, or one the parent moved its head away from),
a later deletion that walks the parent's current lineage misses the pin, and the revisions the
two lineages share, which the fork needs, are collected. Found on 2026-12-03 (stop 34) while
making a deleted compacted session's former lineage collectable; the repair (a deletion that
keeps a revision for a remaining thread records that need where later walks see it: the thread
as the revision's writer, or a pin where two needs meet) is not built yet. Every backend has it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from repertory import InMemorySessionStore, ModelMessage
from repertory.core.tree import SessionRecord
from repertory.storage import SqliteSessionStore, TreeStore
from repertory.storage.postgres.store import PostgresSessionStore
from repertory.testing.conformance.tree_records import session_record
from tests.conftest import truncate_pg
from tests.records import commit, history_of


@pytest.fixture(params=("memory", "sqlite", "postgres"))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TreeStore]:
    """An empty store of each backend (PostgreSQL: the session's server, truncated)."""
    opened: TreeStore
    if request.param == "memory":
        opened = InMemorySessionStore()
    elif request.param == "sqlite":
        opened = await SqliteSessionStore.open(tmp_path / "s.db")
    else:
        server = request.getfixturevalue("pg_server")
        truncate_pg(server.url)
        opened = await PostgresSessionStore.open(server.url)
    try:
        yield opened
    finally:
        await opened.close()


async def _texts(store: TreeStore, revision_id: str) -> list[str] | None:
    history = await store.load_history(revision_id)
    return None if history is None else [m.text for m in history.messages]


@pytest.mark.xfail(strict=True, reason="delete_sessions misses a pin on a side branch of the parent's lineage")
async def test_a_fork_at_the_head_a_compaction_left_outlives_its_parent_and_sibling(store: TreeStore) -> None:
    await store.create_session(SessionRecord(session_id="p", agent="x", root_id="p"))
    history = history_of("one", "two")
    await commit(store, history, thread_id="p", run_id="run-p")
    for text in ("three", "four"):
        base = history.revision_id
        history.append(ModelMessage.user(text))
        await commit(store, history, thread_id="p", run_id="run-p", base=base)
    left = history.revision_id or ""
    # A compaction: a summary after "two", and "three" and "four" added again on top of it.
    history.insert(ModelMessage.user("summary"), after=history.lineage()[1].id)
    await commit(store, history, thread_id="p", run_id="run-p", base=left)
    for sid, at in (("before", left), ("after", history.revision_id or "")):
        await store.create_session(session_record(sid, parent="p", kind="forked", forked_at=at), head=at)

    await store.delete_sessions(["p"])
    await store.delete_sessions(["after"])

    assert await _texts(store, left) == ["one", "two", "three", "four"]
