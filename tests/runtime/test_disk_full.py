"""The engine on a full disk (issue 26): a write of each kind fails with SQLite's ``SQLITE_FULL``.

The store's writer connection is a ``sqlite3.Connection`` subclass that fails the next ``writes``
write transactions exactly as SQLite fails them on a full disk (measured on a full tmpfs,
``tests/storage/sqlite/test_store_full.py``): the ``COMMIT`` raises ``database or disk is full`` after SQLite rolled
the transaction back itself, and an autocommit write raises before it lands. So it runs anywhere,
and the failing write is chosen by the script: accepting a turn, the commit that makes a
non-idempotent call durable before it runs, a step's checkpoint, a run's final commit, and the
commit that redeems an approval's token.

What must hold whatever fails: nothing accepted is lost, no tool runs twice, a non-idempotent tool
runs only once its call is durable, and the store stays consistent: a turn that ended agrees with
its run, and what the session's events announce (a call, a checkpoint) is in the store.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from repertory import Agent, Runtime, ToolContext, tool
from repertory.core.messages import ModelMessage
from repertory.core.tree import SessionEvent
from repertory.errors import StoreFull
from repertory.storage import SqliteSessionStore
from repertory.storage.sqlite.connection import use_wal
from repertory.testing import ScriptedModel
from repertory.testing.conformance.backend.doubles import prompt_of, within
from tests.runtime.helpers import run_history, thread_history

_WRITES = frozenset({"INSERT", "UPDATE", "DELETE", "REPLACE"})
_ENDED = ("done", "error", "cancelled")


@dataclass
class FullDisk:
    """The next ``left`` write transactions fail as on a full disk; ``failed`` counts those that did."""

    left: int = 0
    failed: int = 0
    used_up: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the writes of the last ``fill`` have all failed."""

    filled_for: set[str] = field(default_factory=set)

    def fill(self, writes: int = 1) -> None:
        self.left = writes
        self.used_up.clear()

    def fill_once(self, key: str, writes: int = 1) -> None:
        """``fill`` the first time ``key`` asks: a turn driven again after the failure asks again."""
        if key not in self.filled_for:
            self.filled_for.add(key)
            self.fill(writes)

    def refuse(self) -> sqlite3.OperationalError:
        self.left -= 1
        self.failed += 1
        if self.left == 0:
            self.used_up.set()
        error = sqlite3.OperationalError("database or disk is full")
        error.sqlite_errorcode = sqlite3.SQLITE_FULL
        error.sqlite_errorname = "SQLITE_FULL"
        return error


def full_disk_connection(disk: FullDisk) -> type[sqlite3.Connection]:
    """A connection class whose writes fail while ``disk`` says so, as SQLite's do on a full disk."""

    class Connection(sqlite3.Connection):
        def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
            verb = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
            if disk.left > 0 and verb == "COMMIT":
                super().execute("ROLLBACK")  # what SQLite does itself when the COMMIT finds no room
                raise disk.refuse()
            if disk.left > 0 and verb in _WRITES and not self.in_transaction:
                raise disk.refuse()
            return super().execute(sql, parameters)

    return Connection


async def open_full_disk_store(path: Path, disk: FullDisk) -> SqliteSessionStore:
    """A SQLite store whose writer connection is ``full_disk_connection(disk)`` (readers are plain)."""
    await (await SqliteSessionStore.open(path)).close()  # the schema, made by the store itself
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, factory=full_disk_connection(disk))
    conn.execute("PRAGMA busy_timeout = 10000")
    use_wal(conn, str(path))
    conn.execute("PRAGMA synchronous = NORMAL")
    return SqliteSessionStore(os.path.abspath(path), conn, "normal", False)


@dataclass
class Fleet:
    """The runtime on the full-disk store, the disk, and what the tools did."""

    rt: Runtime
    store: SqliteSessionStore
    disk: FullDisk
    ran: list[tuple[str, str]] = field(default_factory=list)
    """``(tool, call id)`` of every tool run, in order."""
    release: asyncio.Event = field(default_factory=asyncio.Event)
    """What a ``hold`` turn's search waits for."""


