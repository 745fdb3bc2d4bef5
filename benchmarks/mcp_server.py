"""MCP server overhead: an agent's turn as a ``tools/call`` through repertory's MCP server against ``handle.run()``.

Target: the MCP server adds at most 3 ms (p50) to a turn on loopback. One agent
(``benchmarks.harness.echo``: a zero-delay scripted model, no tools), three ways, each on its own
fresh SQLite file (WAL, durability normal), in interleaved blocks so a busy machine slows every kind alike:

- ``direct``: ``await handle.run("ping")`` in this process (local backend), through the session tree;
- ``stdio``: ``mcp.Client(...).call_tool("echo", {"task": "ping", "session_id": ...})`` against
  ``python -m repertory mcp`` (a child process speaking MCP over its stdin and stdout);
- ``http``: the same call against ``repertory serve``'s ``/mcp`` (streamable HTTP on loopback, keyless).

Each kind continues one session, so every call is one turn of the same size as the direct run's. The
figure against the target: ``p50(stdio or http) - p50(direct)``, what the MCP layer (client, transport,
the SDK's server, our handler, the wait for the turn) adds to the turn.

``python -m benchmarks.mcp_server [--quick]``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.harness.command import Options, main
from benchmarks.harness.echo import AGENTS, PROMPT, REPLY, agents, direct
from benchmarks.harness.echo import NAME as AGENT
from benchmarks.harness.figures import Figures, Target, percentile
from benchmarks.harness.interleaved import Call, interleaved
from benchmarks.harness.served import ENV, repertory_serve
from benchmarks.harness.versions import ROOT
from repertory import Runtime

SIZES = {"full": {"blocks": 20, "calls": 50, "warmup": 20}, "quick": {"blocks": 2, "calls": 10, "warmup": 3}}
TARGET_ADDED_S = 0.003


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


async def scenario(figures: Figures, options: Options) -> None:
    """The three kinds, warmed up, then timed in alternating blocks."""
    from mcp import Client, StdioServerParameters

    size = SIZES[options.mode]
    with tempfile.TemporaryDirectory(prefix="repertory-mcp_server-") as tmp:
        folder = Path(tmp)
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
                kinds = {"direct": direct(handle), "stdio": await _mcp_call(stdio_client),
                         "http": await _mcp_call(http_client)}  # fmt: skip
                times = await interleaved(kinds, blocks=size["blocks"], calls=size["calls"], warmup=size["warmup"])
        finally:
            await rt.close()
    figures.fact("store", "sqlite (WAL, durability normal), one file per kind")
    figures.fact("blocks x calls per block", f"{size['blocks']} x {size['calls']}")
    figures.time("handle.run() in process", times["direct"], note="one turn of the echo agent")
    d50, d99 = statistics.median(times["direct"]), percentile(times["direct"], 99)
    for kind, label in (("stdio", "stdio"), ("http", "HTTP")):
        figures.time(f"tools/call over {label}", times[kind])
        figures.time(f"MCP server over {label}: added to a turn, p50", statistics.median(times[kind]) - d50,
                     target=Target(TARGET_ADDED_S), note="p50(tools/call) - p50(handle.run())")  # fmt: skip
        figures.time(f"MCP server over {label}: added to a turn, p99", percentile(times[kind], 99) - d99)


if __name__ == "__main__":
    main("mcp_server", __doc__, scenario=scenario)
