"""The demo's analyst uses the MCP server shipped with the demo: its calls run, one of them after an approval.

Told a ledger file (``REPERTORY_FIGURES_LEDGER``, as the chaos soak does), the server records each
``publish_figures`` there, keyed by the call id repertory sent in ``_meta``; untold, it writes nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from repertory import Agent, InMemorySessionStore, Runtime, Session
from repertory.demo.agents import figures_server, make_agents
from repertory.demo.fleet import run_fleet
from repertory.demo.mcp_server import LEDGER_ENV
from repertory.mcp import MCPServer
from repertory.testing import ScriptedModel
from tests.mcp.helpers import run_messages


async def test_the_demo_server_policies_come_from_its_annotations() -> None:
    tools = {t.name: t for t in await figures_server().list_tools()}
    assert set(tools) == {"lookup_figures", "publish_figures", "echo"}
    assert tools["lookup_figures"].idempotent and not tools["lookup_figures"].needs_approval({})
    assert not tools["publish_figures"].idempotent and tools["publish_figures"].needs_approval({})


async def test_a_small_fleet_makes_mcp_calls_and_approves_them() -> None:
    async with await Runtime.start(store="memory://", agents=make_agents(delay=0.0)) as rt:
        stats = await run_fleet(rt, 2, kill_host_at=None)
    assert stats.errors == [] and stats.projects_done == 2
    assert stats.mcp_calls == 4  # each analyst looked figures up and asked to publish them
    assert stats.approved + stats.rejected == 4  # two writes, two publications


async def test_publish_figures_records_each_side_effect_with_the_call_id_where_it_is_told(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    server = MCPServer.stdio(
        sys.executable,
        ["-m", "repertory.demo.mcp_server"],
        env={LEDGER_ENV: str(ledger)},
        name="figures",
        approval="never",
    )
    publish = {"tool": "publish_figures", "args": {"topic": "q3", "summary": "up 4%"}}
    agent = Agent(name="a", model=ScriptedModel([publish, publish, {"text": "done"}]), tools=[server])
    store = InMemorySessionStore()
    result = await Session(store=store, agent=agent).start("publish twice")
    assert result.status == "done", result.state.error
    made = [c.tool_call_id for m in await run_messages(store, result.run_id) for c in m.tool_calls]
    lines = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert [line["tool_call_id"] for line in lines] == made and len(set(made)) == 2
    for line in lines:
        ids = (line["session_id"], line["run_id"], line["tool"])
        assert ids == (result.state.thread_id, result.run_id, "publish_figures")
        assert line["args"] == {"topic": "q3", "summary": "up 4%"}


async def test_without_the_variable_the_demo_server_writes_no_ledger(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    tools = {t.name: t for t in await figures_server().list_tools()}
    assert await tools["publish_figures"](topic="q3", summary="flat") == "published 4 characters about 'q3'"
    assert list(tmp_path.iterdir()) == []