def _step(fleet_disk: FullDisk) -> Any:
    """The model: by the turn's prompt, which write it fills the disk before."""

    def step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        prompt, replies = prompt_of(messages)
        kind = prompt.split()[0]
        if replies == 0:
            if kind == "early":
                fleet_disk.fill_once(prompt)  # the commit that makes the charge durable before it runs
                return {"tool": "charge", "args": {"amount": 5}}
            if kind == "charge":
                return {"tool": "charge", "args": {"amount": 6}}
            if kind == "approve":
                return {"tool": "pay", "args": {"amount": 7}}
            return {"tool": "search", "args": {"query": prompt}}
        if kind == "final":
            fleet_disk.fill_once(prompt)  # the run's last commit, which also ends the turn
        return {"text": f"done: {prompt}"}

    return step


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[Fleet]:
    disk = FullDisk()
    store = await open_full_disk_store(tmp_path / "store.db", disk)
    ran: list[tuple[str, str]] = []
    release = asyncio.Event()

    @tool
    def charge(ctx: ToolContext, amount: int) -> str:
        """Charge (not idempotent: never twice, and only once its call is durable)."""
        ran.append(("charge", ctx.call_id))
        return f"charged {amount}"

    @tool(requires_approval=True)
    def pay(ctx: ToolContext, amount: int) -> str:
        """Pay (asks first)."""
        ran.append(("pay", ctx.call_id))
        return f"paid {amount}"

    @tool(idempotent=True)
    async def search(ctx: ToolContext, query: str) -> str:
        """Search (idempotent); a ``checkpoint`` turn fills the disk before the step's commit, a ``hold`` one waits."""
        ran.append(("search", ctx.call_id))
        if query.startswith("hold"):
            await release.wait()
        if query.startswith("checkpoint") or query.startswith("stuck"):
            disk.fill_once(query, 2 if query.startswith("stuck") else 1)
        return "3 documents"

    agent = Agent(name="a", model=ScriptedModel(_step(disk)), tools=[charge, pay, search])
    rt = await Runtime.start(store=store, agents={"a": agent})
    try:
        yield Fleet(rt, store, disk, ran, release)
    finally:
        disk.left = 0
        await rt.close()
        await store.close()


async def assert_consistent(f: Fleet, session_id: str) -> None:
    """No tool twice; a non-idempotent one only once its call was durable; turns agree with runs; events are true."""
    ids = [cid for _, cid in f.ran if _ != "search"]
    assert len(ids) == len(set(ids)), f.ran
    history = await thread_history(f.store, session_id)
    durable = {c.tool_call_id for m in history for c in m.tool_calls}
    assert set(ids) <= durable, (f.ran, durable)
    for turn in await f.store.list_turns(session_id):
        run = await f.store.load_run(turn.run_id)
        assert turn.status in (*_ENDED, "suspended"), f"turn {turn.submission_id} left {turn.status}"
        if run is None:
            assert turn.status in ("error", "cancelled"), turn
        elif turn.status in _ENDED:
            assert run.status == turn.status, f"turn {turn.submission_id} ended {turn.status}, its run is {run.status}"
    for e in await f.store.load_events(session_id):
        if e.type == "checkpoint":
            revision = e.data["history_revision_id"]
            assert await f.store.load_history(revision) is not None, f"checkpoint event {e.seq} of a commit never made"
        if e.type == "tool.call":
            assert e.data["tool_call_id"] in durable, f"tool.call event {e.seq} of a call the store never held"


async def test_accepting_a_turn_on_a_full_disk_raises_store_full_and_accepts_nothing(fleet: Fleet) -> None:
    h = await fleet.rt.create_session(agent="a")
    fleet.disk.fill()
    with pytest.raises(StoreFull):
        await h.send("accept this")
    assert fleet.disk.failed == 1
    assert await fleet.store.list_turns(h.id) == [] and await fleet.store.load_events(h.id) == []
    assert (await h.metadata()).status == "idle"
    turn = await h.send("accept this")
    assert (await turn.result()).status == "done"
    await assert_consistent(fleet, h.id)


