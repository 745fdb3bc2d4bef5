"""The SQLite store's file hygiene: a bounded write-ahead log, and no connection closed under a running read."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from benchmarks.harness.commits import EngineSession, make_message
from repertory.storage.sqlite.store import SqliteSessionStore


async def test_a_log_past_the_limit_is_checkpointed_and_emptied(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    store = await SqliteSessionStore.open(str(path))
    try:
        keeper = store.wal_keeper
        assert keeper is not None
        keeper.limit = 64 * 1024  # small enough that a few commits pass it
        session = EngineSession.new()
        for i in range(200):
            await session.step(store, make_message(i))
        wal = Path(f"{path}-wal")
        assert wal.stat().st_size > 64 * 1024
        keeper.every_seconds = 0.0  # the next write looks at once instead of a second later
        await session.step(store, make_message(200))
        assert await keeper.settle()  # a checkpoint was started; now it is over
        assert keeper.checkpoints == 1 and os.path.getsize(wal) == 0
        assert session.head is not None
        loaded = await store.load_history(session.head)
        assert loaded is not None and len(loaded.messages) == 201  # nothing lost
    finally:
        await store.close()


async def test_close_waits_for_a_read_still_running_on_its_thread(tmp_path: Path) -> None:
    # A read whose caller was cancelled keeps running on its worker thread; closing its connection
    # under it crashed the process (SIGSEGV), so close() must wait for it.
    import asyncio
    import time

    store = await SqliteSessionStore.open(str(tmp_path / "close.db"))
    finished: list[float] = []

    def slow(conn: Any) -> int:
        time.sleep(0.3)
        count = int(conn.execute("SELECT count(*) FROM runs").fetchone()[0])
        finished.append(time.monotonic())
        return count

    read = asyncio.ensure_future(store.read("slow read", slow))
    await asyncio.sleep(0.05)
    read.cancel()
    await store.close()
    closed_at = time.monotonic()
    assert finished and finished[0] <= closed_at  # the read ended on its connection before it was closed
