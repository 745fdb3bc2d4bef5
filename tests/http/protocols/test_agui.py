"""AG-UI at ``POST /ag-ui/{assistant_id}`` over HTTP: every SSE message parsed by ``ag-ui-protocol``'s event union.

The server is the suite's SQLite server (``tests/http/conftest.py``) with the agents of
``tests/http/agents.py``; each test makes its own thread. A ``repertory serve`` process SIGKILLed in
the middle of a reply and started again on its SQLite file serves the AI SDK tests' word-by-word
agents (``aisdk_agents.py``). ``@ag-ui/client``'s ``HttpAgent`` drives the same routes in
``test_agui_client.py``.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from ag_ui.core import Event
from pydantic import TypeAdapter

from tests.http.agents import DELETED, gate
from tests.http.conftest import ALICE, BOB, ServerThread, sse_events
from tests.http.test_serve import _serve as serve

EVENT: TypeAdapter[Event] = TypeAdapter(Event)
STREAMING = "tests.http.protocols.aisdk_agents:make_agents"
"""Agents whose model streams word by word (``slow N``), for a ``repertory serve`` killed mid-reply."""
Frame = tuple[str | None, dict[str, Any]]


def _input(thread_id: str, messages: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    return {"threadId": thread_id, "runId": str(uuid.uuid4()), "messages": messages, "tools": [], **more}


def _user(text: str) -> dict[str, Any]:
    return {"id": str(uuid.uuid4()), "role": "user", "content": text}


async def _each(response: httpx.Response) -> AsyncIterator[Frame]:
    """Each SSE message as ``(id, event)`` as it arrives, the event validated by the protocol's own models first."""
    ident: str | None = None
    async for line in response.aiter_lines():
        if line.startswith("id: "):
            ident = line[4:]
        elif line.startswith("data: "):
            event = EVENT.validate_json(line[6:])
            yield ident, event.model_dump(mode="json", by_alias=True)
            ident = None


async def _frames(response: httpx.Response) -> list[Frame]:
    """Every SSE message of the response (see ``_each``)."""
    return [frame async for frame in _each(response)]


async def post(server: ServerThread, body: dict[str, Any], key: str = ALICE, assistant: str = "assistant") -> Any:
    """The events of one input, or ``(status, detail)`` when it is refused."""
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=30) as http,
        http.stream("POST", f"/ag-ui/{assistant}", json=body, headers={"x-api-key": key}) as response,
    ):
        if response.status_code != 200:
            await response.aread()
            return response.status_code, response.json()["detail"]
        assert response.headers["content-type"].startswith("text/event-stream")
        return await _frames(response)


async def get(server: ServerThread, thread_id: str, key: str = ALICE, **headers: str) -> Any:
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=30) as http,
        http.stream(
            "GET", f"/ag-ui/assistant/threads/{thread_id}/stream", headers={"x-api-key": key, **headers}
        ) as response,
    ):
        if response.status_code != 200:
            await response.aread()
            return response.status_code
        return await _frames(response)


def types(frames: list[Frame]) -> list[str]:
    return [e["type"] for _, e in frames]


def one(frames: list[Frame], kind: str) -> dict[str, Any]:
    found = [e for _, e in frames if e["type"] == kind]
    assert len(found) == 1, (kind, types(frames))
    return found[0]


def text_of(frames: list[Frame]) -> str:
    return "".join(e["delta"] for _, e in frames if e["type"] == "TEXT_MESSAGE_CONTENT")


def retraction(frames: list[Frame], message_id: str) -> int:
    """Where a retraction's snapshot is: the first from a stored event (the end's has no id), after ``message_id``."""
    found = [i for i, (seq, e) in enumerate(frames) if e["type"] == "MESSAGES_SNAPSHOT" and seq is not None]
    assert found, f"no snapshot of a retraction in {types(frames)}"
    at = found[0]
    # The open message closed first, nothing more of it after, and the snapshot without it.
    assert frames[at - 1][1] == {"type": "TEXT_MESSAGE_END", "messageId": message_id}
    assert not [e for _, e in frames[at:] if e.get("messageId") == message_id]
    assert [m["role"] for m in frames[at][1]["messages"]] == ["user"]
    return at


