"""repertory serves each agent as an A2A 1.0 agent: the official ``a2a-sdk`` client drives it end to end.

A task is a turn (its id the submission id), a ``contextId`` a session. Sent blocking or not,
streamed, resubscribed, read, listed and cancelled; an ``input-required`` task (an approval, a
``suspend()``) is answered by the next message, exactly once; another owner's task is not found.
"""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    InvalidParamsError,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskState,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict

from repertory.http.a2a_card import DECISIONS
from tests.http.a2a.conftest import a2a_client, artifact_text, data_of, send, stream, user
from tests.http.agents import gate
from tests.http.conftest import ALICE, BOB, ServerThread

DONE = TaskState.TASK_STATE_COMPLETED
ASKS = TaskState.TASK_STATE_INPUT_REQUIRED


async def test_the_card_describes_the_agent_its_tools_and_how_to_answer(a2a_server: ServerThread) -> None:
    async with httpx.AsyncClient(headers={"x-api-key": ALICE}) as http:
        card = await A2ACardResolver(http, f"{a2a_server.url}/a2a/assistant").get_agent_card()
    assert card.name == "assistant"
    assert card.capabilities.streaming and card.capabilities.push_notifications
    [interface] = card.supported_interfaces
    assert interface.url == f"{a2a_server.url}/a2a/assistant"
    assert (interface.protocol_binding, interface.protocol_version) == ("JSONRPC", "1.0")
    skills = {s.id: list(s.tags) for s in card.skills}
    assert skills["delete_account"] == ["tool", "needs-approval"] and skills["lookup"] == ["tool"]
    [extension] = card.capabilities.extensions
    assert extension.uri == DECISIONS and "decision" in MessageToDict(extension.params)["properties"]
    assert set(card.security_schemes) == {"apiKey", "bearer"}
    async with httpx.AsyncClient() as http:
        keyless = await http.get(f"{a2a_server.url}/a2a/assistant/.well-known/agent-card.json")
        unknown = await http.get(
            f"{a2a_server.url}/a2a/nobody/.well-known/agent-card.json", headers={"x-api-key": ALICE}
        )
    assert keyless.status_code == 401 and unknown.status_code == 404


async def test_a_blocking_send_returns_the_completed_task_with_its_reply_and_history(a2a_server: ServerThread) -> None:
    async with a2a_client(a2a_server.url, ALICE, streaming=False) as client:
        task = await send(client, user("hello there"))
        assert task.status.state == DONE
        assert artifact_text(task) == "Hello! How can I help?"
        assert [(m.role, m.parts[0].text) for m in task.history] == [
            (1, "hello there"),
            (2, "Hello! How can I help?"),
        ]
        again = await client.get_task(GetTaskRequest(id=task.id, history_length=1))
        assert again.id == task.id and again.context_id == task.context_id
        assert [m.parts[0].text for m in again.history] == ["Hello! How can I help?"]
        # The next message in the same context is a new task (a new turn) of the same session.
        second = await send(client, user("hello again", context_id=task.context_id))
        assert second.context_id == task.context_id and second.id != task.id
        listed = await client.list_tasks(ListTasksRequest(context_id=task.context_id))
        assert [t.id for t in listed.tasks] == [second.id, task.id] and listed.total_size == 2


async def test_a_context_id_the_client_chooses_becomes_its_session(a2a_server: ServerThread) -> None:
    context = f"ctx-{uuid.uuid4().hex}"
    async with a2a_client(a2a_server.url, ALICE, streaming=False) as client:
        task = await send(client, user("hello", context_id=context))
    assert task.context_id == context and task.status.state == DONE
    async with httpx.AsyncClient(headers={"x-api-key": ALICE}) as http:
        thread = (await http.get(f"{a2a_server.url}/threads/{context}")).json()
    assert thread["thread_id"] == context and thread["metadata"]["graph_id"] == "assistant"


