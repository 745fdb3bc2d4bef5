"""A runtime gives its sessions long-term memory: a new session of the same resource remembers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repertory import Agent, ModelMessage, Runtime
from repertory.core.store import TreeStore
from repertory.core.tree import SessionRecord
from repertory.memory import StoreMemory
from repertory.testing import ScriptedModel


async def test_sessions_of_a_runtime_share_their_resource_memory(tmp_path: Path) -> None:
    seen: list[list[ModelMessage]] = []

    def step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        seen.append(list(messages))
        return {"text": "noted"}

    memories: list[StoreMemory] = []

    def memory(record: SessionRecord, store: TreeStore) -> StoreMemory:
        m = StoreMemory(store, resource=record.title or "anonymous", working_memory=False)
        memories.append(m)
        return m

    agent = Agent(name="a", model=ScriptedModel(step))
    async with await Runtime.start(store=f"sqlite:///{tmp_path / 'm.db'}", agents={"a": agent}, memory=memory) as rt:
        first = await rt.create_session(agent="a", title="alice")
        await first.run("my favourite colour is teal")
        for m in memories:
            await m.flush()
        second = await rt.create_session(agent="a", title="alice")
        await second.run("what is my favourite colour?")
        stranger = await rt.create_session(agent="a", title="bob")
        await stranger.run("what is my favourite colour?")
    for m in memories:
        await m.close()
    recalled_by_alice = " ".join(m.text for m in seen[1] if m.role == "system")
    recalled_by_bob = " ".join(m.text for m in seen[2] if m.role == "system")
    assert "teal" in recalled_by_alice
    assert "teal" not in recalled_by_bob  # another resource never sees it
