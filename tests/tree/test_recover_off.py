"""``Runtime.start(recover=False)``: a second process on the store decides without re-driving the fleet's turns.

Found by the chaos soak (issue 26): its approver process opened a local runtime on the store the
driver process was running, and that start re-drove every turn the driver was in the middle of,
so the same turn ran in two processes at once. With ``recover=False`` the approver's start leaves
open turns alone (the process that runs them, or the next normal start, finishes them), and a
decision it makes still drives that one run on, there.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from repertory import Agent, ModelMessage, Runtime, tool
from repertory.core.model import ToolSpec
from repertory.testing import ScriptedModel

PAID: list[int] = []


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay (needs approval)."""
    PAID.append(amount)
    return f"paid {amount}"


def _agent(asked: list[str], hold: asyncio.Event | None, held: asyncio.Event | None = None) -> Agent:
    async def step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        prompt = next(m.text for m in messages if m.role == "user")
        asked.append(prompt)
        if prompt == "long" and hold is not None:
            if held is not None:
                held.set()
            await hold.wait()  # never set: the first runtime closes under this request
        if prompt == "pay" and messages[-1].role == "user":
            return {"tool": "pay", "args": {"amount": 5}}
        return {"text": f"done {prompt}"}

    return Agent(name="assistant", model=ScriptedModel(step), tools=[pay])


async def test_a_runtime_started_without_recovery_leaves_open_turns_and_still_decides(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    PAID.clear()
    first: list[str] = []
    held = asyncio.Event()
    rt1 = await Runtime.start(store=url, agents={"assistant": _agent(first, asyncio.Event(), held)})
    busy = await rt1.create_session(agent="assistant")
    payer = await rt1.create_session(agent="assistant")
    assert (await payer.run("pay")).status == "suspended"
    long_turn = await busy.send("long")
    await asyncio.wait_for(held.wait(), 30)  # the model is asked (and held) before the runtime closes
    await rt1.close()  # detaches: the turn stays running in the store, as after a crash

    second: list[str] = []
    async with await Runtime.start(store=url, agents={"assistant": _agent(second, None)}, recover=False) as rt2:
        assert rt2.host.resident == 0  # nothing was activated to be re-driven
        [pending] = await (await rt2.session(payer.id)).pending_approvals()
        result = await (await rt2.session(payer.id)).approve(pending.token)
        assert result.status == "done" and PAID == [5]  # its decision drove that run here
        turn = await rt2.store.load_turn(long_turn.submission_id)
        assert turn is not None and turn.status == "running"
        assert "long" not in second  # the open turn was left to the process that runs it

    third: list[str] = []
    async with await Runtime.start(store=url, agents={"assistant": _agent(third, None)}) as rt3:
        done = await (await rt3.session(busy.id)).get_turn(long_turn.submission_id).result()
        assert done.status == "done" and third.count("long") == 1
