"""A full disk under the SQLite store (issue 26): every write fails with ``StoreFull``, none lands, the store goes on.

Two ways to fill it. A real one: the store's folder is a small tmpfs (its ``-wal`` and ``-shm``
beside the file, on it too) filled to the last block with a ballast file, so SQLite's writes get
``ENOSPC``; mounting needs root, and without it that variant is skipped saying so. And one that
runs everywhere: ``PRAGMA max_page_count`` set to the pages the database has, which makes SQLite
answer a write that needs one more page with the same ``SQLITE_FULL``.

What is checked, for a commit, a turn with its event, and a group-commit batch: the error is the
typed ``StoreFull`` (a ``StoreError``); nothing of the write is stored; SQLite rolled the
transaction back itself (the writer is not left in a transaction) and its connection still reads;
and the same writes succeed once the space is back, with the database intact.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Protocol

import pytest

from repertory.core.messages import ModelMessage
from repertory.errors import StoreError, StoreFull
from repertory.storage import SqliteSessionStore
from repertory.storage.sqlite.connection import is_full, store_error
from repertory.testing.conformance.records import commit, history_of, pointers
from repertory.testing.conformance.tree_records import event, session_record, turn_record
from tests.soak import tmpfs

BIG = "x" * 60_000  # a message that needs pages (and WAL frames) the full disk does not have
DISK_BYTES = 4 << 20


class Disk(Protocol):
    """A way to make the store's disk full, and to free it again."""

    def fill(self) -> None: ...

    def free(self) -> None: ...


class PageLimit:
    """``PRAGMA max_page_count`` on the writer: the database may not grow past the pages it has."""

    def __init__(self, store: SqliteSessionStore) -> None:
        self.conn = store.writer_connection
        self.limit = self.conn.execute("PRAGMA max_page_count").fetchone()[0]

    def fill(self) -> None:
        pages = self.conn.execute("PRAGMA page_count").fetchone()[0]
        self.conn.execute(f"PRAGMA max_page_count = {pages}")

    def free(self) -> None:
        self.conn.execute(f"PRAGMA max_page_count = {self.limit}")


class Ballast:
    """A tmpfs filled with a ballast file to its last block."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def fill(self) -> None:
        assert tmpfs.fill(self.root) > 0

    def free(self) -> None:
        tmpfs.drain(self.root)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB tmpfs of the test's own, unmounted afterwards; skipped where mounting is not permitted."""
    root = tmp_path / "disk"
    refused = tmpfs.mount(root, DISK_BYTES)
    if refused is not None:
        pytest.skip(f"a real full disk needs a tmpfs of our own, and mounting one is not permitted here: {refused}")
    try:
        yield root
    finally:
        tmpfs.unmount(root)
    assert not tmpfs.is_mounted(root)


@pytest.fixture(params=["tmpfs", "max_page_count"])
async def full_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[SqliteSessionStore, Disk]]:
    """An open store and the way to fill its disk: a real tmpfs, or SQLite's page limit."""
    if request.param == "tmpfs":
        root: Path = request.getfixturevalue("small_disk")
        store = await SqliteSessionStore.open(root / "store.db")
        disk: Disk = Ballast(root)
    else:
        store = await SqliteSessionStore.open(tmp_path / "store.db")
        disk = PageLimit(store)
    try:
        yield store, disk
    finally:
        disk.free()
        await store.close()


async def test_a_full_disk_fails_each_write_with_store_full_writes_nothing_and_the_store_goes_on(
    full_store: tuple[SqliteSessionStore, Disk],
) -> None:
    store, disk = full_store
    await store.create_session(session_record("s"))
    history = history_of("before the disk filled")
    await commit(store, history, thread_id="s", run_id="r")
    base = history.revision_id
    others = [history_of(f"other {i}", BIG) for i in range(3)]
    disk.fill()

    history.append(ModelMessage.user(BIG))
    head = history.revision_id
    assert head is not None
    run, thread = pointers(history, thread_id="s", run_id="r", step_index=1)
    with pytest.raises(StoreFull, match="database or disk is full"):
        await store.commit_session(run=run, thread=thread, history=history, base_revision_id=base)
    with pytest.raises(StoreFull):
        await store.add_turn(turn_record("s", "sub-1", BIG), events=[event("s", 1, "turn.started", text=BIG)])
    group = store.group_writer
    assert group is not None
    batches, members = group.batches, group.members
    batch = await asyncio.gather(
        *(commit(store, h, thread_id=f"t{i}", run_id=f"r{i}") for i, h in enumerate(others)), return_exceptions=True
    )
    assert [type(outcome) for outcome in batch] == [StoreFull] * 3
    assert group.members - members == 3 and group.batches - batches == 2  # two of them shared a batch

    # Rolled back by SQLite itself, and the connection still serves: nothing of any write is there.
    assert not store.writer_connection.in_transaction
    stored_thread = await store.load_thread("s")
    stored_run = await store.load_run("r")
    assert stored_thread is not None and stored_thread.history_revision_id == base
    assert stored_run is not None and stored_run.step_index == 0 and stored_run.history_revision_id == base
    assert await store.load_history(head) is None
    assert await store.load_turn("sub-1") is None and await store.last_event_seq("s") == 0
    assert [await store.load_thread(f"t{i}") for i in range(3)] == [None] * 3

    disk.free()
    await store.commit_session(run=run, thread=thread, history=history, base_revision_id=base)
    await store.add_turn(turn_record("s", "sub-1", BIG), events=[event("s", 1, "turn.started", text=BIG)])
    await asyncio.gather(*(commit(store, h, thread_id=f"t{i}", run_id=f"r{i}") for i, h in enumerate(others)))
    stored_thread = await store.load_thread("s")
    loaded = await store.load_history(head)
    assert stored_thread is not None and stored_thread.history_revision_id == head
    assert loaded is not None and loaded.messages[-1].text == BIG
    assert await store.load_turn("sub-1") is not None and await store.last_event_seq("s") == 1
    assert store.pragma("integrity_check") == "ok"


async def test_the_database_its_wal_and_its_shm_live_on_the_small_disk(small_disk: Path) -> None:
    async with await SqliteSessionStore.open(small_disk / "store.db") as store:
        await commit(store, history_of("hello"), thread_id="t", run_id="r")
        device = os.stat(small_disk).st_dev
        for name in ("store.db", "store.db-wal", "store.db-shm"):
            assert os.stat(small_disk / name).st_dev == device, name
        assert os.stat(small_disk.parent).st_dev != device  # the folder above is another filesystem


def test_only_sqlite_full_is_store_full() -> None:
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = sqlite3.SQLITE_FULL
    locked = sqlite3.OperationalError("database is locked")
    locked.sqlite_errorcode = sqlite3.SQLITE_BUSY
    assert is_full(full) and not is_full(locked) and not is_full(sqlite3.OperationalError("no code"))
    assert type(store_error("commit_session", full)) is StoreFull
    assert type(store_error("commit_session", locked)) is StoreError
    assert str(store_error("add_turn", full)) == "sqlite: add_turn failed: database or disk is full"


def test_a_postgresql_disk_full_is_store_full_too() -> None:
    pytest.importorskip("psycopg")
    from repertory.storage.postgres.connection import error_for

    full = error_for("commit_session", "53100", "could not extend file: No space left on device")
    assert type(full) is StoreFull and "No space left on device" in str(full)
    assert type(error_for("commit_session", "08006", "connection failure")) is StoreError