async def test_a_chat_streams_text_under_the_id_the_history_gives_it(sqlite_server: ServerThread) -> None:
    thread = f"agui-{uuid.uuid4()}"
    frames = await post(sqlite_server, _input(thread, [_user("hello there")]))
    assert types(frames)[0] == "RUN_STARTED" and types(frames)[-1] == "RUN_FINISHED"
    started = one(frames, "RUN_STARTED")
    assert started["threadId"] == thread and started["metadata"]["clientRunId"]
    start = one(frames, "TEXT_MESSAGE_START")
    assert text_of(frames) == "Hello! How can I help?"
    snapshot = one(frames, "MESSAGES_SNAPSHOT")["messages"]
    assert [m["role"] for m in snapshot] == ["user", "assistant"]
    assert snapshot[1]["id"] == start["messageId"] and snapshot[1]["content"] == "Hello! How can I help?"
    assert one(frames, "RUN_FINISHED")["outcome"] == {"type": "success"}
    seqs = [int(i) for i, _ in frames if i is not None]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)

    # The client sends the whole conversation again; only the new user message is a turn.
    again = await post(sqlite_server, _input(thread, [*snapshot, _user("hello again")]))
    assert one(again, "RUN_STARTED")["runId"] != started["runId"]
    roles = [m["role"] for m in one(again, "MESSAGES_SNAPSHOT")["messages"]]
    assert roles == ["user", "assistant", "user", "assistant"]


async def test_tool_calls_reasoning_and_steps(sqlite_server: ServerThread) -> None:
    frames = await post(sqlite_server, _input(f"agui-{uuid.uuid4()}", [_user("research owls")]))
    kinds = types(frames)
    assert kinds.count("TOOL_CALL_START") == kinds.count("TOOL_CALL_END") == kinds.count("TOOL_CALL_RESULT") == 2
    assert [e["stepName"] for _, e in frames if e["type"] == "STEP_STARTED"] == ["step 1", "step 2", "step 3"]
    assert kinds.count("STEP_FINISHED") == 3
    results = [e["content"] for _, e in frames if e["type"] == "TOOL_CALL_RESULT"]
    assert results == ["facts about owls", "facts about owls again"]
    args = [e["delta"] for _, e in frames if e["type"] == "TOOL_CALL_ARGS"]
    assert args == ['{"q": "owls"}', '{"q": "owls again"}']
    reasoning = [e["delta"] for _, e in frames if e["type"] == "REASONING_MESSAGE_CONTENT"]
    assert reasoning == ["one more look"]
    assert kinds.index("REASONING_START") < kinds.index("REASONING_END") < kinds.index("TEXT_MESSAGE_START")
    snapshot = one(frames, "MESSAGES_SNAPSHOT")["messages"]
    reasoning_id = one(frames, "REASONING_START")["messageId"]
    assert any(m["role"] == "reasoning" and m["id"] == reasoning_id for m in snapshot)
    tool_ids = {e["messageId"] for _, e in frames if e["type"] == "TOOL_CALL_RESULT"}
    assert tool_ids <= {m["id"] for m in snapshot if m["role"] == "tool"}


