"""``repertory.a2a.a2a_agent`` calling a remote agent written with ``a2a-sdk``'s server side, through a ``Runtime``.

The remote (``tests/a2a/peer.py``) runs in its own process on loopback and logs every task and
message it receives, so each test counts what reached it: one task per call, an answer sent as the
next message of the task that asked (never as a new task), a failure read by the model.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from repertory import Agent, ModelMessage, Runtime, ToolSpec, agent_tool
from repertory.a2a import SCRATCH_KEY, a2a_agent, call_ids
from repertory.core.messages import ToolCallPart
from repertory.runtime.tools import ToolContext
from repertory.testing import ScriptedModel
from tests.a2a.helpers import Peer


def _relay(first_task: str) -> Any:
    """A caller's model: sends ``first_task``, then quotes the result (a human's answer reaches the remote alone)."""

    def step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        last = messages[-1]
        if len(messages) == 1:
            return {"tool": "peer", "args": {"task": first_task}}
        [result] = last.tool_results
        return {"text": f"{'error' if result.is_error else 'ok'}: {result.result}"}

    return step


def _caller(peer: Peer, first_task: str) -> Agent:
    return Agent(name="caller", model=ScriptedModel(_relay(first_task)), tools=[a2a_agent(peer.url, name="peer")])


def _calls(messages: list[ModelMessage]) -> list[ToolCallPart]:
    return [c for m in messages for c in m.tool_calls]


async def test_a_call_is_one_remote_task_whose_answer_the_model_reads(peer: Peer) -> None:
    async with await Runtime.start(store="memory://", agents={"caller": _caller(peer, "hello there")}) as rt:
        handle = await rt.create_session(agent="caller")
        result = await handle.run("go")
        assert result.status == "done"
        assert result.text == "ok: echo: hello there"
        messages = await _messages(rt, result.run_id)
    [call] = _calls(messages)
    [task] = peer.lines("task")
    [message] = peer.lines("message")
    # The ids the remote saw are the ones derived from the run and the call (any attempt derives them).
    context_id, message_id = call_ids(_ctx(result.run_id, call.tool_call_id))
    assert task[1:] == [message[2], context_id, "hello_there"]
    assert message[1] == message_id


async def test_a_remote_question_suspends_the_run_and_its_answer_goes_to_the_same_remote_task(peer: Peer) -> None:
    async with await Runtime.start(store="memory://", agents={"caller": _caller(peer, "ask shoes")}) as rt:
        handle = await rt.create_session(agent="caller")
        asked = await handle.run("go")
        assert asked.status == "suspended"
        [pending] = await handle.pending_approvals(tree=True)
        assert pending.kind == "suspend" and pending.session_id == handle.id
        assert pending.reason == "the remote agent 'peer' asks: which colour for shoes?"
        assert isinstance(pending.payload, dict) and pending.payload["question"] == "which colour for shoes?"
        [task] = peer.lines("task")
        assert pending.payload["a2a"] == {
            "agent": "peer",
            "url": peer.url,
            "task_id": task[1],
            "context_id": task[2],
            "state": "input-required",
            "round": 1,
        }
        assert asked.state.scratch[SCRATCH_KEY] == {
            pending.tool_call_id: {"task_id": task[1], "context_id": task[2], "state": "input-required", "round": 1}
        }
        done = await handle.resume(pending.token, "red")  # runs the call again, which sends it
        assert done.status == "done"
        assert done.text == "ok: answered red"
        assert [m.role for m in await _messages(rt, done.run_id)] == ["user", "assistant", "tool", "assistant"]
        assert done.state.scratch[SCRATCH_KEY] == {}  # nothing waits any more
        with pytest.raises(Exception, match="resume token"):
            await handle.resume(pending.token, "blue")  # the answer was given once
    assert len(peer.lines("task")) == 1, "the answer went to the task that asked, not to a new one"
    assert [m[2] for m in peer.lines("message")] == [task[1], task[1]]


async def test_cancelling_a_tree_waiting_on_a_remote_question_cancels_the_remote_task(peer: Peer) -> None:
    lead = Agent(name="lead", model=ScriptedModel(_relay_to_child()), tools=[agent_tool("caller", name="caller")])
    agents = {"lead": lead, "caller": _caller(peer, "ask shoes")}
    async with await Runtime.start(store="memory://", agents=agents) as rt:
        root = await rt.create_session(agent="lead")
        turn = await root.send("go")
        async with asyncio.timeout(20):
            while True:  # the question waits in a child the model spawned: nothing of its own to await
                if await root.pending_approvals(tree=True):
                    break
                await asyncio.sleep(0.02)
        [task] = peer.lines("task")
        await root.cancel(tree=True)
        assert await turn.status() == "cancelled"
        assert await root.pending_approvals(tree=True) == []
    assert peer.lines("cancel") == [["cancel", task[1]]], "the remote task waiting for the answer was cancelled"


def _relay_to_child() -> Any:
    """A lead's model: hands the task to its ``caller`` child, then quotes what came back."""

    def step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        if len(messages) == 1:
            return {"tool": "caller", "args": {"task": "go"}}
        return {"text": "ok"}

    return step


