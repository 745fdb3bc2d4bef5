"""``Tool.reattaches``: a call committed before it runs, and run again (never "outcome unknown") after a crash.

A reattaching tool (``repertory.a2a``'s remote agents) finds the work its first attempt started
from the call's ids, so those ids must be durable before it starts anything: unlike an idempotent
tool's call, which commits after it ran and whose ids a crash may therefore lose.
"""

from __future__ import annotations

from typing import Any

from repertory import Agent, InMemorySessionStore, Session, ToolContext
from repertory.core.messages import ToolCallPart
from repertory.core.state import RunState
from repertory.runtime._settle import plan_calls
from repertory.runtime.tools import Tool
from repertory.testing import ScriptedModel


class Follow(Tool):
    """A tool that reattaches; it records whether its call was durable when it ran."""

    reattaches = True

    def __init__(self, store: InMemorySessionStore, seen: list[bool], *, idempotent: bool = False) -> None:
        super().__init__(self.follow, name="follow", idempotent=idempotent)
        self.store, self.seen = store, seen

    async def follow(self, ctx: ToolContext, job: str) -> str:
        run = await self.store.load_run(ctx.run_id)
        assert run is not None and run.history_revision_id is not None
        history = await self.store.load_history(run.history_revision_id)
        assert history is not None
        self.seen.append(any(c.tool_call_id == ctx.call_id for m in history.messages for c in m.tool_calls))
        return f"followed {job}"


def test_a_reattaching_call_recovered_runs_again_where_others_get_outcome_unknown() -> None:
    tools: dict[str, Any] = {"follow": Follow(InMemorySessionStore(), [])}
    run = RunState(run_id="r", thread_id="t")
    [job] = plan_calls(
        [ToolCallPart(tool_call_id="a", tool_name="follow", args={"job": "x"})], tools, run, fresh=False
    ).jobs
    assert job.call.tool_call_id == "a"


async def test_a_reattaching_call_is_durable_before_the_tool_runs() -> None:
    store = InMemorySessionStore()
    seen: list[bool] = []
    model = ScriptedModel([{"tool": "follow", "args": {"job": "x"}}, {"text": "done"}])
    # Idempotent as well: its early commit is then owed to ``reattaches`` alone.
    agent = Agent(name="a", model=model, tools=[Follow(store, seen, idempotent=True)])
    result = await Session(store=store, agent=agent).start("go")
    assert result.text == "done"
    assert seen == [True]