async def test_an_approval_is_an_interrupt_decided_exactly_once(sqlite_server: ServerThread) -> None:
    thread, account = f"agui-{uuid.uuid4()}", f"acct-{uuid.uuid4().hex[:8]}"
    frames = await post(sqlite_server, _input(thread, [_user(f"delete {account}")]))
    finished = one(frames, "RUN_FINISHED")
    (interrupt,) = finished["outcome"]["interrupts"]
    call = one(frames, "TOOL_CALL_START")
    assert interrupt["id"] == interrupt["toolCallId"] == call["toolCallId"]
    assert interrupt["reason"] == "tool_approval" and "approved" in interrupt["responseSchema"]["properties"]
    messages = one(frames, "MESSAGES_SNAPSHOT")["messages"]

    entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
    resumed = await post(sqlite_server, _input(thread, messages, resume=[entry]))
    assert one(resumed, "RUN_STARTED")["runId"] == finished["runId"]  # the same run goes on
    assert one(resumed, "TOOL_CALL_RESULT")["content"] == f"deleted {account} (approved by alice)"
    assert text_of(resumed) == f"finished: deleted {account} (approved by alice)"
    assert one(resumed, "RUN_FINISHED")["outcome"] == {"type": "success"}

    status, detail = await post(sqlite_server, _input(thread, messages, resume=[entry]))
    assert status == 409 and interrupt["id"] in detail and "already answered" in detail
    assert DELETED[account] == 1


async def test_a_cancelled_or_refused_approval_rejects(sqlite_server: ServerThread) -> None:
    for answer in ({"status": "cancelled"}, {"status": "resolved", "payload": {"approved": False, "reason": "no"}}):
        thread, account = f"agui-{uuid.uuid4()}", f"acct-{uuid.uuid4().hex[:8]}"
        frames = await post(sqlite_server, _input(thread, [_user(f"delete {account}")]))
        (interrupt,) = one(frames, "RUN_FINISHED")["outcome"]["interrupts"]
        entry = {"interruptId": interrupt["id"], **answer}
        resumed = await post(sqlite_server, _input(thread, [], resume=[entry]))
        assert text_of(resumed).endswith("(error)")
        assert DELETED[account] == 0


async def test_edited_arguments_are_validated_before_anything_is_decided(sqlite_server: ServerThread) -> None:
    thread, account = f"agui-{uuid.uuid4()}", f"acct-{uuid.uuid4().hex[:8]}"
    frames = await post(sqlite_server, _input(thread, [_user(f"delete {account}")]))
    (interrupt,) = one(frames, "RUN_FINISHED")["outcome"]["interrupts"]
    bad = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True, "args": {"nope": 1}}}
    status, detail = await post(sqlite_server, _input(thread, [], resume=[bad]))
    assert status == 422 and detail.startswith("resume[0].payload.args")
    edited = {**bad, "payload": {"approved": True, "args": {"account_id": f"{account}-b"}}}
    resumed = await post(sqlite_server, _input(thread, [], resume=[edited]))
    assert one(resumed, "TOOL_CALL_RESULT")["content"].startswith(f"deleted {account}-b")


async def test_a_client_tool_suspends_and_the_next_input_answers_it(sqlite_server: ServerThread) -> None:
    thread = f"agui-{uuid.uuid4()}"
    tool = {"name": "pick_color", "description": "Ask the person at the browser", "parameters": {"type": "object"}}
    clash = {**tool, "name": "ask_human"}  # the agent's own tool: the client cannot run it instead
    status, detail = await post(sqlite_server, _input(thread, [_user("paint door")], tools=[clash]))
    assert status == 422 and "ask_human" in str(detail)
    frames = await post(sqlite_server, _input(thread, [_user("paint door")], tools=[tool]))
    call = one(frames, "TOOL_CALL_START")
    assert call["toolCallName"] == "pick_color" and "TOOL_CALL_RESULT" not in types(frames)
    assert "".join(e["delta"] for _, e in frames if e["type"] == "TOOL_CALL_ARGS") == '{"of": "door"}'
    outcome = one(frames, "RUN_FINISHED")["outcome"]
    assert outcome == {"type": "success", "pendingToolCallIds": [call["toolCallId"]]}
    messages = one(frames, "MESSAGES_SNAPSHOT")["messages"]
    assert not [m for m in messages if m["role"] == "tool"]  # the call's stand-in result is not shown
    answer = {"id": str(uuid.uuid4()), "role": "tool", "toolCallId": call["toolCallId"], "content": "green"}
    answered = await post(sqlite_server, _input(thread, [*messages, answer], tools=[tool]))
    assert text_of(answered) == "painted green"  # the client's answer is the call's result
    status, detail = await post(sqlite_server, _input(thread, [*messages, answer], tools=[tool]))
    assert status == 409 and call["toolCallId"] in detail


