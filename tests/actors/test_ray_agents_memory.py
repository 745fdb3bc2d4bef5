"""On Ray: agents registered by import path, and long-term memory given to sessions in the hosts."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest

from repertory import Agent, RepertoryError, Runtime
from repertory.core.messages import ModelMessage
from repertory.core.store import TreeStore
from repertory.core.tree import SessionRecord
from repertory.memory import StoreMemory
from repertory.testing import ScriptedModel


async def test_an_agent_path_is_imported_by_the_host_itself(ray_runtime: Any) -> None:
    rt = await ray_runtime({"desk": "tests.actors.agents:clerk"})
    h = await rt.create_session(agent="desk")
    pid, text = (await h.run("hello")).text.split(":", 1)
    assert text == "hello" and int(pid) != os.getpid()
    assert rt.agents["desk"].name == "clerk"  # resolved in this process too (lookups, output types)


async def test_a_bad_agent_path_fails_at_start_with_a_clear_error(ray_instance: None, tmp_path: Path) -> None:
    with pytest.raises(RepertoryError, match="cannot import agents"):
        await Runtime.start(
            store=f"sqlite:///{tmp_path / 'x.db'}", backend="ray", agents={"a": "tests.actors.nowhere:x"}
        )


def _memory(record: SessionRecord, store: TreeStore) -> StoreMemory:
    return StoreMemory(store, resource=record.title or "anonymous", working_memory=False)


async def test_sessions_on_ray_hosts_get_their_resource_memory(ray_runtime: Any) -> None:
    def step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        recalled = " ".join(m.text for m in messages if m.role == "system")
        return {"text": "recalled: " + recalled if "?" in messages[-1].text else "noted"}

    rt = await ray_runtime({"a": Agent(name="a", model=ScriptedModel(step))}, memory=_memory)
    first = await rt.create_session(agent="a", title="alice")
    await first.run("my favourite colour is teal")
    deadline = time.monotonic() + 20
    # The host's memory stores messages in the background; wait until they are in the store.
    while not await rt.store.recent_memory("alice", limit=10):
        assert time.monotonic() < deadline, "the host never stored alice's messages"
        await asyncio.sleep(0.05)
    second = await rt.create_session(agent="a", title="alice")
    assert "teal" in (await second.run("what is my favourite colour?")).text
    stranger = await rt.create_session(agent="a", title="bob")
    assert "teal" not in (await stranger.run("what is my favourite colour?")).text
