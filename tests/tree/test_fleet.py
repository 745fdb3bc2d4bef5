"""``running_turns``: every queued or running turn of the store, oldest first, with its whole tree's spend and budget.

Two trees on one store, on the in-memory store and on a SQLite file: alice's, whose root and child
each finished a priced turn before the child started a turn held inside a tool with another queued
behind it, and bob's, whose root holds a turn of its own. Each open turn is listed with what its
whole tree spent (the finished runs and the one running), the budget of its tree's ledger where the
store keeps ledgers, and only its owner's turns when asked for an owner's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from repertory import Agent, InMemorySessionStore, Runtime, tool
from repertory.core.budget import Budget, BudgetStore, Spend, run_spend, tree_scope
from repertory.core.messages import ModelMessage
from repertory.core.model import ModelEvent, ModelResponse, ModelSettings, ToolSpec
from repertory.core.store import TreeStore
from repertory.storage.url import open_store
from repertory.testing import ScriptedModel
from repertory.tree.fleet import running_turns, tree_spend

PRICE = 0.25
"""What every model request of these tests costs."""

_ENTERED: dict[str, asyncio.Event] = {}
_RELEASE: dict[str, asyncio.Event] = {}


def _event(events: dict[str, asyncio.Event], name: str) -> asyncio.Event:
    return events.setdefault(name, asyncio.Event())


@tool
async def hold(name: str) -> str:
    """Wait until the test lets this call go."""
    _event(_ENTERED, name).set()
    await _event(_RELEASE, name).wait()
    return f"held {name}"


@tool
async def note(text: str) -> str:
    """Write a note down."""
    return f"noted {text}"


def _step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    last = messages[-1]
    usage = {"input_tokens": 10, "output_tokens": 5}
    if last.role == "user" and last.text.startswith("wait "):
        return {"tool": "hold", "args": {"name": last.text.removeprefix("wait ")}, "usage": usage}
    if last.role == "user" and last.text == "work":
        return {"tool": "note", "args": {"text": "work"}, "usage": usage}
    return {"text": "done", "usage": usage}


class PricedModel:
    """``ScriptedModel(_step)`` whose every answer costs ``PRICE``."""

    def __init__(self) -> None:
        self._scripted = ScriptedModel(_step)

    async def request(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        async for event in self._scripted.request(messages, tools, settings):
            yield event.model_copy(update={"cost": PRICE}) if isinstance(event, ModelResponse) else event


def _agents() -> dict[str, Agent]:
    return {"worker": Agent(name="worker", model=PricedModel(), tools=[hold, note])}


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TreeStore]:
    """An in-memory store, or a SQLite file in ``tmp_path``."""
    if request.param == "memory":
        async with InMemorySessionStore() as memory:
            yield memory
        return
    opened = await open_store(f"sqlite:///{tmp_path / 'fleet.db'}")
    assert isinstance(opened, TreeStore)
    try:
        yield opened
    finally:
        await opened.close()


FINISHED = Spend(cost=2 * PRICE, tokens=30, model_requests=2, tool_calls=1)
"""What one finished ``work`` turn spends: a request that calls ``note``, then the answer."""


async def test_running_turns_lists_open_turns_oldest_first_with_each_trees_spend_and_budget(store: TreeStore) -> None:
    _ENTERED.clear()
    _RELEASE.clear()
    async with await Runtime.start(store=store, agents=_agents()) as rt:
        alice = await rt.create_session(agent="worker", title="alice's root", owner="alice")
        assert (await alice.run("work")).status == "done"
        child = await alice.spawn(title="alice's child")
        assert (await child.run("work")).status == "done"
        busy = await child.send("wait a")
        await _event(_ENTERED, "a").wait()
        behind = await child.send("after a")
        bob = await rt.create_session(agent="worker", title="bob's root", owner="bob")
        bobs = await bob.send("wait b")
        await _event(_ENTERED, "b").wait()
        budget = Budget(max_tokens=1_000, max_cost=5.0)
        if isinstance(store, BudgetStore):
            await store.set_budget(tree_scope(alice.id), budget)

        turns = await running_turns(store)

        assert {(t.session_id, t.submission_id, t.status) for t in turns} == {
            (child.id, busy.submission_id, "running"),
            (child.id, behind.submission_id, "queued"),
            (bob.id, bobs.submission_id, "running"),
        }
        stored = {t.submission_id: t for sid in (child.id, bob.id) for t in await store.list_turns(sid)}
        created = [stored[t.submission_id].created_at for t in turns]
        assert created == sorted(created)
        assert [t.submission_id for t in turns if t.session_id == child.id] == [
            busy.submission_id,
            behind.submission_id,
        ]
        by_id = {t.submission_id: t for t in turns}
        running = by_id[busy.submission_id]
        assert running.root_id == alice.id and running.agent == "worker" and running.title == "alice's child"
        assert running.owner == "alice" and running.run_id == stored[busy.submission_id].run_id
        assert running.since == stored[busy.submission_id].updated_at
        # The held turn has spent its first request (the call to ``hold``), as its last checkpoint holds it.
        [held_run] = [r for r in await store.list_runs(child.id) if r.run_id == running.run_id]
        held = run_spend(held_run)
        assert (held.cost, held.tokens, held.model_requests) == (PRICE, 15, 1)
        assert running.tree_spend == FINISHED + FINISHED + held
        assert by_id[behind.submission_id].tree_spend == running.tree_spend  # one tree, one spend
        assert await tree_spend(store, alice.id) == running.tree_spend
        assert await tree_spend(store, child.id) == FINISHED + held  # a subtree's own
        expected_budget = budget if isinstance(store, BudgetStore) else None
        assert running.tree_budget == expected_budget and by_id[behind.submission_id].tree_budget == expected_budget
        bobs_turn = by_id[bobs.submission_id]
        assert bobs_turn.root_id == bob.id and bobs_turn.owner == "bob" and bobs_turn.tree_budget is None
        assert bobs_turn.tree_spend == held  # the same first request, in a tree of its own

        assert [t.submission_id for t in await running_turns(store, owner="bob")] == [bobs.submission_id]
        assert {t.session_id for t in await running_turns(store, owner="alice")} == {child.id}
        assert await running_turns(store, owner="carol") == []

        for name in ("a", "b"):
            _event(_RELEASE, name).set()
        for turn in (busy, behind, bobs):
            assert (await turn.result()).status == "done"
        assert await running_turns(store) == []