async def test_an_answer_that_is_json_goes_as_text_and_as_a_data_part(peer: Peer) -> None:
    async with await Runtime.start(store="memory://", agents={"caller": _caller(peer, "ask hats")}) as rt:
        handle = await rt.create_session(agent="caller")
        await handle.run("go")
        [pending] = await handle.pending_approvals(tree=True)
        done = await handle.resume(pending.token, '{"decision": "approve"}')
    assert done.text == 'ok: answered {"decision": "approve"} with data {"decision": "approve"}'


async def test_a_remote_question_in_a_delegated_child_shows_at_the_root_and_is_answered_there(peer: Peer) -> None:
    def boss(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        if len(messages) == 1:
            return {"tool": "shopper", "args": {"task": "buy shoes"}}
        return {"text": f"boss: {messages[-1].tool_results[0].result}"}

    agents = {
        "boss": Agent(name="boss", model=ScriptedModel(boss), tools=[agent_tool("shopper")]),
        "shopper": _caller(peer, "ask boots"),
    }
    async with await Runtime.start(store="memory://", agents=agents) as rt:
        root = await rt.create_session(agent="boss")
        turn = await root.send("go")
        pending = await _first_pending(root)
        assert pending.kind == "suspend" and pending.session_id != root.id
        assert isinstance(pending.payload, dict) and pending.payload["question"] == "which colour for boots?"
        await root.resume(pending.token, "black")
        result = await asyncio.wait_for(turn.result(), 30)
        assert result.text == "boss: ok: answered black"
    assert len(peer.lines("task")) == 1


async def test_a_remote_failure_is_an_error_result_the_model_reads(peer: Peer) -> None:
    async with await Runtime.start(store="memory://", agents={"caller": _caller(peer, "fail the report")}) as rt:
        handle = await rt.create_session(agent="caller")
        result = await handle.run("go")
    assert result.status == "done"
    assert result.text == "error: the remote agent 'peer' failed: cannot do the report"
    assert len(peer.lines("task")) == 1


async def test_an_unreachable_agent_is_an_error_result(peer: Peer) -> None:
    gone = peer.url.replace("/agents/peer", "/agents/nobody")
    agent = Agent(name="caller", model=ScriptedModel(_relay("hello")), tools=[a2a_agent(gone, name="peer")])
    async with await Runtime.start(store="memory://", agents={"caller": agent}) as rt:
        result = await (await rt.create_session(agent="caller")).run("go")
    assert result.text is not None and result.text.startswith(f"error: the remote agent 'peer' at {gone} failed")
    assert peer.lines("task") == []


def test_the_tool_reattaches_and_validates_its_url() -> None:
    tool = a2a_agent("https://agents.example/a2a/researcher", headers={"Authorization": "Bearer k"})
    assert tool.name == "researcher" and tool.reattaches and not tool.idempotent
    assert tool.spec().parameters["required"] == ["task"]
    with pytest.raises(ValueError, match="http"):
        a2a_agent("ftp://agents.example/x")


def _ctx(run_id: str, call_id: str) -> ToolContext:
    return ToolContext(call_id=call_id, tool_name="peer", run_id=run_id, thread_id="-")


async def _messages(rt: Runtime, run_id: str) -> list[ModelMessage]:
    run = await rt.store.load_run(run_id)
    assert run is not None and run.history_revision_id is not None
    history = await rt.store.load_history(run.history_revision_id)
    assert history is not None
    return history.messages


async def _first_pending(root: Any) -> Any:
    """The first suspension anywhere under the root (the child is spawned by the model: nothing to await)."""
    async with asyncio.timeout(30):
        while not (found := await root.pending_approvals(tree=True)):  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    return found[0]
