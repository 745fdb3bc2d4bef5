"""The measurement of ``benchmarks.mcp_server`` (see its docstring): three kinds of one turn, interleaved."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from benchmarks.harness.cli import in_temp_folder
from benchmarks.harness.echo import AGENTS, PROMPT, REPLY, agents, direct
from benchmarks.harness.echo import NAME as AGENT
from benchmarks.harness.interleaved import Call, interleaved
from benchmarks.harness.machine import ROOT
from benchmarks.harness.report import Clock, finish, mode_of
from benchmarks.harness.served import ENV, repertory_serve
from benchmarks.harness.stats import dist_ms
from benchmarks.mcp_server import NAME, McpServerReport
from repertory import Runtime

__all__ = ["SIZES", "measure"]

SIZES = {"full": {"blocks": 20, "calls": 50, "warmup": 20}, "quick": {"blocks": 2, "calls": 10, "warmup": 3}}


def _checked(result: Any) -> str:
    """The session id of an MCP call's result, after checking it is the agent's reply."""
    structured = result.structured_content
    if result.is_error or structured is None or structured.get("text") != REPLY:
        raise RuntimeError(f"an MCP call did not return the agent's reply: {result}")
    session_id: str = structured["session_id"]
    return session_id


async def _mcp_call(client: Any) -> Call:
    """A call of ``echo`` continuing one session (the session is made by the first call)."""
    session_id = _checked(await client.call_tool(AGENT, {"task": PROMPT}))

    async def call() -> None:
        _checked(await client.call_tool(AGENT, {"task": PROMPT, "session_id": session_id}))

    return call


async def measure_async(quick: bool, folder: Path) -> McpServerReport:
    """The three kinds, warmed up, then timed in alternating blocks."""
    from mcp import Client, StdioServerParameters

    mode = mode_of(quick)
    clock = Clock.start(NAME, mode)
    size = SIZES[mode]
    rt = await Runtime.start(f"sqlite:///{folder / 'direct.db'}", agents=agents(), idle_timeout=3600)
    stdio_args = ["-m", "repertory", "mcp", "--store", f"sqlite:///{folder / 'stdio.db'}", "--agents", AGENTS]
    stdio = StdioServerParameters(command=sys.executable, args=stdio_args, env=ENV, cwd=str(ROOT))
    try:
        handle = await rt.create_session(agent=AGENT)
        async with (
            repertory_serve(f"sqlite:///{folder / 'http.db'}", AGENTS) as url,
            Client(stdio, cache=None) as stdio_client,
            Client(f"{url}/mcp", cache=None) as http_client,
        ):
            kinds: dict[str, Call] = {
                "direct": direct(handle),
                "stdio": await _mcp_call(stdio_client),
                "http": await _mcp_call(http_client),
            }
            times = await interleaved(kinds, blocks=size["blocks"], calls=size["calls"], warmup=size["warmup"])
    finally:
        await rt.close()
    d, s, h = dist_ms(times["direct"]), dist_ms(times["stdio"]), dist_ms(times["http"])
    report = McpServerReport(
        **clock.frame(), store="sqlite (WAL, durability normal), one file per kind", blocks=size["blocks"],
        calls_per_block=size["calls"], direct=d, stdio=s, http=h,
        stdio_added_p50_ms=round(s.p50_ms - d.p50_ms, 3), http_added_p50_ms=round(h.p50_ms - d.p50_ms, 3),
        stdio_added_p99_ms=round(s.p99_ms - d.p99_ms, 3), http_added_p99_ms=round(h.p99_ms - d.p99_ms, 3),
    )  # fmt: skip
    return finish(report, clock)


def measure(quick: bool) -> McpServerReport:
    """The whole measurement in a fresh temporary folder."""
    return in_temp_folder(NAME, measure_async, quick)
