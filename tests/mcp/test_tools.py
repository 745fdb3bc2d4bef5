"""MCP tools in a session: listing, filters, prefixes, clashes, results, validation and failures.

Each test drives real runs (``Session`` on an in-memory store, a ``ScriptedModel``) against the
SDK-written test servers; ``make_server`` runs a test over stdio and over streamable HTTP.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from repertory import Agent, InMemorySessionStore, ModelMessage, Session, ToolSpec, tool
from repertory.core.messages import ToolResultPart
from repertory.errors import ToolError
from repertory.mcp import MCPServer, MCPTool
from repertory.models._convert import to_openai_messages
from repertory.runtime.tools import ToolSource
from repertory.testing import ScriptedModel
from tests.mcp.helpers import (
    calls,
    died,
    paged_server,
    process_alive,
    result_parts,
    run_messages,
    tools_server,
)
from tests.runtime.helpers import assert_paired

ServerFactory = Callable[..., MCPServer]


def _then(*steps: dict[str, Any]) -> ScriptedModel:
    return ScriptedModel([*steps, {"text": "done"}])


async def _run(agent: Agent, prompt: str = "go") -> tuple[list[ModelMessage], InMemorySessionStore]:
    store = InMemorySessionStore()
    result = await Session(store=store, agent=agent).start(prompt)
    assert result.status == "done", result.state.error
    messages = await run_messages(store, result.run_id)
    assert_paired(messages)
    return messages, store


class SeenTools:
    """A scripted model's step function that records the tools of every request."""

    def __init__(self, steps: list[dict[str, Any]]) -> None:
        self.steps = steps
        self.seen: list[list[ToolSpec]] = []

    def __call__(self, messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        self.seen.append(list(tools))
        done = sum(1 for m in messages if m.role == "assistant")
        return self.steps[done] if done < len(self.steps) else {"text": "done"}


# -- listing, include, prefix, clashes -----------------------------------------------------------------


async def test_a_server_in_tools_adds_all_its_tools_with_their_schemas_unchanged(make_server: ServerFactory) -> None:
    server = make_server()
    assert isinstance(server, ToolSource)
    listed = {t.name: t for t in await server.list_tools()}
    remote = {t.name: t for t in (await server.connection().list_tools(5.0))}
    steps = SeenTools([{"tool": "echo", "args": {"text": "hi"}}])
    agent = Agent(name="a", model=ScriptedModel(steps), tools=[server])
    messages, _ = await _run(agent)
    specs = {s.name: s for s in steps.seen[0]}
    assert set(specs) == set(listed) >= {"echo", "put", "charge", "stats", "slow", "grow"}
    for name, spec in specs.items():
        assert spec.parameters == remote[name].input_schema  # the server's schema, as it is
        assert spec.description == (remote[name].description or "")
    assert result_parts(messages)[0].result == "hi"


async def test_include_filters_and_prefix_renames(make_server: ServerFactory, log: Path) -> None:
    server = make_server(include=["echo", "stats"], prefix="srv_")
    steps = SeenTools([{"tool": "srv_echo", "args": {"text": "x"}}, {"tool": "echo", "args": {"text": "y"}}])
    messages, _ = await _run(Agent(name="a", model=ScriptedModel(steps), tools=[server]))
    assert sorted(s.name for s in steps.seen[0]) == ["srv_echo", "srv_stats"]
    first, second = result_parts(messages)
    assert (first.tool_name, first.result, first.is_error) == ("srv_echo", "x", False)
    assert second.is_error and "unknown tool 'echo'" in str(second.result)
    assert [c["args"] for c in calls(log, "echo")] == [{"text": "x"}]  # the server saw its own name


async def test_two_tools_of_one_name_raise_naming_both_sources(log: Path) -> None:
    @tool
    def echo(text: str) -> str:
        return text

    one, two = tools_server(log, name="one"), tools_server(log, name="two")
    store = InMemorySessionStore()
    with pytest.raises(
        ValueError, match=r"two tools named '\w+': one from MCPServer 'one' and one from MCPServer 'two'"
    ):
        await Session(store=store, agent=Agent(name="a", model=_then(), tools=[one, two])).start("go")
    with pytest.raises(ValueError, match=r"the agent's own tool 'echo' and one from MCPServer 'one'"):
        await Session(store=store, agent=Agent(name="b", model=_then(), tools=[echo, one])).start("go")
    assert await store.list_runs() == []  # nothing was written
    # A prefix tells them apart; both prefixed copies share one child process.
    b = tools_server(log, name="two", prefix="b_")
    agent = Agent(name="c", model=_then(), tools=[echo, tools_server(log, name="one", prefix="a_"), b])
    await agent.refresh_tools()
    assert {"echo", "a_echo", "a_put", "b_echo"} <= set(agent.tools)
    assert one.connection() is two.connection()


async def test_a_paged_listing_of_a_2025_server_is_read_to_the_end(log: Path) -> None:
    server = paged_server(log, tools=5, page=2)
    steps = SeenTools([{"tool": "t4", "args": {"text": "last page"}}])
    messages, _ = await _run(Agent(name="a", model=ScriptedModel(steps), tools=[server]))
    assert [s.name for s in steps.seen[0]] == ["t0", "t1", "t2", "t3", "t4", "grow"]
    assert [e["cursor"] for e in calls(log, event="list")] == [0, 2, 4]
    assert result_parts(messages)[0].result == "t4:last page"


@pytest.mark.parametrize("which", ["tools_server over stdio (2026 protocol)", "paged_server (2025 protocol)", "http"])
async def test_a_changed_tool_list_reaches_the_next_model_request(which: str, log: Path, request: Any) -> None:
    if which.startswith("tools"):
        server, grow = tools_server(log), {"tool": "grow", "args": {"name": "fresh"}}
    elif which.startswith("paged"):
        server, grow = paged_server(log), {"tool": "grow", "args": {"text": "fresh"}}
    else:
        server, grow = request.getfixturevalue("http").server(), {"tool": "grow", "args": {"name": "fresh"}}
    listed = await server.list_tools()
    assert "fresh" not in {t.name for t in listed}

    def step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        names = {t.name for t in tools}
        done = sum(1 for m in messages if m.role == "assistant")
        if done == 0:
            return grow
        if "fresh" in names and not any(p.tool_name == "fresh" for m in messages for p in m.tool_results):
            return {"tool": "fresh", "args": {"text": "new"}}
        if done < 20 and "fresh" not in names:
            # The notification travels apart from the call's answer: the next request may come first.
            return {"tool": "echo" if "echo" in names else "t0", "args": {"text": "waiting"}}
        return {"text": "done"}

    messages, _ = await _run(Agent(name="a", model=ScriptedModel(step), tools=[server]))
    fresh = [p for p in result_parts(messages) if p.tool_name == "fresh"]
    assert len(fresh) == 1 and not fresh[0].is_error and "new" in str(fresh[0].result)
    assert (await server.list_tools()) is (await server.list_tools())  # cached until the next change


# -- results ---------------------------------------------------------------------------------------


async def test_results_text_structured_errors_images_and_resources(make_server: ServerFactory) -> None:
    agent = Agent(
        name="a",
        model=_then(
            {
                "tools": [
                    {"tool": "echo", "args": {"text": "plain"}},
                    {"tool": "stats", "args": {"values": [1.5, 2.5]}},
                    {"tool": "fail", "args": {"message": "no such thing"}},
                    {"tool": "picture", "args": {}},
                    {"tool": "document", "args": {}},
                ]
            }
        ),
        tools=[make_server()],
    )
    messages, _ = await _run(agent)
    echo, stats, fail, picture, document = result_parts(messages)
    assert (echo.result, echo.is_error) == ("plain", False)
    assert (stats.result, stats.is_error) == ({"count": 2, "total": 4.0}, False)  # structuredContent
    assert fail.is_error and "fail" in str(fail.result)
    assert not picture.is_error and isinstance(picture.result, list)
    caption, image = picture.result
    assert caption == {"type": "text", "text": "a red pixel"}
    assert isinstance(image, dict) and image["type"] == "image" and image["mime_type"] == "image/png"
    assert isinstance(image["data"], str) and len(image["data"]) > 40  # kept whole in the history
    assert document.result == [
        {"type": "text", "text": "here it is"},
        {"type": "resource", "resource": {"uri": "file:///notes.txt", "mime_type": "text/plain", "text": "the notes"}},
    ]
    # What a model reads: the image described, never its base64; the embedded text resource in full.
    wire = json.dumps(to_openai_messages(messages))
    assert image["data"] not in wire and "image/png, about" in wire and "the notes" in wire


# -- validation, failures -----------------------------------------------------------------------------


async def test_invalid_arguments_are_an_error_result_and_never_reach_the_server(
    make_server: ServerFactory, log: Path
) -> None:
    agent = Agent(
        name="a",
        model=_then({"tool": "stats", "args": {"values": "not a list"}}, {"tool": "echo", "args": {}}),
        tools=[make_server()],
    )
    messages, _ = await _run(agent)
    bad_type, missing = result_parts(messages)
    assert bad_type.is_error and "invalid arguments for tool 'stats'" in str(bad_type.result)
    assert "values" in str(bad_type.result)
    assert missing.is_error and "'text' is a required property" in str(missing.result)
    assert calls(log, "stats") == [] and calls(log, "echo") == []


async def test_a_slow_call_times_out_as_an_error_result_and_the_run_goes_on(
    make_server: ServerFactory, log: Path
) -> None:
    agent = Agent(
        name="a",
        model=_then({"tool": "slow", "args": {"seconds": 30}}, {"tool": "echo", "args": {"text": "after"}}),
        tools=[make_server(timeout=0.5)],
    )
    messages, _ = await _run(agent)
    slow, echo = result_parts(messages)
    assert slow.is_error
    assert "MCP server 'tools', tool 'slow'" in str(slow.result) and "no answer within 0.5 s" in str(slow.result)
    assert str(slow.result).startswith("outcome unknown: ")  # it was sent: it may have run
    assert (echo.result, echo.is_error) == ("after", False)
    assert len(calls(log, "slow")) == 1 and calls(log, "slow", "done") == []


async def test_a_server_killed_between_calls_is_restarted_on_the_next_call(log: Path) -> None:
    server = tools_server(log)
    whoami = {"tool": "whoami", "args": {}}
    agent = Agent(name="a", model=ScriptedModel([whoami, {"text": "one"}, whoami, {"text": "two"}]), tools=[server])
    store = InMemorySessionStore()
    sess = Session(store=store, agent=agent)
    first = await sess.start("who?")
    [before] = result_parts(await run_messages(store, first.run_id))
    pid = int(str(before.result).split()[0])
    assert int(str(before.result).split()[1]) == os.getpid()  # this process started it
    os.kill(pid, 9)
    await died(pid)
    second = await sess.start("who now?")
    after = result_parts(await run_messages(store, second.run_id))[-1]
    assert not after.is_error and int(str(after.result).split()[0]) != pid
    assert server.connection().connects == 2


async def test_a_stdio_server_that_dies_mid_call_gives_an_error_result_and_the_next_call_reconnects(
    log: Path,
) -> None:
    server = tools_server(log)
    agent = Agent(
        name="a",
        model=_then({"tool": "die", "args": {}}, {"tool": "echo", "args": {"text": "still here"}}),
        tools=[server],
    )
    messages, _ = await _run(agent)
    died, echo = result_parts(messages)
    assert died.is_error and "MCP server 'tools', tool 'die'" in str(died.result)
    assert "went away during the call" in str(died.result)
    assert str(died.result).startswith("outcome unknown: ")  # it was sent: it may have run
    assert (echo.result, echo.is_error) == ("still here", False)
    assert len({c["pid"] for c in calls(log)}) == 2  # a new server process answered the second call


async def test_an_http_server_down_then_back_gives_error_results_then_answers(http: Any, log: Path) -> None:
    server = http.server()
    echo = {"tool": "echo", "args": {"text": "x"}}
    agent = Agent(name="a", model=ScriptedModel([echo, {"text": "ok"}] * 3), tools=[server])
    store = InMemorySessionStore()
    sess = Session(store=store, agent=agent)
    assert (await sess.start("1")).status == "done"
    http.kill()
    down = await sess.start("2")
    [failed] = result_parts(await run_messages(store, down.run_id))[-1:]
    assert failed.is_error and "MCP server 'tools', tool 'echo'" in str(failed.result)
    http.start()
    back = await sess.start("3")
    [answered] = result_parts(await run_messages(store, back.run_id))[-1:]
    assert (answered.result, answered.is_error) == ("x", False)


async def test_http_headers_reach_the_server_and_stay_out_of_reprs(http: Any) -> None:
    server = http.server(headers={"X-Team-Token": "s3cret"})
    agent = Agent(name="a", model=_then({"tool": "header", "args": {"name": "x-team-token"}}), tools=[server])
    messages, _ = await _run(agent)
    assert result_parts(messages)[0].result == "s3cret"
    assert "s3cret" not in repr(server) and "X-Team-Token" in repr(server)


async def test_a_protocol_error_from_the_server_is_an_error_result(log: Path) -> None:
    import mcp_types

    server = paged_server(log)
    await server.list_tools()
    ghost = MCPTool(server, mcp_types.Tool(name="ghost", input_schema={"type": "object"}), name="ghost",
                    requires_approval=False, idempotent=True)  # fmt: skip
    agent = Agent(name="a", model=_then({"tool": "ghost", "args": {}}), tools=[ghost])
    messages, _ = await _run(agent)
    [failed] = result_parts(messages)
    assert failed.is_error
    assert "MCP server 'paged', tool 'ghost': the server answered with an error" in str(failed.result)
    assert "no tool 'ghost'" in str(failed.result)


async def test_a_bad_command_fails_the_start_with_the_command_and_nothing_is_written() -> None:
    store = InMemorySessionStore()
    missing = MCPServer.stdio("/no/such/mcp-server", ["--flag"], name="ghost")
    with pytest.raises(
        ToolError, match=r"MCP server 'ghost' \(/no/such/mcp-server --flag\) did not start: .*not found"
    ):
        await Session(store=store, agent=Agent(name="a", model=_then(), tools=[missing])).start("go")
    failing = tools_server(None, "--fail-start", name="moody")
    with pytest.raises(ToolError) as info:
        await Session(store=store, agent=Agent(name="b", model=_then(), tools=[failing])).start("go")
    text = str(info.value)
    assert "MCP server 'moody'" in text and "tests.mcp.servers.tools_server --fail-start" in text
    assert "refusing to start (asked to by --fail-start)" in text  # the child's stderr tail
    assert await store.list_runs() == []


async def test_a_server_that_cannot_be_reached_over_http_fails_clearly() -> None:
    server = MCPServer.http("http://127.0.0.1:9/mcp", name="nowhere", connect_timeout=5)
    with pytest.raises(ToolError, match=r"MCP server 'nowhere' \(http://127.0.0.1:9/mcp\) could not be reached"):
        await server.list_tools()


# -- one connection per process ---------------------------------------------------------------------


async def test_sessions_share_one_connection_started_on_first_use_and_closed_with_the_runtime(log: Path) -> None:
    from repertory import Runtime

    server = tools_server(log)
    whoami = {"tool": "whoami", "args": {}}
    agent = Agent(name="a", model=ScriptedModel([whoami, {"text": "ok"}]), tools=[server])
    assert calls(log) == []  # configuration only: nothing started yet
    async with await Runtime.start(store="memory://", agents={"a": agent}) as rt:
        handles = [await rt.create_session(agent="a") for _ in range(6)]
        results = await asyncio.gather(*(h.run("who?") for h in handles))
        assert all(r.status == "done" for r in results)
        pids = {c["pid"] for c in calls(log, "whoami")}
        assert len(pids) == 1 and server.connection().connects == 1
        [pid] = pids
        assert process_alive(pid)
    assert not process_alive(pid)  # the Runtime closed the connection: the child is gone


async def test_a_pickled_server_is_configuration_and_lists_again(log: Path) -> None:
    import pickle

    server = tools_server(log, approval="destructive", idempotent=["charge"], prefix="p_", include=["charge", "echo"])
    await server.list_tools()
    copy = pickle.loads(pickle.dumps(server))
    assert (copy.name, copy.prefix, copy.include, copy.approval) == ("tools", "p_", server.include, "destructive")
    tools = {t.name: t for t in await copy.list_tools()}
    assert set(tools) == {"p_charge", "p_echo"} and tools["p_charge"].idempotent and tools["p_charge"].requires_approval
    again = pickle.loads(pickle.dumps(tools["p_echo"]))
    with pytest.raises(ToolError, match="invalid arguments"):
        again.validate({"text": 1})


def test_an_mcp_tool_keeps_every_attribute_a_tool_has() -> None:
    import mcp_types

    @tool
    def plain(x: int) -> int:
        return x

    remote = mcp_types.Tool(name="x", input_schema={"type": "object"})
    mcp_tool = MCPTool(tools_server(None), remote, name="x", requires_approval=False, idempotent=True)
    assert set(vars(plain)) <= set(vars(mcp_tool)), set(vars(plain)) - set(vars(mcp_tool))


def test_bad_configuration_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="approval must be"):
        MCPServer.stdio("x", approval="sometimes")
    with pytest.raises(TypeError, match="idempotent"):
        MCPServer.stdio("x", idempotent="charge")
    with pytest.raises(TypeError, match="list of arguments"):
        MCPServer.stdio(sys.executable, "-m server")
    with pytest.raises(ValueError, match="http:// or https://"):
        MCPServer.http("127.0.0.1:8000/mcp")
    with pytest.raises(ValueError, match="timeout"):
        MCPServer.stdio("x", timeout=0)


async def test_results_stored_are_plain_json(make_server: ServerFactory) -> None:
    messages, _ = await _run(Agent(name="a", model=_then({"tool": "picture", "args": {}}), tools=[make_server()]))
    part = result_parts(messages)[0]
    assert ToolResultPart.model_validate_json(part.model_dump_json()) == part
