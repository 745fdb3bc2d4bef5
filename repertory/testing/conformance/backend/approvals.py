"""Approvals and suspensions through the handle: ``pending_approvals``, ``approve``, ``reject``, ``resume``."""

from __future__ import annotations

from typing import Any

import pytest

from repertory.core.toolspec import ToolSpec
from repertory.errors import InvalidResumeToken, RunCancelled, WrongSuspensionKind
from repertory.runtime.tools import ToolContext, suspend, tool
from repertory.testing.conformance.backend.doubles import Recorder, Script, history, within
from repertory.testing.conformance.backend.runtimes import BackendSuite, RuntimeFactory

__all__ = ["ApprovalsConformance"]


RAN = Recorder("approvals.ran")


@tool(requires_approval=True)
def transfer(ctx: ToolContext, to: str, amount: int) -> str:
    """Move money (needs approval)."""
    RAN.append((f"{to}:{amount}", ctx.approval))
    return f"sent {amount} to {to}"


def ask_human(question: str) -> str:
    """Ask the person at the keyboard."""
    suspend(reason="need input", payload={"question": question})


def _script() -> Script:
    return Script(
        {
            "pay": [{"tool": "transfer", "args": {"to": "bob", "amount": 10}}, {"text": "paid"}],
            "ask": [{"tool": "ask_human", "args": {"question": "colour?"}}],
        }
    )


def _tool_results(messages: list[Any]) -> list[Any]:
    return [p for m in messages for p in m.tool_results]