async def test_a_delegated_child_is_a_subagent(sqlite_server: ServerThread) -> None:
    frames = await post(sqlite_server, _input(f"agui-{uuid.uuid4()}", [_user("hello child")]), assistant="lead")
    started, finished = one(frames, "SUBAGENT_STARTED"), one(frames, "SUBAGENT_FINISHED")
    assert (
        started["name"] == "assistant" and started["parentToolCallId"] == one(frames, "TOOL_CALL_START")["toolCallId"]
    )
    assert finished["subagentRunId"] == started["subagentRunId"] and finished["result"] == "Hello! How can I help?"
    assert text_of(frames) == "lead: Hello! How can I help?"


async def test_a_delegated_childs_approval_is_an_interrupt_of_the_parent(sqlite_server: ServerThread) -> None:
    thread, account = f"agui-{uuid.uuid4()}", f"acct-{uuid.uuid4().hex[:8]}"
    frames = await post(sqlite_server, _input(thread, [_user(f"delete {account}")]), assistant="lead")
    (interrupt,) = one(frames, "RUN_FINISHED")["outcome"]["interrupts"]
    child = one(frames, "SUBAGENT_STARTED")["subagentRunId"]
    assert interrupt["subagentRunId"] == child and interrupt["reason"] == "tool_approval"
    assert one(frames, "SUBAGENT_FINISHED")["outcome"] == {"type": "suspended", "interruptIds": [interrupt["id"]]}
    entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
    resumed = await post(sqlite_server, _input(thread, [], resume=[entry]), assistant="lead")
    assert text_of(resumed) == f"lead: finished: deleted {account} (approved by alice)"
    assert DELETED[account] == 1


async def test_the_stream_again_from_its_start_or_after_the_last_event_id(sqlite_server: ServerThread) -> None:
    thread = f"agui-{uuid.uuid4()}"
    live = await post(sqlite_server, _input(thread, [_user("research bats")]))
    replay = await get(sqlite_server, thread)

    # The same events, ids and all, from the durable log; the live snapshot named the user's
    # message by the client's id (the replay has no client to ask).
    def same(frames: list[Frame]) -> list[Frame]:
        return [
            (i, {k: v for k, v in e.items() if k != "metadata"}) for i, e in frames if e["type"] != "MESSAGES_SNAPSHOT"
        ]

    assert same(replay) == same(live)
    snapshots = [e["messages"] for _, e in replay if e["type"] == "MESSAGES_SNAPSHOT"]
    assert [m["role"] for m in snapshots[0]] == ["user"]  # a reloaded page first gets what came before
    assert [m["role"] for m in snapshots[-1]] == [m["role"] for m in one(live, "MESSAGES_SNAPSHOT")["messages"]]
    # Resume after the reasoning delta: the client had the reasoning, not what followed it.
    cut = next(int(i) for i, e in live if e["type"] == "REASONING_MESSAGE_CONTENT" and i is not None)
    rest = await get(sqlite_server, thread, **{"Last-Event-ID": str(cut)})
    assert types(rest)[:3] == ["RUN_STARTED", "STEP_STARTED", "REASONING_START"]  # reopened, then continued
    assert "REASONING_MESSAGE_CONTENT" not in types(rest)
    assert [e for i, e in rest if i is not None and int(i) <= cut] == []
    after = [e for i, e in live if i is not None and int(i) > cut]
    assert [e for i, e in rest if i is not None] == after
    assert text_of(rest) == "research done"
    assert await get(sqlite_server, f"agui-{uuid.uuid4()}") == 404


