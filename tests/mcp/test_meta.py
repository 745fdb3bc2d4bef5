"""Each ``tools/call`` carries the call's ids in its request ``_meta``: what a server deduplicates its side effects on.

Against the SDK-written test server (over stdio and over streamable HTTP), which logs the
``repertory/*`` keys of the ``_meta`` of every ``charge`` and ``echo`` it receives: the call id is
the ``ToolCallPart``'s, the session id the run's thread, the run id the run's; a call made outside
a run (``tool(**args)``) has no call id to send and sends none.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from repertory import Agent, InMemorySessionStore, Session
from repertory.mcp import META_RUN_ID, META_SESSION_ID, META_TOOL_CALL_ID, MCPServer
from repertory.testing import ScriptedModel
from tests.mcp.helpers import calls, run_messages

ServerFactory = Callable[..., MCPServer]


async def test_every_call_sends_its_call_id_session_id_and_run_id_in_meta(
    make_server: ServerFactory, log: Path
) -> None:
    steps: list[dict[str, Any]] = [
        {"tool": "charge", "args": {"amount": 3}},
        {"tools": [{"tool": "echo", "args": {"text": "a"}}, {"tool": "charge", "args": {"amount": 4}}]},
        {"text": "done"},
    ]
    agent = Agent(name="a", model=ScriptedModel(steps), tools=[make_server()])
    store = InMemorySessionStore()
    result = await Session(store=store, agent=agent).start("go")
    assert result.status == "done", result.state.error
    made = [c for m in await run_messages(store, result.run_id) for c in m.tool_calls]
    received = calls(log, "charge") + calls(log, "echo")
    sent = sorted((c["tool"], c["meta"][META_TOOL_CALL_ID]) for c in received)
    assert sent == sorted((c.tool_name, c.tool_call_id) for c in made)
    assert len({cid for _, cid in sent}) == 3
    for c in received:
        assert c["meta"][META_SESSION_ID] == result.state.thread_id
        assert c["meta"][META_RUN_ID] == result.run_id
        assert set(c["meta"]) == {META_TOOL_CALL_ID, META_SESSION_ID, META_RUN_ID}


async def test_a_direct_call_outside_a_run_sends_no_ids(make_server: ServerFactory, log: Path) -> None:
    server = make_server()
    tools = {t.name: t for t in await server.list_tools()}
    assert await tools["echo"](text="direct") == "direct"
    [received] = calls(log, "echo")
    assert received["meta"] == {}
