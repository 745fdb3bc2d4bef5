"""``@tool(requires_approval=callable)``: the policy sees each call's arguments and decides for that call alone."""

from __future__ import annotations

from typing import Any

from repertory import Agent, Session, ToolContext, tool
from repertory.storage import SessionStore
from repertory.testing import ScriptedModel

from .helpers import assert_paired, result_for, run_history, tool_calls


def _wire_agent(ran: list[int], seen: list[dict[str, Any]]) -> Agent:
    def over_100(args: dict[str, Any]) -> bool:
        seen.append(args)
        return int(args["amount"]) > 100

    @tool(requires_approval=over_100)
    def wire(ctx: ToolContext, amount: int) -> str:
        ran.append(amount)
        return f"sent {amount}"

    model = ScriptedModel(
        [
            {"tools": [{"tool": "wire", "args": {"amount": 20}}, {"tool": "wire", "args": {"amount": 500}}]},
            {"text": "done"},
        ]
    )
    return Agent(name="payer", model=model, tools=[wire])


async def test_a_policy_asks_only_for_the_calls_it_flags(store: SessionStore) -> None:
    ran: list[int] = []
    seen: list[dict[str, Any]] = []
    sess = Session(store=store, agent=_wire_agent(ran, seen))
    first = await sess.start("pay twice")
    assert first.status == "suspended" and first.state.suspended_on is not None
    payload = first.state.suspended_on.payload
    assert isinstance(payload, dict) and payload["args"] == {"amount": 500}
    assert ran == [20]  # the small one ran at once, unasked
    assert {"amount": 20} in seen and {"amount": 500} in seen
    done = await sess.approve_tool(first.state.suspended_on.token, approval="ok")
    assert done.status == "done" and ran == [20, 500]
    messages = await run_history(store, done.run_id)
    assert_paired(messages)
    big = next(c for c in tool_calls(messages) if c.args == {"amount": 500})
    assert result_for(messages, big.tool_call_id).result == "sent 500"


async def test_a_policy_that_raises_puts_the_call_to_a_human(store: SessionStore) -> None:
    def broken(args: dict[str, Any]) -> bool:
        raise KeyError("no idea")

    @tool(requires_approval=broken)
    def risky(x: int) -> int:
        return x

    agent = Agent(name="a", model=ScriptedModel([{"tool": "risky", "args": {"x": 1}}, {"text": "ok"}]), tools=[risky])
    result = await Session(store=store, agent=agent).start("try")
    assert result.status == "suspended" and result.state.suspended_on is not None
    assert result.state.suspended_on.kind == "approval"


def test_the_flag_still_works_and_the_repr_says_so() -> None:
    @tool(requires_approval=lambda args: args.get("x") == 1)
    def maybe(x: int) -> int:
        return x

    assert maybe.needs_approval({"x": 1}) and not maybe.needs_approval({"x": 2})
    assert "approval" in repr(maybe)

    @tool(requires_approval=True)
    def always(x: int) -> int:
        return x

    assert always.needs_approval({"x": 2})