async def test_bad_inputs_are_422_naming_the_field(sqlite_server: ServerThread) -> None:
    thread = f"agui-{uuid.uuid4()}"
    status, detail = await post(sqlite_server, {"runId": "r", "messages": []})
    assert status == 422 and "body.threadId" in detail
    image = {"id": "u", "role": "user", "content": [{"type": "image", "source": {"type": "url", "value": "http://x"}}]}
    assert await post(sqlite_server, _input(thread, [image])) == (
        422,
        "messages[0].content[0]: repertory takes text parts only, not 'image'",
    )
    status, detail = await post(sqlite_server, _input(thread, [_user("hello"), _user("hello")]))
    assert status == 422 and detail.startswith("messages[1]")
    status, detail = await post(sqlite_server, _input(thread, [{"id": "a", "role": "assistant", "content": "hi"}]))
    assert status == 422 and detail.startswith("messages[0].role")
    status, detail = await post(sqlite_server, _input(thread, [_user("hello")], resume=[{"interruptId": "x"}]))
    assert status == 422 and "body.resume.0.status" in detail
    assert await get(sqlite_server, thread) == 404  # a refused input leaves no thread behind


async def test_another_owners_thread_is_refused(sqlite_server: ServerThread) -> None:
    thread = f"agui-{uuid.uuid4()}"
    await post(sqlite_server, _input(thread, [_user("hello")]))
    status, detail = await post(sqlite_server, _input(thread, [_user("hello")]), key=BOB)
    assert status == 422 and "cannot be used" in detail  # the answer a reserved id gets: nothing disclosed
    assert await get(sqlite_server, thread, key=BOB) == 404
    async with httpx.AsyncClient(base_url=sqlite_server.url, timeout=30) as http:
        response = await http.post("/ag-ui/assistant", json=_input(thread, [_user("hello")]))
        assert response.status_code == 401


async def test_a_reply_cut_off_by_a_cancel_is_replaced_by_the_stored_conversation(sqlite_server: ServerThread) -> None:
    thread, name = f"agui-{uuid.uuid4()}", f"cut-{uuid.uuid4().hex[:8]}"
    frames: list[Frame] = []
    async with (
        httpx.AsyncClient(base_url=sqlite_server.url, timeout=30, headers={"x-api-key": ALICE}) as http,
        http.stream("POST", "/ag-ui/assistant", json=_input(thread, [_user(f"halfway {name}")])) as response,
    ):
        assert response.status_code == 200
        events = _each(response)
        async for frame in events:
            frames.append(frame)
            if frame[1]["type"] == "TEXT_MESSAGE_CONTENT":
                break  # the model waits at the gate with half its reply out, and that half is stored
        run_id = one(frames, "RUN_STARTED")["runId"]
        assert (await http.post(f"/threads/{thread}/runs/{run_id}/cancel")).status_code == 204
        gate(name).set()
        frames += [frame async for frame in events]
    full, partial = f"a reply about {name} that stops halfway through", text_of(frames)
    assert partial and full.startswith(partial) and len(partial) < len(full)
    message_id = one(frames, "TEXT_MESSAGE_START")["messageId"]

    at = retraction(frames, message_id)
    kinds = types(frames)
    assert kinds[-1] == "RUN_FINISHED" and one(frames, "RUN_FINISHED")["outcome"] == {"type": "cancelled"}
    assert kinds.count("TEXT_MESSAGE_END") == 1  # the end does not close it again
    final = [e["messages"] for _, e in frames if e["type"] == "MESSAGES_SNAPSHOT"][-1]
    assert [m["role"] for m in final] == ["user"]
    # The snapshot stands for the session's reply.retracted of that message (its SSE id is the event's seq).
    log = await sse_events(sqlite_server.url, f"/threads/{thread}/events?after_seq=0", ALICE, until="turn.completed")
    retracted = next(event for _, seq, event in log if seq == frames[at][0])
    assert retracted["type"] == "reply.retracted"
    assert retracted["data"] == {"run_id": run_id, "message_ids": [message_id]}

    # A client that reloads reads the turn from its start: the partial text, then the same retraction.
    replay = await get(sqlite_server, thread)
    assert types(replay)[-1] == "RUN_FINISHED" and text_of(replay) == partial
    assert replay[retraction(replay, message_id)][0] == frames[at][0]
    final = [e["messages"] for _, e in replay if e["type"] == "MESSAGES_SNAPSHOT"][-1]
    assert [m["role"] for m in final] == ["user"]