async def test_a_non_blocking_send_returns_at_once_and_subscribe_follows_it_to_the_end(
    a2a_server: ServerThread,
) -> None:
    name = f"a2a-sub-{uuid.uuid4().hex}"
    async with a2a_client(a2a_server.url, ALICE, streaming=False) as client:
        task = await send(client, user(f"block {name}"), return_immediately=True)
        assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    async with a2a_client(a2a_server.url, ALICE) as client:
        events = []
        async for event in client.subscribe(SubscribeToTaskRequest(id=task.id)):
            events.append(event)
            if len(events) == 1:
                assert event.task.id == task.id
                assert event.task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
                gate(name).set()
        final = events[-1]
        assert final.status_update.status.state == DONE
        [reply] = [e.artifact_update for e in events if e.HasField("artifact_update") and e.artifact_update.last_chunk]
        assert reply.artifact.parts[0].text == f"unblocked {name}"
        with pytest.raises(UnsupportedOperationError):  # an ended task has no stream: GetTask reads it
            async for _ in client.subscribe(SubscribeToTaskRequest(id=task.id)):
                pass


async def test_a_streamed_send_sends_the_task_its_states_and_the_reply(a2a_server: ServerThread) -> None:
    async with a2a_client(a2a_server.url, ALICE) as client:
        events = await stream(client, user("research tides"))
    first, last = events[0], events[-1]
    assert first.HasField("task") and first.task.status.state in (
        TaskState.TASK_STATE_SUBMITTED,
        TaskState.TASK_STATE_WORKING,
    )
    assert last.status_update.task_id == first.task.id and last.status_update.status.state == DONE
    final = [e.artifact_update for e in events if e.HasField("artifact_update")][-1]
    assert final.last_chunk and not final.append and final.artifact.parts[0].text == "research done"
    # Every chunk of the reply artifact, applied as A2A says (append or start over), ends as the stored reply.
    text = ""
    for e in events:
        if e.HasField("artifact_update"):
            chunk = e.artifact_update.artifact.parts[0].text
            text = text + chunk if e.artifact_update.append else chunk
    assert text == "research done"


async def test_cancel_ends_a_working_task_once(a2a_server: ServerThread) -> None:
    name = f"a2a-cancel-{uuid.uuid4().hex}"
    try:
        async with a2a_client(a2a_server.url, ALICE, streaming=False) as client:
            task = await send(client, user(f"block {name}"), return_immediately=True)
            cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
            assert cancelled.id == task.id and cancelled.status.state == TaskState.TASK_STATE_CANCELED
            with pytest.raises(TaskNotCancelableError):
                await client.cancel_task(CancelTaskRequest(id=task.id))
            with pytest.raises(UnsupportedOperationError):  # an ended task takes no more messages
                await send(client, user("more", task_id=task.id))
    finally:
        gate(name).set()


async def test_an_approval_is_input_required_and_the_next_message_approves_it_once(a2a_server: ServerThread) -> None:
    async with a2a_client(a2a_server.url, ALICE, streaming=False) as client:
        task = await send(client, user("delete acct-a2a-1"))
        assert task.status.state == ASKS
        asked = data_of(task.status.message)
        assert asked["kind"] == "approval"
        [call] = asked["calls"]
        assert (call["tool_name"], call["args"]) == ("delete_account", {"account_id": "acct-a2a-1"})
        done = await send(client, user(task_id=task.id, data={"decision": "approve"}))
        assert done.id == task.id and done.status.state == DONE
        assert artifact_text(done) == "finished: deleted acct-a2a-1 (approved by alice)"
        with pytest.raises(UnsupportedOperationError):  # a second answer: the task has moved on
            await send(client, user(task_id=task.id, data={"decision": "reject"}))


