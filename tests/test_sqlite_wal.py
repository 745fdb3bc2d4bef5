"""The SQLite store keeps its write-ahead log bounded: past the limit, a checkpoint empties it."""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks._common import EngineSession, make_message
from repertory.storage._sqlite_wal import WalKeeper
from repertory.storage.sqlite import SqliteSessionStore


async def test_a_log_past_the_limit_is_checkpointed_and_emptied(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    store = await SqliteSessionStore.open(str(path))
    try:
        keeper = store._wal
        assert isinstance(keeper, WalKeeper)
        keeper._limit = 64 * 1024  # small enough that a few commits pass it
        session = EngineSession.new()
        for i in range(200):
            await session.step(store, make_message(i))
        wal = Path(f"{path}-wal")
        assert wal.stat().st_size > 64 * 1024
        keeper._looked = 0.0  # the next write looks at once instead of a second later
        await session.step(store, make_message(200))
        assert keeper._task is not None
        await keeper._task
        assert keeper.checkpoints == 1 and os.path.getsize(wal) == 0
        assert session.head is not None
        loaded = await store.load_history(session.head)
        assert loaded is not None and len(loaded.messages) == 201  # nothing lost
    finally:
        await store.close()
