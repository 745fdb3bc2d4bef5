"""``@modelcontextprotocol/inspector`` in CLI mode against ``/mcp``: it lists the tools and calls one, in both eras.

The inspector is a client we did not write (TypeScript, the official SDK underneath); it sends
the key as a header the way a user configures it (``--header "x-api-key: ..."``). Ad hoc it
speaks the handshake era (2025-11-25); ``--protocol-era modern`` makes it speak 2026-07-28.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.http.conftest import ALICE, ServerThread
from tests.http.mcp_server.npm_tools import run_js


async def _inspect(url: str, era: str, *args: str) -> dict[str, Any]:
    options = ["--protocol-era", era] if era == "modern" else []
    status, out, err = await run_js(
        "inspector", "--cli", "--server-url", f"{url}/mcp", "--transport", "http", "--header", f"x-api-key: {ALICE}",
        *options, *args, "--format", "json",
    )  # fmt: skip
    assert status == 0, f"inspector failed ({status}):\n{out}\n{err}"
    answer = json.loads(out)
    assert isinstance(answer, dict) and "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_the_inspector_lists_the_tools_and_calls_an_agent(sqlite_server: ServerThread, era: str) -> None:
    listed = await _inspect(sqlite_server.url, era, "--method", "tools/list")
    names = [tool["name"] for tool in listed["tools"]]
    assert names == ["assistant", "second", "compacting", "lead", "sessions_list", "session_send", "session_fork"]
    assert listed["tools"][0]["annotations"]["readOnlyHint"] is False
    called = await _inspect(
        sqlite_server.url, era, "--method", "tools/call", "--tool-name", "assistant", "--tool-arg", "task=hello there"
    )
    assert called["isError"] is False
    assert called["content"] == [{"type": "text", "text": "Hello! How can I help?"}]
    session_id = called["structuredContent"]["session_id"]
    assert called["structuredContent"] == {"session_id": session_id, "text": "Hello! How can I help?"}
    # The session the call made is the caller's, listed by the session tool.
    sessions = await _inspect(sqlite_server.url, era, "--method", "tools/call", "--tool-name", "sessions_list")
    assert session_id in {s["session_id"] for s in sessions["structuredContent"]["sessions"]}


async def test_the_inspector_without_a_key_is_refused(sqlite_server: ServerThread) -> None:
    status, out, err = await run_js(
        "inspector", "--cli", "--server-url", f"{sqlite_server.url}/mcp", "--transport", "http",
        "--method", "tools/list", "--format", "json",
    )  # fmt: skip
    # The 401's WWW-Authenticate: Bearer challenge makes it ask for authorization (OAuth, refused without a TTY).
    assert status != 0 and json.loads((out + err).strip().splitlines()[-1])["error"]["code"] == "auth_required"