async def test_a_reject_carries_its_reason_and_an_edit_replaces_the_arguments(a2a_server: ServerThread) -> None:
    async with a2a_client(a2a_server.url, ALICE, streaming=False) as client:
        task = await send(client, user("delete acct-a2a-2"))
        rejected = await send(client, user(task_id=task.id, data={"decision": "reject", "reason": "not that one"}))
        assert artifact_text(rejected) == "finished: not that one (error)"
        task = await send(client, user("delete acct-a2a-3"))
        with pytest.raises(InvalidParamsError):  # an edit that does not validate changes nothing
            await send(client, user(task_id=task.id, data={"decision": "edit", "args": {"nope": 1}}))
        edited = await send(client, user(task_id=task.id, data={"decision": "edit", "args": {"account_id": "acct-x"}}))
        assert artifact_text(edited) == "finished: deleted acct-x (approved by alice)"


async def test_a_suspend_is_answered_by_text_and_two_racing_answers_apply_once(a2a_server: ServerThread) -> None:
    async with a2a_client(a2a_server.url, ALICE, streaming=False) as client:
        task = await send(client, user("ask"))
        assert task.status.state == ASKS
        asked = data_of(task.status.message)
        assert asked == {"kind": "input", "reason": "need input", "payload": {"question": "which color?"}}
        answers = await asyncio.gather(
            send(client, user("blue", task_id=task.id)),
            send(client, user("green", task_id=task.id)),
            return_exceptions=True,
        )
    applied = [a for a in answers if not isinstance(a, BaseException)]
    refused = [a for a in answers if isinstance(a, BaseException)]
    assert len(applied) == 1 and len(refused) == 1, answers
    assert isinstance(refused[0], InvalidParamsError | UnsupportedOperationError)
    assert artifact_text(applied[0]) in ("you said blue", "you said green")


async def test_a_streamed_answer_follows_the_task_to_its_end(a2a_server: ServerThread) -> None:
    async with a2a_client(a2a_server.url, ALICE) as client:
        asked = await stream(client, user("ask"))
        assert asked[-1].status_update.status.state == ASKS
        task_id = asked[0].task.id
        events = await stream(client, user("red", task_id=task_id))
    assert events[-1].status_update.status.state == DONE
    assert [e.artifact_update.artifact.parts[0].text for e in events if e.HasField("artifact_update")][-1] == (
        "you said red"
    )


async def test_another_owners_task_and_context_are_not_found(a2a_server: ServerThread) -> None:
    async with a2a_client(a2a_server.url, ALICE, streaming=False) as alice:
        task = await send(alice, user("delete acct-a2a-bob"))
    async with a2a_client(a2a_server.url, BOB, streaming=False) as bob:
        with pytest.raises(TaskNotFoundError):
            await bob.get_task(GetTaskRequest(id=task.id))
        with pytest.raises(TaskNotFoundError):
            await bob.cancel_task(CancelTaskRequest(id=task.id))
        with pytest.raises(TaskNotFoundError):  # nor may bob answer alice's question
            await send(bob, user(task_id=task.id, data={"decision": "approve"}))
        with pytest.raises(InvalidParamsError):  # alice's session id is not a context bob can use
            await send(bob, user("hello", context_id=task.context_id))
        listed = await bob.list_tasks(ListTasksRequest())
        assert task.id not in {t.id for t in listed.tasks}
    async with a2a_client(a2a_server.url, ALICE, streaming=False) as alice:
        still = await alice.get_task(GetTaskRequest(id=task.id))
        assert still.status.state == ASKS  # bob's answer changed nothing
        await send(alice, user(task_id=task.id, data={"decision": "reject"}))


async def test_a_wrong_key_and_an_unknown_agent_are_refused_before_any_rpc(a2a_server: ServerThread) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    async with httpx.AsyncClient(base_url=a2a_server.url, headers={"A2A-Version": "1.0"}) as http:
        assert (await http.post("/a2a/assistant", json=body)).status_code == 401
        assert (await http.post("/a2a/assistant", json=body, headers={"x-api-key": "x" * 20})).status_code == 403
        listed = await http.post("/a2a/assistant", json=body, headers={"authorization": f"Bearer {ALICE}"})
        assert listed.status_code == 200 and "tasks" in listed.json()["result"]
        unknown = await http.post("/a2a/nobody", json=body, headers={"x-api-key": ALICE})
        assert unknown.status_code == 404
