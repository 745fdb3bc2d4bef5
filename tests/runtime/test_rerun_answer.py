"""``suspend(rerun=True)``: a call that asks is run again with the answer, which it delivers itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from repertory import Agent, Runtime, ToolContext, suspend, tool
from repertory.errors import InvalidResumeToken
from repertory.testing import ScriptedModel

SEEN: list[object] = []


@tool
def relay(ctx: ToolContext, question: str) -> str:
    """Ask a far-away party; its question comes back to the human, and the answer goes to it."""
    SEEN.append(ctx.answer)
    if ctx.answer is None:
        suspend(reason="the far side asks", payload={"question": f"{question}?"}, rerun=True)
    if ctx.answer == "again":
        suspend(reason="the far side asks once more", payload={"question": "sure?"}, rerun=True)
    return f"delivered {ctx.answer}"


def _agent() -> Agent:
    steps: list[dict[str, Any]] = [{"tool": "relay", "args": {"question": "colour"}}, {"text": "done"}]
    return Agent(name="a", model=ScriptedModel(steps), tools=[relay])


async def test_the_answer_reruns_the_call_and_becomes_its_result_not_a_message(tmp_path: Path) -> None:
    SEEN.clear()
    async with await Runtime.start(store=f"sqlite:///{tmp_path / 'r.db'}", agents={"a": _agent()}) as rt:
        h = await rt.create_session(agent="a")
        asked = await h.run("go")
        assert asked.status == "suspended" and asked.state.suspended_on is not None
        assert asked.state.suspended_on.payload == {"question": "colour?"}
        token = asked.state.suspended_on.token
        again = await h.resume(token, "again")  # the call runs again with it, and asks once more
        assert again.status == "suspended" and again.state.suspended_on is not None
        done = await h.resume(again.state.suspended_on.token, {"colour": "teal"})
        with pytest.raises(InvalidResumeToken):
            await h.resume(token, "late")
        thread = await rt.store.load_thread(h.id)
        assert thread is not None and thread.history_revision_id is not None
        history = await rt.store.load_history(thread.history_revision_id)
    assert done.text == "done" and done.state.answers == {}
    assert SEEN == [None, "again", {"colour": "teal"}]
    assert history is not None
    assert [m.role for m in history.messages] == ["user", "assistant", "tool", "assistant"]  # no user message
    assert [r.result for m in history.messages for r in m.tool_results] == ["delivered {'colour': 'teal'}"]
