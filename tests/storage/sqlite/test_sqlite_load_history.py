"""``SqliteSessionStore.load_history`` reads a short lineage inline and a long one on a worker thread.

Both ways must give the same history (and ``None`` for a revision the store lacks); the thread is
for lineages of ``INLINE_LINEAGE`` revisions or more, whose read would hold the event loop.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from repertory import ModelMessage
from repertory.storage import SqliteSessionStore
from repertory.storage.sqlite.store import INLINE_LINEAGE
from tests.records import commit, history_of


@pytest.mark.parametrize("length", [1, INLINE_LINEAGE - 1, INLINE_LINEAGE, INLINE_LINEAGE + 1, 3 * INLINE_LINEAGE])
async def test_a_lineage_of_any_length_loads_whole(
    tmp_path: Path, length: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "h.db"
    store = await SqliteSessionStore.open(db)
    history = history_of("m0")
    await commit(store, history)
    for i in range(1, length):
        base = history.revision_id
        history.append(ModelMessage.user(f"m{i}"))
        await commit(store, history, base=base)
    await store.close()

    store = await SqliteSessionStore.open(db)  # a cold history cache
    hops: list[str] = []
    read = SqliteSessionStore.read

    async def counted(self: SqliteSessionStore, action: str, fn: Any) -> Any:
        hops.append(action)
        return await read(self, action, fn)

    monkeypatch.setattr(SqliteSessionStore, "read", counted)
    try:
        assert history.revision_id is not None
        loaded = await store.load_history(history.revision_id)
        assert loaded is not None
        assert [e.message for e in loaded.entries] == [e.message for e in history.entries]
        assert [r.id for r in loaded.revisions] == [r.id for r in history.revisions]
        assert hops == (["load_history"] if len(history.revisions) > INLINE_LINEAGE else [])
        assert await store.load_history("no-such-revision") is None
    finally:
        await store.close()
