"""MCP tools through the ``Runtime`` on both backends: local (this process) and Ray (a session host process).

On Ray the agent, its ``MCPServer``s included, is pickled to the host, which opens its own
connections: the stdio server is the host's child, not this process's. Models are step functions
defined here (the host imports this module); what happened is read from the server's call log.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from repertory import Agent, ModelMessage, Runtime, ToolSpec
from repertory.errors import ToolError
from repertory.testing import ScriptedModel
from tests.mcp.helpers import (
    HttpServer,
    calls,
    died,
    process_alive,
    result_parts,
    run_messages,
    tools_server,
    wait_until,
)
from tests.runtime.helpers import assert_paired

Start = Callable[[dict[str, Agent]], Awaitable[Runtime]]


@pytest.fixture(params=["local", "ray"])
async def start(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Start]:
    """``await start(agents)``: a runtime on a fresh SQLite file, on this test's backend; closed after it."""
    backend = request.param
    if backend == "ray":
        request.getfixturevalue("ray_instance")
    started: list[Runtime] = []

    async def start(agents: dict[str, Agent]) -> Runtime:
        options: dict[str, Any] = {"hosts": 1, "keep_hosts": False} if backend == "ray" else {}
        store = f"sqlite:///{tmp_path / f'rt-{len(started)}.db'}"
        rt = await Runtime.start(store=store, backend=backend, agents=agents, **options)
        started.append(rt)
        return rt

    yield start
    for rt in started:
        await rt.close()


def _calls_then_done(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """Each user message is a JSON list of calls to make in one step (then a reply)."""
    import json

    last = messages[-1]
    if last.role == "user":
        return {"tools": [{"tool": c[0], "args": c[1]} for c in json.loads(last.text)]}
    return {"text": "done: " + "; ".join(str(p.result) for p in last.tool_results)}


def _agent(*tools: Any) -> Agent:
    return Agent(name="a", model=ScriptedModel(_calls_then_done), tools=list(tools))


async def test_listing_prefixes_approvals_and_both_transports(start: Start, log: Path, http: HttpServer) -> None:
    import json

    stdio = tools_server(log, approval="destructive", include=["echo", "whoami", "charge"])
    web = http.server(name="web", prefix="web_", include=["echo", "stats"])
    rt = await start({"a": _agent(stdio, web)})
    handles = [await rt.create_session(agent="a") for _ in range(3)]
    results = await asyncio.gather(
        *(
            h.run(json.dumps([["echo", {"text": f"s{i}"}], ["web_stats", {"values": [i, 1]}], ["whoami", {}]]))
            for i, h in enumerate(handles)
        )
    )
    assert all(r.status == "done" for r in results)
    messages = await run_messages(rt.store, results[0].run_id)
    assert_paired(messages)
    echo, stats, whoami = result_parts(messages)
    assert (echo.result, stats.result) == ("s0", {"count": 2, "total": 1.0})
    server_pid, parent = (int(x) for x in str(whoami.result).split())
    if rt.backend == "ray":
        assert parent != os.getpid()  # the host process started its own server
    else:
        assert parent == os.getpid()
    assert {c["pid"] for c in calls(log, "whoami")} == {server_pid}  # one server for every session
    # A destructive call waits for a human, and runs once approved.
    h = handles[0]
    suspended = await h.run(json.dumps([["charge", {"amount": 4, "ref": "r1"}]]))
    assert suspended.status == "suspended"
    [pending] = await h.pending_approvals()
    assert pending.payload == {
        "tool_name": "charge",
        "args": {"amount": 4, "ref": "r1"},
        "tool_call_id": pending.tool_call_id,
    }
    done = await h.approve(pending.token, args={"amount": 5, "ref": "r1"})
    assert done.status == "done" and done.text == "done: charged 5"
    assert [c["args"]["amount"] for c in calls(log, "charge")] == [5]


async def test_a_killed_server_a_slow_call_and_a_changed_list(start: Start, log: Path) -> None:
    import json

    rt = await start({"a": _agent(tools_server(log, timeout=1.0))})
    h = await rt.create_session(agent="a")
    first = await h.run(json.dumps([["whoami", {}]]))
    pid = int(first.text.split()[1]) if first.text else 0
    os.kill(pid, signal.SIGKILL)
    await died(pid)
    second = await h.run(json.dumps([["whoami", {}], ["slow", {"seconds": 30}], ["grow", {"name": "fresh"}]]))
    messages = await run_messages(rt.store, second.run_id)
    whoami, slow, grow = result_parts(messages)[-3:]
    assert not whoami.is_error and int(str(whoami.result).split()[0]) != pid  # restarted on the next call
    assert slow.is_error and "no answer within 1 s" in str(slow.result)
    assert grow.result == "added fresh"
    third = await h.run(json.dumps([["fresh", {"text": "hello"}]]))
    assert third.text == "done: fresh: hello"


async def test_a_bad_command_fails_the_turn_with_the_command(start: Start) -> None:
    from repertory.mcp import MCPServer

    rt = await start({"a": _agent(MCPServer.stdio("/no/such/server", ["--x"], name="ghost"))})
    h = await rt.create_session(agent="a")
    with pytest.raises(ToolError, match=r"MCP server 'ghost' \(/no/such/server --x\) did not start"):
        await h.run('[["echo", {"text": "x"}]]')
    assert (await h.metadata()).status == "idle"


@pytest.mark.parametrize(("tool", "received", "reply"), [("charge", 1, "outcome unknown"), ("put", 2, "done: k=v")])
async def test_a_host_killed_mid_call(
    ray_instance: None, tmp_path: Path, log: Path, tool: str, received: int, reply: str
) -> None:
    import json

    import ray

    rt = await Runtime.start(
        store=f"sqlite:///{tmp_path / 'ray.db'}",
        backend="ray",
        agents={"a": _agent(tools_server(log))},
        hosts=1,
        keep_hosts=False,
    )
    try:
        h = await rt.create_session(agent="a")
        args = {"amount": 1, "delay": 60, "ref": "r"} if tool == "charge" else {"key": "k", "value": "v", "delay": 60}
        turn = await h.send(json.dumps([[tool, args]]))
        wait_until(lambda: len(calls(log, tool)) == 1, what=f"the {tool} call reaching the server")
        client: Any = rt.host  # the Ray host client: its one session host
        [host] = client._hosts
        ray.kill(host, no_restart=False)
        result = await asyncio.wait_for(turn.result(), 90)
        assert result.status == "done" and result.text is not None, result.text
        if tool == "put" and "server went away" in result.text:
            # The kill took the server down first and the dying host committed the call's error
            # result (API 8: the model reads it); the idempotent call then had no reason to run again.
            assert len(calls(log, tool)) == 1
        else:
            assert reply in result.text, result.text
            assert len(calls(log, tool)) == received  # never twice unless idempotent
        for pid in {c["pid"] for c in calls(log)}:
            if process_alive(pid):
                os.kill(pid, signal.SIGKILL)  # the first server, orphaned mid-sleep
    finally:
        await rt.close()
