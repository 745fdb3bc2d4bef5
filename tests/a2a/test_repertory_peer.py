"""repertory calls repertory over A2A: ``a2a_agent`` pointed at ``repertory serve``'s ``/a2a/assistant``.

The served side is ``tests.http.conftest.ServerThread`` (uvicorn on its own thread and loop, its own
SQLite store, alice's key) serving ``tests.http.agents``' ``assistant``, whose plan the prompt's first
word picks (``hello``, ``delete X`` needs an approval, ``ask`` suspends, ``fail``). The caller is a
``Runtime`` of its own whose scripted model sends one task through the tool and quotes the result.
Every remote question becomes a suspension of the caller, answered at the caller: an approval with
``{"decision": ...}`` as the resume value, a ``suspend()`` with text. The remote side is then read
with ``a2a-sdk``'s client: one task per call, in the context derived from the call, ended as told.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.types import ListTasksRequest, Task, TaskState

from repertory import Agent, ModelMessage, Runtime, SuspendReason, ToolSpec
from repertory.a2a import a2a_agent, call_ids
from repertory.runtime.tools import ToolContext
from repertory.testing import ScriptedModel
from tests.http.a2a.conftest import a2a_client, artifact_text
from tests.http.agents import DELETED
from tests.http.conftest import ALICE, KEYS, ServerThread


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """The remote repertory: its own store, alice's and bob's keys."""
    path: Path = tmp_path_factory.mktemp("a2a-peer") / "served.db"
    server = ServerThread(f"sqlite:///{path}", api_keys=KEYS).start()
    yield server
    server.stop()


def _relay(first_task: str) -> Any:
    """The caller's model: sends ``first_task`` to the remote assistant, then quotes what came back."""

    def step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        if len(messages) == 1:
            return {"tool": "remote", "args": {"task": first_task}}
        [result] = messages[-1].tool_results
        return {"text": f"{'error' if result.is_error else 'ok'}: {result.result}"}

    return step


def _callers(served: ServerThread, first_task: str) -> dict[str, Agent]:
    """The caller agent: its one tool is the served assistant, reached over A2A with alice's key."""
    tool = a2a_agent(f"{served.url}/a2a/assistant", name="remote", headers={"x-api-key": ALICE})
    return {"caller": Agent(name="caller", model=ScriptedModel(_relay(first_task)), tools=[tool])}


def _asked(pending: SuspendReason) -> dict[str, Any]:
    """The remote task a caller's suspension waits on (its payload's ``a2a``)."""
    payload: Any = pending.payload
    assert isinstance(payload, dict) and isinstance(payload["a2a"], dict), payload
    remote: dict[str, Any] = payload["a2a"]
    return remote


async def _remote_tasks(served: ServerThread, context_id: str) -> list[Task]:
    """The served assistant's tasks in ``context_id`` with their artifacts, as alice lists them."""
    async with a2a_client(served.url, ALICE, streaming=False) as client:
        listed = await client.list_tasks(ListTasksRequest(context_id=context_id, include_artifacts=True))
    return list(listed.tasks)


async def test_a_call_is_one_task_of_the_remote_repertory_whose_reply_the_model_reads(served: ServerThread) -> None:
    async with await Runtime.start(store="memory://", agents=_callers(served, "hello there")) as rt:
        result = await (await rt.create_session(agent="caller")).run("go")
        assert (result.status, result.text) == ("done", "ok: Hello! How can I help?")
        run = await rt.store.load_run(result.run_id)
        assert run is not None and run.history_revision_id is not None
        history = await rt.store.load_history(run.history_revision_id)
    assert history is not None
    [call] = [c for m in history.messages for c in m.tool_calls]
    # The remote session is the context derived from the run and the call: it holds this one task.
    context_id, _ = call_ids(
        ToolContext(call_id=call.tool_call_id, tool_name="remote", run_id=result.run_id, thread_id="-")
    )
    [task] = await _remote_tasks(served, context_id)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert artifact_text(task) == "Hello! How can I help?"


async def test_a_remote_approval_is_answered_at_the_caller_once(served: ServerThread) -> None:
    async with await Runtime.start(store="memory://", agents=_callers(served, "delete acct-peer-1")) as rt:
        handle = await rt.create_session(agent="caller")
        asked = await handle.run("go")
        assert asked.status == "suspended"
        [pending] = await handle.pending_approvals(tree=True)
        assert pending.kind == "suspend" and pending.session_id == handle.id
        remote = _asked(pending)
        assert (remote["agent"], remote["url"], remote["state"]) == (
            "remote",
            f"{served.url}/a2a/assistant",
            "input-required",
        )
        assert pending.reason is not None
        assert pending.reason.startswith("the remote agent 'remote' asks: 'assistant' wants to call delete_account(")
        assert DELETED["acct-peer-1"] == 0
        done = await handle.resume(pending.token, {"decision": "approve"})
        assert done.status == "done"
        assert done.text == "ok: finished: deleted acct-peer-1 (approved by alice)"
        with pytest.raises(Exception, match="resume token"):
            await handle.resume(pending.token, {"decision": "approve"})  # the answer was given once
        assert await handle.pending_approvals(tree=True) == []
    assert DELETED["acct-peer-1"] == 1, "the remote tool ran once, approved by the caller's answer"
    [task] = await _remote_tasks(served, remote["context_id"])
    assert task.id == remote["task_id"], "the answer went to the task that asked, not to a new one"
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert artifact_text(task) == "finished: deleted acct-peer-1 (approved by alice)"


async def test_a_remote_reject_carries_the_callers_reason(served: ServerThread) -> None:
    async with await Runtime.start(store="memory://", agents=_callers(served, "delete acct-peer-2")) as rt:
        handle = await rt.create_session(agent="caller")
        await handle.run("go")
        [pending] = await handle.pending_approvals(tree=True)
        done = await handle.resume(pending.token, {"decision": "reject", "reason": "not that one"})
        assert done.text == "ok: finished: not that one (error)"
    assert DELETED["acct-peer-2"] == 0
    [task] = await _remote_tasks(served, _asked(pending)["context_id"])
    assert task.status.state == TaskState.TASK_STATE_COMPLETED


async def test_a_remote_suspend_is_answered_by_the_callers_text(served: ServerThread) -> None:
    async with await Runtime.start(store="memory://", agents=_callers(served, "ask")) as rt:
        handle = await rt.create_session(agent="caller")
        asked = await handle.run("go")
        assert asked.status == "suspended"
        [pending] = await handle.pending_approvals(tree=True)
        assert pending.reason is not None and '"question": "which color?"' in pending.reason
        done = await handle.resume(pending.token, "red")
        assert done.text == "ok: you said red"
    assert len(await _remote_tasks(served, _asked(pending)["context_id"])) == 1


async def test_a_remote_failure_is_an_error_result_the_model_reads(served: ServerThread) -> None:
    async with await Runtime.start(store="memory://", agents=_callers(served, "fail")) as rt:
        handle = await rt.create_session(agent="caller")
        result = await handle.run("go")
        assert result.status == "done"
        assert result.text is not None
        assert result.text.startswith("error: the remote agent 'remote' failed: ")
        assert "the model is down" in result.text
