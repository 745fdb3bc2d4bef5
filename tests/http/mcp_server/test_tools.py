"""Tools over streamable HTTP with the official client: listing, a call per turn, sessions, bad arguments."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import mcp_types as t
import pytest

from tests.http.agents import gate
from tests.http.conftest import ALICE, BOB, ServerThread, sse_events
from tests.http.mcp_server.conftest import connect


def _text(result: t.CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, t.TextContent)
    return first.text


async def test_tools_are_listed_with_schemas_and_truthful_annotations(sqlite_server: ServerThread) -> None:
    async with connect(sqlite_server.url, ALICE) as client:
        assert client.protocol_version == "2026-07-28"
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert list(tools) == ["assistant", "second", "compacting", "lead", "sessions_list", "session_send", "session_fork"]
    assistant = tools["assistant"]
    assert assistant.input_schema["required"] == ["task"]
    assert set(assistant.input_schema["properties"]) == {"task", "session_id"}
    assert assistant.output_schema is not None and assistant.output_schema["required"] == ["session_id", "text"]
    annotations: dict[str, Any] = {
        name: tool.annotations.model_dump() for name, tool in tools.items() if tool.annotations is not None
    }
    # delete_account is not idempotent: a turn of assistant may do what is not safe to repeat.
    assert annotations["assistant"]["read_only_hint"] is False
    assert annotations["assistant"]["destructive_hint"] is True
    assert annotations["assistant"]["idempotent_hint"] is False
    # second has no tools at all: never read-only (it writes its session), never destructive.
    assert annotations["second"]["read_only_hint"] is False
    assert annotations["second"]["destructive_hint"] is False
    assert annotations["sessions_list"]["read_only_hint"] is True
    assert annotations["session_fork"]["destructive_hint"] is False


async def test_a_call_is_a_turn_and_session_id_continues_it(sqlite_server: ServerThread) -> None:
    async with connect(sqlite_server.url, ALICE) as client:
        first = await client.call_tool("assistant", {"task": "hello there"})
        assert not first.is_error
        assert _text(first) == "Hello! How can I help?"
        assert first.structured_content is not None
        session_id = first.structured_content["session_id"]
        assert first.structured_content["text"] == "Hello! How can I help?"
        second = await client.call_tool("assistant", {"task": "research tides", "session_id": session_id})
        assert not second.is_error and _text(second) == "research done"
        assert second.structured_content == {"session_id": session_id, "text": "research done"}
        read = await client.read_resource(f"repertory://sessions/{session_id}")
    conversation = read.contents[0]
    assert isinstance(conversation, t.TextResourceContents)
    assert conversation.text.splitlines() == [
        "user: hello there",
        "assistant: Hello! How can I help?",
        "user: research tides",
        'assistant: [tool call lookup({"q": "tides"})]',
        "tool: [lookup -> facts about tides]",
        'assistant: [tool call lookup({"q": "tides again"})]',
        "tool: [lookup -> facts about tides again]",
        "assistant: research done",
    ]


async def test_sessions_list_send_and_fork(sqlite_server: ServerThread) -> None:
    async with connect(sqlite_server.url, ALICE) as client:
        made = await client.call_tool("second", {"task": "hi"})
        assert made.structured_content is not None
        session_id = made.structured_content["session_id"]
        listed = await client.call_tool("sessions_list", {"agent": "second"})
        assert listed.structured_content is not None
        sessions = {s["session_id"]: s for s in listed.structured_content["sessions"]}
        assert session_id in sessions
        assert sessions[session_id]["resource"] == f"repertory://sessions/{session_id}"
        assert {s["agent"] for s in sessions.values()} == {"second"}
        sent = await client.call_tool("session_send", {"session_id": session_id, "message": "again"})
        assert sent.structured_content == {"session_id": session_id, "text": "second here"}
        forked = await client.call_tool("session_fork", {"session_id": session_id, "title": "a branch"})
        assert forked.structured_content is not None and not forked.is_error
        child = forked.structured_content["session_id"]
        assert child != session_id and forked.structured_content["forked_from"] == session_id
        # The fork shares the conversation so far; what it says next is its own.
        await client.call_tool("session_send", {"session_id": child, "message": "only in the fork"})
        parent = await client.read_resource(f"repertory://sessions/{session_id}")
        branch = await client.read_resource(f"repertory://sessions/{child}")
    parent_text = parent.contents[0]
    branch_text = branch.contents[0]
    assert isinstance(parent_text, t.TextResourceContents) and isinstance(branch_text, t.TextResourceContents)
    assert "only in the fork" not in parent_text.text
    assert branch_text.text.startswith(parent_text.text)
    assert branch_text.text.endswith("user: only in the fork\nassistant: second here\n")


async def test_bad_arguments_are_error_results(sqlite_server: ServerThread) -> None:
    async with connect(sqlite_server.url, ALICE) as client:
        missing = await client.call_tool("assistant", {})
        wrong_type = await client.call_tool("assistant", {"task": 5})
        extra = await client.call_tool("assistant", {"task": "hello", "colour": "red"})
        no_session = await client.call_tool("assistant", {"task": "hello", "session_id": "no-such-session"})
        other_agent = await client.call_tool("second", {"task": "hi"})
        assert other_agent.structured_content is not None
        wrong_agent = await client.call_tool(
            "assistant", {"task": "hello", "session_id": other_agent.structured_content["session_id"]}
        )
    for result in (missing, wrong_type, extra, no_session, wrong_agent):
        assert result.is_error
    assert "task" in _text(missing) and "task" in _text(wrong_type) and "colour" in _text(extra)
    assert _text(no_session) == "no session 'no-such-session'"
    assert "is a session of 'second', not 'assistant'" in _text(wrong_agent)


async def test_another_owners_session_is_not_found(sqlite_server: ServerThread) -> None:
    async with connect(sqlite_server.url, ALICE) as alice:
        made = await alice.call_tool("second", {"task": "mine"})
        assert made.structured_content is not None
        session_id = made.structured_content["session_id"]
    async with connect(sqlite_server.url, BOB, header="x-api-key") as bob:
        continued = await bob.call_tool("second", {"task": "yours now", "session_id": session_id})
        sent = await bob.call_tool("session_send", {"session_id": session_id, "message": "hi"})
        forked = await bob.call_tool("session_fork", {"session_id": session_id})
        listed = await bob.call_tool("sessions_list", {})
    for result in (continued, sent, forked):
        assert result.is_error and _text(result) == f"no session {session_id!r}"
    assert listed.structured_content is not None
    assert session_id not in {s["session_id"] for s in listed.structured_content["sessions"]}


async def test_a_handshake_era_client_over_http(sqlite_server: ServerThread) -> None:
    async with connect(sqlite_server.url, ALICE, mode="legacy") as client:
        assert client.protocol_version == "2025-11-25"
        names = [tool.name for tool in (await client.list_tools()).tools]
        hello = await client.call_tool("assistant", {"task": "hello legacy"})
        # Stateless HTTP of that era has no back-channel to ask on: the question is named, for another face.
        waiting = await client.call_tool("assistant", {"task": "delete mcp-legacy"})
    assert "assistant" in names and _text(hello) == "Hello! How can I help?"
    assert waiting.is_error and waiting.structured_content is not None
    assert _text(waiting).startswith("the turn waits for a human (approval-")
    assert f"in session {waiting.structured_content['session_id']}" in _text(waiting)


async def test_a_dropped_call_leaves_its_turn_running(sqlite_server: ServerThread) -> None:
    async with httpx.AsyncClient(base_url=sqlite_server.url, headers={"x-api-key": ALICE}) as rest:
        thread = (await rest.post("/threads", json={"metadata": {"graph_id": "assistant"}})).json()
    session_id = thread["thread_id"]

    async def call() -> None:
        async with connect(sqlite_server.url, ALICE) as client:
            await client.call_tool("assistant", {"task": "block mcp-dropped", "session_id": session_id})

    caller = asyncio.create_task(call())
    await sse_events(sqlite_server.url, f"/threads/{session_id}/events", ALICE, "turn.started")
    caller.cancel()  # the client goes away mid-call: its connection closes
    with pytest.raises(asyncio.CancelledError):
        await caller
    gate("mcp-dropped").set()
    events = await sse_events(sqlite_server.url, f"/threads/{session_id}/events", ALICE, "turn.completed")
    assert events[-1][2]["data"]["status"] == "done"
    async with connect(sqlite_server.url, ALICE) as client:
        read = await client.read_resource(f"repertory://sessions/{session_id}")
    assert _text_of(read.contents[0]).endswith("assistant: unblocked mcp-dropped\n")


def _text_of(contents: t.TextResourceContents | t.BlobResourceContents) -> str:
    assert isinstance(contents, t.TextResourceContents)
    return contents.text
