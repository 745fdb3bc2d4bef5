"""A lineage a store lost part of raises ``HistoryIntegrityError`` on every backend, never a bare ``KeyError``.

Nothing the API does breaks a lineage (``tests/storage/test_deletion_random.py`` holds that); this is what
a reader sees when something outside it did (a hand-edited file, a restored partial backup).
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import psycopg
import pytest

from repertory import InMemorySessionStore, MessageHistory
from repertory.core.history import HistoryIntegrityError
from repertory.storage import SqliteSessionStore, TreeStore
from repertory.storage.postgres.store import PostgresSessionStore
from repertory.testing.pg_temp import TemporaryPostgres
from tests.conftest import truncate_pg
from tests.records import commit, history_of


async def _three(store: TreeStore) -> MessageHistory:
    history = history_of("a", "b", "c")
    await commit(store, history, thread_id="t", run_id="r")
    return history


@pytest.mark.parametrize("lost", ["revision", "entry"])
async def test_the_memory_store_names_what_is_missing(lost: str) -> None:
    store = InMemorySessionStore()
    history = await _three(store)
    middle = history.lineage()[1]
    # No method removes one history row (by design), so the test breaks the lineage from outside.
    if lost == "revision":
        store._revisions.pop(middle.id)
    else:
        store._entries.pop(middle.entry_id)
    with pytest.raises(HistoryIntegrityError, match=middle.id if lost == "revision" else middle.entry_id):
        await store.load_history(history.revision_id or "")


async def test_sqlite_names_the_missing_revision(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = await SqliteSessionStore.open(path)
    history = await _three(store)
    await store.close()
    middle = history.lineage()[1]
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("DELETE FROM history_revisions WHERE id = ?", (middle.id,))
    store = await SqliteSessionStore.open(path)
    try:
        with pytest.raises(HistoryIntegrityError, match=middle.id):
            await store.load_history(history.revision_id or "")
    finally:
        await store.close()


async def test_postgres_names_the_missing_revision(pg_server: TemporaryPostgres) -> None:
    truncate_pg(pg_server.url)
    store = await PostgresSessionStore.open(pg_server.url)
    history = await _three(store)
    await store.close()
    middle = history.lineage()[1]
    with psycopg.connect(pg_server.url, autocommit=True) as conn:
        conn.execute("DELETE FROM repertory.history_revisions WHERE id = %s", (middle.id,))
    store = await PostgresSessionStore.open(pg_server.url)
    try:
        with pytest.raises(HistoryIntegrityError, match=middle.id):
            await store.load_history(history.revision_id or "")
    finally:
        await store.close()
