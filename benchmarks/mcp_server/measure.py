"""The measurement of ``benchmarks.mcp_server`` (see its docstring): three kinds of one turn, interleaved."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from benchmarks.harness.cli import in_temp_folder
from benchmarks.harness.report import Clock, finish, mode_of
from benchmarks.harness.stats import dist_ms
from benchmarks.mcp_server import NAME, McpServerReport
from benchmarks.mcp_server.agents import REPLY, agents
from repertory import Runtime

__all__ = ["SIZES", "measure"]

ROOT = Path(__file__).resolve().parents[2]
AGENTS = "benchmarks.mcp_server.agents:agents"
SIZES = {"full": {"blocks": 20, "calls": 50, "warmup": 20}, "quick": {"blocks": 2, "calls": 10, "warmup": 3}}
_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}

Call = Callable[[], Awaitable[None]]


@asynccontextmanager
async def _serve(store: str) -> AsyncIterator[str]:
    """``repertory serve`` (keyless, loopback) in its own process; yields its URL, read from its start-up line."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "repertory", "serve", "--port", "0", "--agents", AGENTS, "--store", store,
        "--log-level", "warning", cwd=ROOT, env=_ENV, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    drain: asyncio.Task[None] | None = None
    try:
        while True:
            line = (await asyncio.wait_for(proc.stderr.readline(), 120)).decode()
            if not line:
                raise RuntimeError(f"repertory serve exited with {await proc.wait()} before it listened")
            if "listening on " in line:
                break
        drain = asyncio.create_task(_drain(proc.stderr))  # a full pipe would stall the server
        yield line.split("listening on ")[1].split()[0]
    finally:
        proc.terminate()
        await proc.wait()
        if drain is not None:
            await drain


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass


def _checked(result: Any) -> str:
    """The session id of an MCP call's result, after checking it is the agent's reply."""
    structured = result.structured_content
    if result.is_error or structured is None or structured.get("text") != REPLY:
        raise RuntimeError(f"an MCP call did not return the agent's reply: {result}")
    session_id: str = structured["session_id"]
    return session_id


async def _mcp_call(client: Any) -> Call:
    """A call of ``echo`` continuing one session (the session is made by the first call)."""
    session_id = _checked(await client.call_tool("echo", {"task": "ping"}))

    async def call() -> None:
        _checked(await client.call_tool("echo", {"task": "ping", "session_id": session_id}))

    return call


async def _timed(n: int, call: Call) -> list[float]:
    out: list[float] = []
    for _ in range(n):
        started = time.perf_counter()
        await call()
        out.append(time.perf_counter() - started)
    return out


async def measure_async(quick: bool, folder: Path) -> McpServerReport:
    """The three kinds, warmed up, then timed in alternating blocks."""
    from mcp import Client, StdioServerParameters

    mode = mode_of(quick)
    clock = Clock.start(NAME, mode)
    size = SIZES[mode]
    rt = await Runtime.start(f"sqlite:///{folder / 'direct.db'}", agents=agents(), idle_timeout=3600)
    stdio_args = ["-m", "repertory", "mcp", "--store", f"sqlite:///{folder / 'stdio.db'}", "--agents", AGENTS]
    stdio = StdioServerParameters(command=sys.executable, args=stdio_args, env=_ENV, cwd=str(ROOT))
    try:
        handle = await rt.create_session(agent="echo")

        async def direct() -> None:
            result = await handle.run("ping")
            if result.status != "done" or result.text != REPLY:
                raise RuntimeError(f"a direct turn ended {result.status}: {result.text!r}")

        async with (
            _serve(f"sqlite:///{folder / 'http.db'}") as url,
            Client(stdio, cache=None) as stdio_client,
            Client(f"{url}/mcp", cache=None) as http_client,
        ):
            kinds: dict[str, Call] = {
                "direct": direct,
                "stdio": await _mcp_call(stdio_client),
                "http": await _mcp_call(http_client),
            }
            for call in kinds.values():
                await _timed(size["warmup"], call)
            times: dict[str, list[float]] = {k: [] for k in kinds}
            for block in range(size["blocks"]):
                order = list(kinds) if block % 2 == 0 else list(reversed(kinds))  # no kind always follows another
                for k in order:
                    times[k] += await _timed(size["calls"], kinds[k])
                print(f"  block {block + 1}/{size['blocks']}", flush=True)
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
