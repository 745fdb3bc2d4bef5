"""``python -m repertory mcp`` over stdio, driven by the official client as a subprocess it starts."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import mcp_types as t
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

ROOT = Path(__file__).resolve().parents[3]
AGENTS = "tests.http.agents:make_agents"


def _server(store: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "repertory", "mcp", "--store", f"sqlite:///{store}", "--agents", AGENTS, *extra],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )


def _text(result: t.CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, t.TextContent)
    return first.text


async def _approve(context: Any, params: t.ElicitRequestParams) -> t.ElicitResult:
    assert isinstance(params, t.ElicitRequestFormParams) and "delete_account" in params.message
    return t.ElicitResult(action="accept", content={"decision": "approve"})


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_stdio_tools_calls_approvals_and_resources(tmp_path: Path, mode: Any) -> None:
    async with Client(_server(tmp_path / "s.db"), mode=mode, elicitation_callback=_approve) as client:
        assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert names == ["assistant", "second", "compacting", "lead", "sessions_list", "session_send", "session_fork"]
        first = await client.call_tool("assistant", {"task": "hello stdio"})
        assert _text(first) == "Hello! How can I help?" and first.structured_content is not None
        session_id = first.structured_content["session_id"]
        # An approval: MRTR on 2026-07-28, an elicitation/create request on the handshake era's back-channel.
        deleted = await client.call_tool("assistant", {"task": "delete stdio-acct", "session_id": session_id})
        assert _text(deleted) == "finished: deleted stdio-acct (approved by None)"
        listed = await client.list_resources()
        assert [r.uri for r in listed.resources] == [f"repertory://sessions/{session_id}"]
        read = await client.read_resource(f"repertory://sessions/{session_id}")
        bad = await client.call_tool("assistant", {"task": ""})
    conversation, meta = read.contents
    assert isinstance(conversation, t.TextResourceContents) and isinstance(meta, t.TextResourceContents)
    assert conversation.text.startswith("user: hello stdio\nassistant: Hello! How can I help?\nuser: delete stdio-acct")
    assert json.loads(meta.text)["session_id"] == session_id
    assert bad.is_error


async def test_stdio_second_answer_refused_and_owner_isolation(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    arguments = {"task": "delete stdio-twice"}
    async with Client(_server(store, "--owner", "carol")) as carol:
        first = await carol.session.call_tool("assistant", arguments, allow_input_required=True)
        assert isinstance(first, t.InputRequiredResult) and first.input_requests is not None
        [key] = first.input_requests
        answer: dict[str, t.InputResponse] = {key: t.ElicitResult(action="accept", content={"decision": "approve"})}
        done = await carol.session.call_tool(
            "assistant", arguments, input_responses=answer, request_state=first.request_state
        )
        assert _text(done) == "finished: deleted stdio-twice (approved by carol)"
        with pytest.raises(MCPError) as again:
            await carol.session.call_tool(
                "assistant", arguments, input_responses=answer, request_state=first.request_state
            )
        assert again.value.message == "already answered"
        mine = [r.uri for r in (await carol.list_resources()).resources]
    async with Client(_server(store, "--owner", "dave")) as dave:
        assert (await dave.list_resources()).resources == []
        with pytest.raises(MCPError) as hidden:
            await dave.read_resource(mine[0])
    assert hidden.value.message == "Resource not found"


async def test_a_suspension_over_stdio(tmp_path: Path) -> None:
    async def answer(context: Any, params: t.ElicitRequestParams) -> t.ElicitResult:
        assert isinstance(params, t.ElicitRequestFormParams)
        assert params.message == 'need input: {"question": "which color?"}'
        return t.ElicitResult(action="accept", content={"value": "ochre"})

    async with Client(_server(tmp_path / "s.db"), elicitation_callback=answer) as client:
        result = await client.call_tool("assistant", {"task": "ask"})
    assert _text(result) == "you said ochre"


async def test_a_shared_state_key_lets_another_process_take_the_answer(tmp_path: Path) -> None:
    store, key = tmp_path / "s.db", "k" * 40
    arguments = {"task": "delete stdio-handover"}
    async with Client(_server(store, "--mcp-state-key", key)) as asking:
        first = await asking.session.call_tool("assistant", arguments, allow_input_required=True)
    assert isinstance(first, t.InputRequiredResult) and first.input_requests is not None
    [name] = first.input_requests
    answer: dict[str, t.InputResponse] = {name: t.ElicitResult(action="accept", content={"decision": "approve"})}
    async with Client(_server(store)) as own_key:  # a process with its own key cannot open the state
        with pytest.raises(MCPError) as sealed:
            await own_key.session.call_tool(
                "assistant", arguments, input_responses=answer, request_state=first.request_state
            )
    assert sealed.value.code == -32602
    async with Client(_server(store, "--mcp-state-key", key)) as answering:
        done = await answering.session.call_tool(
            "assistant", arguments, input_responses=answer, request_state=first.request_state
        )
    assert _text(done) == "finished: deleted stdio-handover (approved by None)"


def test_a_short_state_key_is_refused_at_start() -> None:
    from typer.testing import CliRunner

    from repertory.cli import app

    result = CliRunner().invoke(app, ["mcp", "--mcp-state-key", "short", "--agents", AGENTS])
    assert result.exit_code == 2 and "--mcp-state-key has 5 bytes; it needs at least 32" in result.output