async def test_sigkill_mid_reply_then_restart_retracts_before_the_new_reply(tmp_path: Path) -> None:
    options = ("--store", f"sqlite:///{tmp_path / 'killed.db'}", "--api-key", f"alice={ALICE}")
    env = {"REPERTORY_TEST_WORD_DELAY": "0.05"}
    proc, url = await serve(*options, env=env, agents=STREAMING)
    try:
        thread = f"agui-{uuid.uuid4()}"
        seen: list[Frame] = []
        async with (
            httpx.AsyncClient(base_url=url, timeout=30, headers={"x-api-key": ALICE}) as http,
            http.stream("POST", "/ag-ui/chat", json=_input(thread, [_user("slow 40")])) as response,
        ):
            assert response.status_code == 200
            async for frame in _each(response):
                seen.append(frame)
                if "w3 " in text_of(seen):
                    break
            proc.send_signal(signal.SIGKILL)  # mid-reply, with the client still connected
            await proc.wait()
        abandoned, partial = one(seen, "TEXT_MESSAGE_START")["messageId"], text_of(seen)
        last = [seq for seq, _ in seen if seq is not None][-1]
        proc, url = await serve(*options, "--port", url.rsplit(":", 1)[1], env=env, agents=STREAMING)

        # The client reconnects where it was: the restarted server re-drives the turn by itself.
        rest = await get_from(url, thread, last)
        kinds = types(rest)
        assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED", kinds
        assert one(rest, "RUN_FINISHED")["outcome"] == {"type": "success"}
        # First the retraction (the reopened partial message closed, a snapshot without it), then the
        # new reply under a new id: the recovered run asked the model again.
        assert kinds.index("TEXT_MESSAGE_CONTENT") > retraction(rest, abandoned)
        new = [e for _, e in rest if e["type"] == "TEXT_MESSAGE_CONTENT"]
        assert all(e["messageId"] != abandoned for e in new)
        async with httpx.AsyncClient(base_url=url, headers={"x-api-key": ALICE}) as http:
            state = (await http.get(f"/threads/{thread}/state")).json()
        stored = [m["content"] for m in state["values"]["messages"] if m["type"] == "ai"]
        assert stored == ["".join(e["delta"] for e in new)]  # the whole new reply, once
        assert not stored[0].startswith(partial[:8])  # a new attempt (its nonce differs), not the killed one's text
        final = [e["messages"] for _, e in rest if e["type"] == "MESSAGES_SNAPSHOT"][-1]
        assert [m["content"] for m in final if m["role"] == "assistant"] == stored
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
            await asyncio.wait_for(proc.wait(), 60)


async def get_from(url: str, thread_id: str, last_event_id: str) -> list[Frame]:
    """The ``chat`` thread's stream after ``last_event_id``, as a reconnecting client reads it."""
    async with (
        httpx.AsyncClient(base_url=url, timeout=30) as http,
        http.stream(
            "GET",
            f"/ag-ui/chat/threads/{thread_id}/stream",
            headers={"x-api-key": ALICE, "Last-Event-ID": last_event_id},
        ) as response,
    ):
        assert response.status_code == 200
        return await _frames(response)