class ApprovalsConformance(BackendSuite):
    """Approvals and suspensions through handles: each decision once, in mailbox order, with typed errors."""

    async def test_pending_approvals_then_approve_runs_the_tool_once(self, make_runtime: RuntimeFactory) -> None:
        script = _script()
        rt = await make_runtime(script.agent(tools=[transfer]))
        h = await rt.create_session(agent="assistant")
        assert await h.pending_approvals() == []

        turn = await h.send("pay")
        suspended = await within(turn.result())
        assert suspended.status == "suspended" and suspended.text is None
        assert await turn.status() == "suspended"
        [pending] = await h.pending_approvals()
        assert pending.kind == "approval" and pending.token
        assert pending.payload == {
            "tool_name": "transfer",
            "args": {"to": "bob", "amount": 10},
            "tool_call_id": pending.tool_call_id,
        }
        assert RAN == []

        result = await within(h.approve(pending.token, approval={"by": "carol"}))
        assert (result.status, result.text) == ("done", "paid")
        assert RAN == [("bob:10", {"by": "carol"})]
        assert await h.pending_approvals() == []
        assert await turn.status() == "done"
        assert (await within(h.get_turn(turn.submission_id).result())).text == "paid"
        with pytest.raises(InvalidResumeToken):
            await h.approve(pending.token)  # single use
        assert RAN == [("bob:10", {"by": "carol"})]

    async def test_approve_with_args_runs_the_tool_with_the_new_arguments(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(_script().agent(tools=[transfer]))
        h = await rt.create_session(agent="assistant")
        await within(h.run("pay"))
        [pending] = await h.pending_approvals()
        result = await within(h.approve(pending.token, args={"to": "dave", "amount": 3}))
        assert result.status == "done"
        assert RAN == [("dave:3", None)]
        [res] = _tool_results(await history(rt, h))
        assert (res.result, res.is_error) == ("sent 3 to dave", False)

    async def test_approve_with_invalid_args_leaves_the_token_live(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(_script().agent(tools=[transfer]))
        h = await rt.create_session(agent="assistant")
        await within(h.run("pay"))
        [pending] = await h.pending_approvals()
        with pytest.raises(Exception):  # noqa: B017 - the validation error's class is the tool layer's business
            await within(h.approve(pending.token, args={"to": "dave", "amount": "lots"}))
        assert RAN == []
        assert (await h.metadata()).status == "suspended"
        assert [p.token for p in await h.pending_approvals()] == [pending.token]
        assert (await within(h.approve(pending.token))).status == "done"
        assert RAN == [("bob:10", None)]

    async def test_reject_gives_the_model_an_error_result_and_never_runs_the_tool(
        self, make_runtime: RuntimeFactory
    ) -> None:
        script = _script()
        rt = await make_runtime(script.agent(tools=[transfer]))
        h = await rt.create_session(agent="assistant")
        turn = await h.send("pay")
        await within(turn.result())
        [pending] = await h.pending_approvals()
        result = await within(h.reject(pending.token, reason="over budget"))
        assert result.status == "done"
        assert RAN == []
        [res] = _tool_results(await history(rt, h))
        assert res.is_error and "over budget" in str(res.result)
        assert any(p.tool_call_id == res.tool_call_id for p in _tool_results(script.requests[-1]))
        assert await turn.status() == "done"
        assert (await h.metadata()).status == "idle"

    async def test_resume_answers_a_suspend_and_checks_the_kind(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(_script().agent(tools=[transfer, ask_human]))
        h = await rt.create_session(agent="assistant")
        turn = await h.send("ask")
        suspended = await within(turn.result())
        assert suspended.status == "suspended"
        assert await h.pending_approvals() == []  # a suspend() is not an approval
        assert (await h.metadata()).status == "suspended"
        assert suspended.state.suspended_on is not None
        token = suspended.state.suspended_on.token
        with pytest.raises(WrongSuspensionKind):
            await h.approve(token)
        with pytest.raises(InvalidResumeToken):
            await h.resume("not-the-token", "red")
        result = await within(h.resume(token, "red"))
        assert (result.status, result.text) == ("done", "re: red")
        assert await turn.status() == "done"
        with pytest.raises(InvalidResumeToken):
            await h.resume(token, "again")

    async def test_a_client_tool_suspends_and_its_resume_value_is_the_call_result(
        self, make_runtime: RuntimeFactory
    ) -> None:
        script = Script({"paint": [{"tool": "pick_color", "args": {"of": "wall"}}, {"text": "painted"}]})
        rt = await make_runtime(script.agent(tools=[transfer]))
        h = await rt.create_session(agent="assistant")
        spec = ToolSpec(name="pick_color", description="Ask the browser for a colour.")
        with pytest.raises(ValueError, match="transfer"):
            await h.send("paint", client_tools=[spec, ToolSpec(name="transfer")])  # the agent's own name
        turn = await h.send("paint", client_tools=[spec])
        suspended = await within(turn.result())
        assert suspended.status == "suspended"
        assert [t.name for t in script.requests_tools[0]] == ["transfer", "pick_color"]  # the model saw it
        on = suspended.state.suspended_on
        assert on is not None and on.kind == "suspend"
        assert on.payload == {"client_tool": "pick_color", "tool_call_id": on.tool_call_id, "args": {"of": "wall"}}
        result = await within(h.resume(on.token, {"color": "teal"}))
        assert (result.status, result.text) == ("done", "painted")
        [answer] = [p for p in _tool_results(await history(rt, h)) if p.tool_name == "pick_color"]
        assert (answer.tool_call_id, answer.result, answer.is_error) == (on.tool_call_id, {"color": "teal"}, False)
        assert [m.role for m in await history(rt, h)] == ["user", "assistant", "tool", "assistant"]
        with pytest.raises(InvalidResumeToken):
            await h.resume(on.token, {"color": "red"})

    async def test_a_new_turn_supersedes_a_suspended_run(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(_script().agent(tools=[transfer]))
        h = await rt.create_session(agent="assistant")
        old = await h.send("pay")
        await within(old.result())
        [pending] = await h.pending_approvals()

        new = await h.send("never mind")
        assert (await within(new.result())).text == "re: never mind"
        old_run = await rt.store.load_run(
            (await rt.store.load_turn(old.submission_id)).run_id  # type: ignore[union-attr]
        )
        assert old_run is not None and old_run.status == "cancelled"
        [res] = _tool_results(await history(rt, h))
        assert res.is_error  # the pending call got an error result
        assert await h.pending_approvals() == []
        # The superseded turn is over too: it is not still "suspended" with a dead run.
        assert await old.status() == "cancelled"
        with pytest.raises(RunCancelled):
            await within(old.result())
        with pytest.raises(InvalidResumeToken):
            await h.approve(pending.token)
        assert RAN == []

    async def test_cancelling_a_suspended_turn_closes_it(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(_script().agent(tools=[transfer]))
        h = await rt.create_session(agent="assistant")
        turn = await h.send("pay")
        await within(turn.result())
        [pending] = await h.pending_approvals()
        await within(turn.cancel())
        assert await turn.status() == "cancelled"
        assert await h.pending_approvals() == []
        assert (await h.metadata()).status == "idle"
        with pytest.raises(InvalidResumeToken):
            await h.approve(pending.token)
        assert RAN == []

    async def test_session_cancel_stops_the_running_turn_and_every_queued_one(
        self, make_runtime: RuntimeFactory
    ) -> None:
        script = _script()
        gate = script.hold("running")  # never released
        rt = await make_runtime(script.agent(tools=[transfer]))
        h = await rt.create_session(agent="assistant")
        running = await h.send("running")
        queued = [await h.send(f"queued {i}") for i in range(3)]
        await gate.reached()

        await within(h.cancel())
        for t in [running, *queued]:
            assert await t.status() == "cancelled"
            with pytest.raises(RunCancelled):
                await within(t.result())
        assert all(script.count(f"queued {i}") == 0 for i in range(3))
        assert (await h.metadata()).status == "idle"
        assert (await within(h.run("fresh start"))).text == "re: fresh start"

    async def test_session_cancel_closes_a_suspended_run(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(_script().agent(tools=[transfer]))
        h = await rt.create_session(agent="assistant")
        turn = await h.send("pay")
        await within(turn.result())
        [pending] = await h.pending_approvals()
        await within(h.cancel())
        assert await turn.status() == "cancelled"
        assert await h.pending_approvals() == []
        assert (await h.metadata()).status == "idle"
        with pytest.raises(InvalidResumeToken):
            await h.approve(pending.token)
        [res] = _tool_results(await history(rt, h))
        assert res.is_error
        await within(h.cancel())  # nothing left to cancel: a no-op
