"""The export links a delegating call to its child session: ``tool_calls.child_session_id``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repertory import Agent, Runtime, agent_tool
from repertory.analytics import connect
from repertory.core.messages import ModelMessage
from repertory.storage import TreeStore
from repertory.storage.export import export_parquet
from repertory.testing import ScriptedModel


def _boss(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
    if messages[-1].role == "user":
        return {"tools": [{"tool": "worker", "args": {"task": t}} for t in ("left", "right")]}
    return {"text": "both done"}


def _worker(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
    return {"text": f"did {messages[-1].text}"}


async def test_tool_calls_name_the_child_session_of_each_delegation(store: TreeStore, tmp_path: Path) -> None:
    agents = {
        "boss": Agent(name="boss", model=ScriptedModel(_boss), tools=[agent_tool("worker")]),
        "worker": Agent(name="worker", model=ScriptedModel(_worker)),
    }
    async with await Runtime.start(store=store, agents=agents) as rt:
        root = await rt.create_session(agent="boss")
        await root.run("go")
        children = {c.id: c.record.title for c in await root.children()}

    await export_parquet(store, tmp_path / "export")
    con = connect(tmp_path / "export")
    rows = con.sql(
        "SELECT c.child_session_id, c.child_submission_id, c.result, t.session_id "
        "FROM tool_calls c LEFT JOIN turns t ON t.submission_id = c.child_submission_id "
        "WHERE c.thread_id = ? ORDER BY c.result",
        params=[root.id],
    ).fetchall()
    assert [(children[r[0]], r[2]) for r in rows] == [("left", '"did left"'), ("right", '"did right"')]
    assert all(r[3] == r[0] for r in rows)  # the turn the call waited for is the child's
    others = con.sql("SELECT count(*) FROM tool_calls WHERE child_session_id IS NOT NULL").fetchall()
    assert others == [(2,)]
