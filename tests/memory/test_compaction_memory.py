"""Memory and compaction: a summary adds nothing to memory and takes nothing away from it.

What a compacted thread said stays recallable from the resource's other threads, every message
once: the summary (said by nobody) and the messages a compaction re-added are not remembered again.
"""

from __future__ import annotations

from pathlib import Path

from repertory import Session
from repertory.memory import StoreMemory
from repertory.storage import SqliteSessionStore
from tests.runtime.compact_script import Conversation, compacting_agent, prompt


async def test_a_compacted_thread_is_remembered_whole_and_once(tmp_path: Path) -> None:
    async with await SqliteSessionStore.open(tmp_path / "memory.db") as store:
        memory = StoreMemory(store, resource="alice", last_messages=1000, semantic_top_k=0, working_memory=False)
        conversation = Conversation()
        sess = Session(store=store, agent=compacting_agent(conversation), memory=memory)
        for i in range(30):
            assert (await sess.start(prompt(i))).status == "done"
        assert conversation.summary_requests
        await memory.flush()
        recalled = await memory.recall(thread_id="another-thread", query=[])
        users = [m.text for m in recalled.messages if m.role == "user"]
        assert users == [prompt(i) for i in range(30)]  # the compacted turns too, each once
        assert not any("covers t" in m.text for m in recalled.messages)  # no summary in memory
        assert len(recalled.messages) == 60  # every user message and answer, nothing twice
