"""The stores' public seams for readers outside them (the exporter, tests): what they lend and when they refuse."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from repertory import RunState, StoreError
from repertory.storage import InMemorySessionStore, SqliteSessionStore


async def test_a_memory_snapshot_is_a_copy_of_one_moment() -> None:
    store = InMemorySessionStore()
    await store.save(RunState(run_id="r1", thread_id="t1"))
    snap = store.snapshot()
    await store.save(RunState(run_id="r2", thread_id="t2"))
    assert [r[0] for r in snap.runs] == ["r1"]  # later writes do not reach an older snapshot
    assert [r[0] for r in store.snapshot().runs] == ["r1", "r2"]
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        store.snapshot()


async def test_a_file_store_lends_pooled_readers_and_takes_them_back(tmp_path: Path) -> None:
    store = await SqliteSessionStore.open(tmp_path / "lend.db")
    assert not store.in_memory
    await store.save(RunState(run_id="r1", thread_id="t1"))
    conn = await asyncio.to_thread(store.lend_connection)
    try:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
    finally:
        store.give_back(conn)
    again = await asyncio.to_thread(store.lend_connection)
    store.give_back(again)
    assert again is conn  # the pool kept it for the next read
    assert await store.read("count", lambda c: c.execute("SELECT count(*) FROM runs").fetchone()[0]) == 1
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        store.lend_connection()
    with pytest.raises(StoreError, match="closed"):
        await store.read("count", lambda c: c.execute("SELECT 1").fetchone())


async def test_an_in_memory_sqlite_store_lends_its_one_connection() -> None:
    async with await SqliteSessionStore.open(":memory:") as store:
        assert store.in_memory and store.wal_keeper is None
        await store.save(RunState(run_id="r1", thread_id="t1"))
        conn = store.lend_connection()
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 1  # it sees the store's own writes
        store.give_back(conn)
        assert await store.read("count", lambda c: c.execute("SELECT count(*) FROM runs").fetchone()[0]) == 1


async def test_pragma_reads_the_writer_and_takes_only_a_name(tmp_path: Path) -> None:
    async with await SqliteSessionStore.open(tmp_path / "p.db", durability="full") as store:
        assert store.pragma("journal_mode") == "wal"
        assert store.pragma("synchronous") == 2  # FULL
        with pytest.raises(ValueError, match="not a pragma name"):
            store.pragma("synchronous = OFF")
        assert store.pragma("synchronous") == 2
