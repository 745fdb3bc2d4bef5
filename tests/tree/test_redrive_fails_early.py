"""A re-driven turn whose drive fails before it begins ends ``error`` together with its run.

Found by the chaos soak (issue 26, seed 7): the driver process was killed mid-turn, and its next
start re-drove the turn; the analyst's MCP server, killed too, could not start in the new process,
so the drive failed listing its tools, before any commit. The turn was written ``error`` on its
own and its run stayed ``running`` for good (nothing re-drives an ended turn). Now the run's
error, the turn's end and its ``turn.completed`` are one commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from repertory import Agent, ModelMessage, Runtime, tool
from repertory.core.model import ToolSpec
from repertory.core.store import TreeStore
from repertory.runtime.tools import Tool
from repertory.storage.memory.store import InMemorySessionStore
from repertory.storage.url import open_store
from repertory.testing import ScriptedModel


@tool(idempotent=True)
def lookup(key: str) -> str:
    """Look something up (idempotent)."""
    return f"value of {key}"


class DownSource:
    """A tool source whose server cannot start in this process (it never lists)."""

    name = "figures"

    async def list_tools(self) -> Sequence[Tool]:
        raise ConnectionError("MCP server 'figures' did not start")

    async def aclose(self) -> None:
        return None


def _agent(hold: asyncio.Event | None, held: asyncio.Event, *, source_down: bool) -> Agent:
    async def step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        if messages[-1].role == "user":
            return {"tool": "lookup", "args": {"key": "k"}}
        if hold is not None:
            held.set()
            await hold.wait()  # never set: the first runtime closes under this request
        return {"text": "done"}

    tools: list[Any] = [lookup, DownSource()] if source_down else [lookup]
    return Agent(name="a", model=ScriptedModel(step), tools=tools)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_redriven_turn_that_cannot_list_its_tools_ends_error_with_its_run(kind: str, tmp_path: Path) -> None:
    store: Any = InMemorySessionStore() if kind == "memory" else await open_store(f"sqlite:///{tmp_path / 'r.db'}")
    assert isinstance(store, TreeStore)
    held = asyncio.Event()
    try:
        rt1 = await Runtime.start(store=store, agents={"a": _agent(asyncio.Event(), held, source_down=False)})
        handle = await rt1.create_session(agent="a")
        turn = await handle.send("go")
        await asyncio.wait_for(held.wait(), 30)  # the first step is committed; the second request hangs
        await rt1.close()  # as a crash: turn and run stay running
        stored = await store.load_turn(turn.submission_id)
        assert stored is not None and stored.status == "running"
        run = await store.load_run(stored.run_id)
        assert run is not None and run.status == "running"

        async with await Runtime.start(store=store, agents={"a": _agent(None, held, source_down=True)}) as rt2:
            with pytest.raises(Exception, match="did not start"):
                await (await rt2.session(handle.id)).get_turn(turn.submission_id).result()
        stored = await store.load_turn(turn.submission_id)
        assert stored is not None and stored.status == "error"
        run = await store.load_run(stored.run_id)
        assert run is not None and run.status == "error" and run.error is not None  # they agree
        assert run.error.type == "ConnectionError"
        events = await store.load_events(handle.id)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        ends = [e for e in events if e.type == "turn.completed"]
        assert [e.data["status"] for e in ends] == ["error"]
    finally:
        await store.close()
