"""Approval and idempotency of MCP tools: each policy form, then the engine's one path for decisions.

The annotations of the test server's tools (``tests/mcp/servers/tools_server.py``): ``echo``,
``stats``, ``slow`` read-only; ``put`` idempotent and not destructive; ``append_note`` not
destructive, not idempotent; ``delete`` destructive; ``charge`` none at all (the MCP defaults:
destructive, not idempotent).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from repertory import Agent, InMemorySessionStore, Session
from repertory.errors import ToolError
from repertory.mcp import MCPServer
from repertory.testing import ScriptedModel
from tests.mcp.helpers import calls, result_parts, run_messages, tools_server
from tests.runtime.helpers import assert_paired


async def _policies(server: MCPServer) -> dict[str, tuple[bool, bool]]:
    """``{tool: (asks for approval with no arguments, idempotent)}``."""
    return {t.name: (t.needs_approval({}), t.idempotent) for t in await server.list_tools()}


async def test_approval_never_always_and_destructive(log: Path) -> None:
    never = await _policies(tools_server(log))
    assert not any(asks for asks, _ in never.values())
    always = await _policies(tools_server(log, approval="always"))
    assert all(asks for asks, _ in always.values())
    destructive = await _policies(tools_server(log, approval="destructive"))
    asked = sorted(name for name, (asks, _) in destructive.items() if asks)
    # Read-only or destructiveHint: false are not asked; no annotations at all means destructive.
    assert asked == ["charge", "delete", "die", "grow"]
    assert not destructive["echo"][0] and not destructive["put"][0] and not destructive["append_note"][0]


async def test_approval_by_names_server_or_prefixed(log: Path) -> None:
    named = await _policies(tools_server(log, approval=["echo", "x_put"], prefix="x_"))
    assert sorted(n for n, (asks, _) in named.items() if asks) == ["x_echo", "x_put"]


async def test_approval_callable_decides_per_call_with_the_server_names(log: Path) -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    def big_charges(name: str, args: dict[str, Any]) -> bool:
        asked.append((name, args))
        return name == "charge" and args.get("amount", 0) > 10

    server = tools_server(log, approval=big_charges, prefix="pay_")
    agent = Agent(
        name="a",
        model=ScriptedModel(
            [
                {
                    "tools": [
                        {"tool": "pay_charge", "args": {"amount": 5}},
                        {"tool": "pay_charge", "args": {"amount": 50}},
                    ]
                },
                {"text": "done"},
            ]
        ),
        tools=[server],
    )
    store = InMemorySessionStore()
    sess = Session(store=store, agent=agent)
    result = await sess.start("charge twice")
    assert result.status == "suspended" and result.state.suspended_on is not None
    assert result.state.suspended_on.payload == {
        "tool_name": "pay_charge",
        "args": {"amount": 50},
        "tool_call_id": result.state.suspended_on.tool_call_id,
    }
    assert [c["args"]["amount"] for c in calls(log, "charge")] == [5]  # the small one ran, unasked
    assert ("charge", {"amount": 50}) in asked  # the callable gets the server's name
    done = await sess.approve_tool(result.state.suspended_on.token)
    assert done.status == "done"
    assert [c["args"]["amount"] for c in calls(log, "charge")] == [5, 50]


async def test_idempotent_from_annotations_and_overrides(log: Path) -> None:
    hinted = await _policies(tools_server(log))
    assert sorted(n for n, (_, idem) in hinted.items() if idem) == [
        "document",
        "echo",
        "fail",
        "header",
        "picture",
        "put",
        "slow",
        "stats",
        "whoami",
    ]
    assert not hinted["charge"][1] and not hinted["append_note"][1] and not hinted["delete"][1]
    assert all(idem for _, idem in (await _policies(tools_server(log, idempotent=True))).values())
    assert not any(idem for _, idem in (await _policies(tools_server(log, idempotent=False))).values())
    chosen = await _policies(tools_server(log, idempotent=["charge", "y_delete"], prefix="y_"))
    assert sorted(n for n, (_, idem) in chosen.items() if idem) == ["y_charge", "y_delete"]


async def test_approve_with_edited_arguments_validated_by_the_servers_schema(log: Path) -> None:
    agent = Agent(
        name="a",
        model=ScriptedModel([{"tool": "delete", "args": {"path": "/tmp/a"}}, {"text": "done"}]),
        tools=[tools_server(log, approval="destructive")],
    )
    store = InMemorySessionStore()
    sess = Session(store=store, agent=agent)
    suspended = await sess.start("clean up")
    assert suspended.status == "suspended" and suspended.state.suspended_on is not None
    token = suspended.state.suspended_on.token
    with pytest.raises(ToolError, match="invalid arguments for tool 'delete'"):
        await sess.approve_tool(token, args={"path": 7})
    assert calls(log, "delete") == []  # nothing ran, and the token is still live:
    done = await sess.approve_tool(token, approval={"by": "me"}, args={"path": "/tmp/b"})
    assert done.status == "done"
    assert [c["args"] for c in calls(log, "delete")] == [{"path": "/tmp/b"}]
    messages = await run_messages(store, done.run_id)
    assert_paired(messages)
    assert result_parts(messages)[0].result == "deleted /tmp/b"


async def test_a_rejected_call_never_reaches_the_server(log: Path) -> None:
    agent = Agent(
        name="a",
        model=ScriptedModel([{"tool": "charge", "args": {"amount": 9}}, {"text": "fine"}]),
        tools=[tools_server(log, approval="always")],
    )
    store = InMemorySessionStore()
    sess = Session(store=store, agent=agent)
    suspended = await sess.start("pay")
    assert suspended.state.suspended_on is not None
    done = await sess.reject_tool(suspended.state.suspended_on.token, reason="too expensive")
    assert done.status == "done"
    [rejected] = result_parts(await run_messages(store, done.run_id))
    assert rejected.is_error and rejected.result == "too expensive"
    assert calls(log, "charge") == []


async def test_an_approval_decided_after_a_restart_sends_the_call_exactly_once(log: Path, tmp_path: Path) -> None:
    from repertory import SqliteSessionStore

    def agent() -> Agent:
        return Agent(
            name="a",
            model=ScriptedModel([{"tool": "charge", "args": {"amount": 3}}, {"text": "paid"}]),
            tools=[tools_server(log, approval="destructive")],
        )

    store = await SqliteSessionStore.open(tmp_path / "runs.db")
    suspended = await Session(store=store, agent=agent()).start("pay")
    await store.close()
    assert suspended.state.suspended_on is not None
    token = suspended.state.suspended_on.token
    store = await SqliteSessionStore.open(tmp_path / "runs.db")
    try:
        fresh = agent()  # a new process: a new agent, its tools not listed yet
        done = await Session.approve_suspended(store=store, agent=fresh, run_id=suspended.run_id, resume_token=token)
        assert done.status == "done" and done.text == "paid"
        assert len(calls(log, "charge")) == 1
    finally:
        await store.close()
