"""A caller that stops waiting for its decision leaves the decision standing and the session working."""

from __future__ import annotations

import asyncio

from repertory import Agent, Runtime, tool
from repertory.testing import ScriptedModel

GATE: dict[str, asyncio.Event] = {}


@tool(requires_approval=True)
async def transfer(to: str) -> str:
    """Move money (needs approval); waits for the test's gate, so the approval is still running when cancelled."""
    GATE["entered"].set()
    await GATE["open"].wait()
    return f"sent to {to}"


async def test_cancelling_an_approve_call_keeps_the_actor_serving() -> None:
    GATE["open"], GATE["entered"] = asyncio.Event(), asyncio.Event()
    model = ScriptedModel([{"tool": "transfer", "args": {"to": "bob"}}, {"text": "paid"}, {"text": "hello again"}])
    async with await Runtime.start(
        store="memory://", agents={"a": Agent(name="a", model=model, tools=[transfer])}
    ) as rt:
        h = await rt.create_session(agent="a")
        first = await h.run("pay")
        assert first.status == "suspended"
        [pending] = await h.pending_approvals()
        approving = asyncio.create_task(h.approve(pending.token))
        await asyncio.wait_for(GATE["entered"].wait(), 10)  # the tool runs: the decision is mid-way
        queued = await h.send("again")  # waits in the mailbox behind the decision
        approving.cancel()
        GATE["open"].set()
        try:
            await approving
        except asyncio.CancelledError:
            pass
        # The decision stood (the tool ran once, the run finished) and the actor still takes turns.
        after = await asyncio.wait_for(queued.result(), 10)
        assert after.status == "done" and after.text == "hello again"
        runs = await rt.store.list_runs(h.id)
        assert [r.status for r in runs] == ["done", "done"]
