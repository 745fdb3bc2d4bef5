"""MCP call overhead: a ``tools/call`` through repertory against a direct ``mcp`` client session calling the same tool.

Target: repertory adds at most 1 ms (p50) to a stdio call beyond the engine's own step cost. The
server is the demo's (``repertory.demo.mcp_server``), its read-only ``echo`` tool, over stdio (a child
process) and over streamable HTTP on loopback (a separate process). Per transport, in interleaved
blocks so a busy machine slows every kind alike:

- ``direct``: ``mcp.Client`` connected to the server, ``client.session.call_tool("echo", ...)``;
- ``tool``: ``MCPTool.invoke`` through ``MCPServer`` (argument validation against the server's
  schema, the shared per-process connection, result conversion);
- ``step``: one engine step whose one call is the MCP ``echo`` (a ``Session`` on the in-memory store,
  a zero-delay ``ScriptedModel``): the time from one model request to the next;
- ``local step``: the same step with an async local ``@tool(idempotent=True)`` ``echo`` instead.

The figure against the target: ``step p50 - local step p50 - direct p50``, what repertory adds to the
call beyond what any step costs. Runs are a few steps long and start afresh, so histories stay small.

``python -m benchmarks.mcp_overhead [--quick]``.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from benchmarks.harness.command import Options, main
from benchmarks.harness.figures import Figures, Target, percentile
from benchmarks.harness.interleaved import timed_calls
from repertory import Agent, InMemorySessionStore, ModelMessage, Session, ToolContext, ToolSpec, tool
from repertory.testing import ScriptedModel

SERVER = [sys.executable, "-m", "repertory.demo.mcp_server"]
SIZES = {
    "full": {"blocks": 40, "calls": 50, "runs": 3, "steps": 20},
    "quick": {"blocks": 3, "calls": 20, "runs": 1, "steps": 10},
}
ARGS = {"text": "ping"}
KINDS = {"direct": "direct SDK session call_tool", "tool": "MCPTool.invoke",
         "step": "engine step with the MCP call", "local": "engine step with a local tool"}  # fmt: skip


@asynccontextmanager
async def _http_server() -> AsyncIterator[str]:
    """The demo server on streamable HTTP, in its own process; yields its URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    proc = await asyncio.create_subprocess_exec(
        *SERVER, "--http", str(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while True:  # another process opening a port: nothing to await but the port itself
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                await writer.wait_closed()
                break
            except OSError:
                if proc.returncode is not None or time.monotonic() > deadline:
                    raise RuntimeError("the demo MCP server did not start serving HTTP") from None
                await asyncio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        await proc.wait()


def _stepper(steps: int, stamps: list[float]) -> Callable[[list[ModelMessage], list[ToolSpec]], dict[str, Any]]:
    """A model that calls ``echo`` ``steps`` times, then replies, stamping the time of every request."""

    def step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        stamps.append(time.perf_counter())
        done = sum(1 for m in messages if m.role == "assistant")
        return {"tool": "echo", "args": ARGS} if done < steps else {"text": "done"}

    return step


async def _steps(tools: list[Any], runs: int, steps: int) -> list[float]:
    """Durations from one model request to the next over ``runs`` fresh runs of ``steps`` calls."""
    out: list[float] = []
    store = InMemorySessionStore()
    for _ in range(runs):
        stamps: list[float] = []
        agent = Agent(name="bench", model=ScriptedModel(_stepper(steps, stamps)), tools=tools, max_steps=steps + 1)
        result = await Session(store=store, agent=agent).start("go")
        if result.status != "done":
            raise RuntimeError(f"a benchmark run ended {result.status}")
        out.extend(b - a for a, b in itertools.pairwise(stamps))
    return out


async def _transport(transport: str, size: dict[str, int], url: str | None) -> dict[str, list[float]]:
    """Each kind's samples over one transport, in alternating blocks."""
    from mcp import Client, StdioServerParameters

    from repertory.mcp import MCPServer

    @tool(name="echo", idempotent=True)
    async def local_echo(text: str) -> str:
        """Return the text (the local twin of the MCP tool)."""
        return text

    if url is None:
        server = MCPServer.stdio(SERVER[0], SERVER[1:], name="figures")
        client = Client(StdioServerParameters(command=SERVER[0], args=SERVER[1:]), cache=None)
    else:
        server, client = MCPServer.http(url, name="figures"), Client(url, cache=None)
    [mcp_echo] = [t for t in await server.list_tools() if t.name == "echo"]
    ctx = ToolContext(call_id="bench", tool_name="echo", run_id="bench", thread_id="bench")
    times: dict[str, list[float]] = {k: [] for k in KINDS}
    async with client:
        session = client.session

        async def direct() -> None:
            await session.call_tool("echo", ARGS)

        async def via_tool() -> None:
            await mcp_echo.invoke(ARGS, ctx)

        await direct()  # warm both connections before timing anything
        await via_tool()
        kinds: dict[str, Callable[[], Awaitable[list[float]]]] = {
            "direct": lambda: timed_calls(size["calls"], direct),
            "tool": lambda: timed_calls(size["calls"], via_tool),
            "step": lambda: _steps([server], size["runs"], size["steps"]),
            "local": lambda: _steps([local_echo], size["runs"], size["steps"]),
        }
        for block in range(size["blocks"]):  # every other block the other way round
            for kind in list(kinds) if block % 2 == 0 else reversed(list(kinds)):
                times[kind] += await kinds[kind]()
    await server.aclose()
    return times


async def scenario(figures: Figures, options: Options) -> None:
    """Both transports, stdio first; each kind's samples and what repertory adds."""
    size = SIZES[options.mode]
    figures.fact("server", "repertory.demo.mcp_server, tool echo (read-only)")
    figures.fact("store", "in-memory")
    figures.fact("sizes", ", ".join(f"{k} {v}" for k, v in size.items()))
    results = {"stdio": await _transport("stdio", size, None)}
    async with _http_server() as url:
        results["http"] = await _transport("http", size, url)
    for t, times in results.items():
        for kind, label in KINDS.items():
            figures.time(f"MCP {t}: {label}", times[kind])
        med = {k: statistics.median(v) for k, v in times.items()}
        figures.time(f"MCP {t} call: what repertory adds beyond the engine's step, p50",
                     med["step"] - med["local"] - med["direct"], target=Target(0.001) if t == "stdio" else None,
                     note="step p50 - local step p50 - direct call p50")  # fmt: skip
        figures.time(f"MCP {t} call: what repertory adds beyond the engine's step, p99",
                     percentile(times["step"], 99) - percentile(times["local"], 99)
                     - percentile(times["direct"], 99))  # fmt: skip
        figures.time(f"MCP {t}: MCPTool.invoke over a direct SDK session, p50", med["tool"] - med["direct"])


if __name__ == "__main__":
    main("mcp_overhead", __doc__, scenario=scenario)