async def test_an_early_commit_on_a_full_disk_never_runs_the_non_idempotent_tool(fleet: Fleet) -> None:
    h = await fleet.rt.create_session(agent="a")
    turn = await h.send("early charge")
    # The commit that makes the call durable failed, so the charge did not run then; the turn was
    # driven again from its last commit once the disk had room, and charged once.
    assert (await within(turn.result())).status == "done"
    assert fleet.disk.failed == 1
    assert [name for name, _ in fleet.ran] == ["charge"]
    durable = {c.tool_call_id for m in await thread_history(fleet.store, h.id) for c in m.tool_calls}
    assert fleet.ran[0][1] in durable
    await assert_consistent(fleet, h.id)


async def test_a_decision_on_a_full_disk_raises_store_full_and_its_token_stays_live(fleet: Fleet) -> None:
    h = await fleet.rt.create_session(agent="a")
    turn = await h.send("approve the payment")
    assert (await turn.result()).status == "suspended"
    [pending] = await h.pending_approvals()
    fleet.disk.fill()
    with pytest.raises(StoreFull):
        await h.approve(pending.token)
    assert fleet.disk.failed == 1 and fleet.ran == []
    assert [p.token for p in await h.pending_approvals()] == [pending.token]
    assert [t.status for t in await fleet.store.list_turns(h.id)] == ["suspended"]
    result = await h.approve(pending.token)  # the space is back: the same decision lands, once
    assert result.status == "done" and [name for name, _ in fleet.ran] == ["pay"]
    await assert_consistent(fleet, h.id)


@pytest.mark.parametrize("where", ["early", "checkpoint", "final"])
async def test_after_a_commit_failed_on_a_full_disk_the_store_stays_consistent(fleet: Fleet, where: str) -> None:
    h = await fleet.rt.create_session(agent="a")
    turn = await h.send(f"{where} step")
    # The failed commit landed nothing; the turn is driven again from its last commit and ends done.
    assert (await within(turn.result())).status == "done"
    assert fleet.disk.failed == 1
    assert [name for name, _ in fleet.ran].count("charge") <= 1
    await assert_consistent(fleet, h.id)


async def test_a_turn_whose_end_cannot_be_written_either_is_not_left_behind(fleet: Fleet) -> None:
    h = await fleet.rt.create_session(agent="a")
    first = await h.send("stuck step")  # the checkpoint fails, and so does the write that ends the turn
    await within(fleet.disk.used_up.wait())
    assert fleet.disk.failed == 2
    second = await h.send("then this")
    assert (await within(second.result())).status == "done"
    assert fleet.disk.failed == 2
    stored = await fleet.store.load_turn(first.submission_id)
    assert stored is not None and stored.status in _ENDED, stored
    await assert_consistent(fleet, h.id)
    assert (await run_history(fleet.store, stored.run_id)) != []


async def test_a_queued_turn_whose_start_cannot_be_written_is_not_left_behind(fleet: Fleet) -> None:
    h = await fleet.rt.create_session(agent="a")
    first = await h.send("hold on")

    def fill_after_first(event: SessionEvent) -> None:
        if event.type == "turn.completed" and event.submission_id == first.submission_id:
            fleet.disk.fill()  # the next write is the queued turn's start

    listening = h.on_progress(fill_after_first)
    queued = await h.send("queued behind it")  # the first is still running (its search waits)
    fleet.release.set()
    await within(fleet.disk.used_up.wait())
    listening.dispose()
    later = await h.send("and one more")
    assert (await within(later.result())).status == "done"
    stored = await fleet.store.load_turn(queued.submission_id)
    assert stored is not None and stored.status in _ENDED, stored
    await assert_consistent(fleet, h.id)
