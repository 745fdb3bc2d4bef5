"""The demo's analyst uses the MCP server shipped with the demo: its calls run, one of them after an approval."""

from __future__ import annotations

from repertory import Runtime
from repertory.demo.agents import figures_server, make_agents
from repertory.demo.fleet import run_fleet


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
