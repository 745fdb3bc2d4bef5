"""MCP call overhead: a ``tools/call`` through repertory against a direct ``mcp`` client session calling the same tool.

Run ``python -m benchmarks.mcp_overhead [--quick] [--out PATH]``. It prints a table and writes
``benchmarks/results/mcp_overhead.json``. Nothing here asserts a speed.
The target read against: repertory adds at most 1 ms (p50) to a stdio call beyond the engine's
own step cost.

The server is the demo's (``repertory.demo.mcp_server``, written with the SDK's ``MCPServer``),
its read-only ``echo`` tool, over stdio (a child process) and over streamable HTTP on loopback (a
separate process). Per transport, in interleaved blocks so that a busy machine slows every kind
alike:

- ``direct``: ``mcp.Client`` connected to the server, ``client.session.call_tool("echo", ...)``
  (what an agent written against the SDK by hand does);
- ``tool``: ``MCPTool.invoke`` through ``MCPServer`` (argument validation against the server's
  schema, the shared per-process connection, result conversion);
- ``step``: one engine step whose one call is the MCP ``echo`` (a ``Session`` on the in-memory
  store, a zero-delay ``ScriptedModel``): the time from one model request to the next, so it
  holds the call, the result message, the checkpoint and the next request;
- ``local step``: the same step with an async local ``@tool(idempotent=True)`` ``echo`` instead
  (the engine's own step cost; both tools are idempotent, so both steps commit once).

The figure against the target: ``step p50 - local step p50 - direct p50``, what repertory adds
to the call itself beyond what any step costs. Runs are ``STEPS`` steps long and start afresh, so
the history a step carries stays small.
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
from pathlib import Path
from typing import Any

from benchmarks.harness.cli import main_of, suite_entry
from benchmarks.harness.report import Clock, Report, Row, finish, mode_of
from repertory import Agent, InMemorySessionStore, ModelMessage, Session, ToolContext, ToolSpec, tool
from repertory.testing import ScriptedModel

__all__ = ["NAME", "PLOTS", "REPORT", "McpOverheadReport", "main", "measure", "run_suite"]

NAME = "mcp_overhead"
RESULTS = Path(__file__).resolve().parent / "results"
SERVER = [sys.executable, "-m", "repertory.demo.mcp_server"]
TARGET_MS = 1.0
SIZES = {
    "full": {"blocks": 40, "calls": 50, "runs": 3, "steps": 20},
    "quick": {"blocks": 3, "calls": 20, "runs": 1, "steps": 10},
}
ARGS = {"text": "ping"}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _dist_ms(seconds: list[float]) -> dict[str, float]:
    """p50, p90, p99, max, mean and min of durations in seconds, in milliseconds."""
    return {
        "p50_ms": _percentile(seconds, 0.5) * 1e3,
        "p90_ms": _percentile(seconds, 0.9) * 1e3,
        "p99_ms": _percentile(seconds, 0.99) * 1e3,
        "max_ms": max(seconds) * 1e3,
        "mean_ms": statistics.fmean(seconds) * 1e3,
        "min_ms": min(seconds) * 1e3,
        "count": len(seconds),
    }


def _row(figure: str, value: float, unit: str, target: float | None = None, note: str = "") -> dict[str, Any]:
    """One summary line, in the shape the suite renders (``benchmarks._suite.row``)."""
    return {
        "figure": figure,
        "value": value,
        "unit": unit,
        "target": target,
        "target_is": None if target is None else "at most",
        "met": None if target is None else value <= target,
        "note": note,
    }


# -- the two transports ----------------------------------------------------------------------------


@asynccontextmanager
async def _http_server() -> AsyncIterator[str]:
    """The demo server on streamable HTTP, in its own process, for the block; yields its URL."""
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


def _direct_client(transport: str, url: str | None) -> Any:
    from mcp import Client, StdioServerParameters

    if transport == "stdio":
        return Client(StdioServerParameters(command=SERVER[0], args=SERVER[1:]), cache=None)
    assert url is not None
    return Client(url, cache=None)


def _mcp_server(transport: str, url: str | None) -> Any:
    from repertory.mcp import MCPServer

    if transport == "stdio":
        return MCPServer.stdio(SERVER[0], SERVER[1:], name="figures")
    assert url is not None
    return MCPServer.http(url, name="figures")


# -- measuring --------------------------------------------------------------------------------------


async def _timed(n: int, call: Callable[[], Awaitable[Any]]) -> list[float]:
    out: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        await call()
        out.append(time.perf_counter() - t0)
    return out


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


async def _transport(transport: str, size: dict[str, int], url: str | None) -> dict[str, Any]:
    @tool(name="echo", idempotent=True)
    async def local_echo(text: str) -> str:
        """Return the text (the local twin of the MCP tool)."""
        return text

    server = _mcp_server(transport, url)
    [mcp_echo] = [t for t in await server.list_tools() if t.name == "echo"]
    ctx = ToolContext(call_id="bench", tool_name="echo", run_id="bench", thread_id="bench")
    direct: list[float] = []
    via_tool: list[float] = []
    step: list[float] = []
    local: list[float] = []
    async with _direct_client(transport, url) as client:
        session = client.session
        await session.call_tool("echo", ARGS)  # warm both connections before timing anything
        await mcp_echo.invoke(ARGS, ctx)
        for block in range(size["blocks"]):
            # Every other block runs the other way round, so no kind always follows the same one.
            kinds: list[tuple[list[float], Callable[[], Awaitable[list[float]]]]] = [
                (direct, lambda: _timed(size["calls"], lambda: session.call_tool("echo", ARGS))),
                (via_tool, lambda: _timed(size["calls"], lambda: mcp_echo.invoke(ARGS, ctx))),
                (step, lambda: _steps([server], size["runs"], size["steps"])),
                (local, lambda: _steps([local_echo], size["runs"], size["steps"])),
            ]
            for into, run in kinds if block % 2 == 0 else reversed(kinds):
                into += await run()
    await server.aclose()
    d, t, s, lo = _dist_ms(direct), _dist_ms(via_tool), _dist_ms(step), _dist_ms(local)
    return {
        "transport": transport,
        "direct_call": d,
        "repertory_tool_call": t,
        "engine_step_with_mcp_call": s,
        "engine_step_with_local_tool": lo,
        "tool_layer_adds_p50_ms": t["p50_ms"] - d["p50_ms"],
        "step_adds_beyond_engine_p50_ms": s["p50_ms"] - lo["p50_ms"] - d["p50_ms"],
        "step_adds_beyond_engine_p99_ms": s["p99_ms"] - lo["p99_ms"] - d["p99_ms"],
    }


async def _measure(mode: str) -> list[dict[str, Any]]:
    size = SIZES[mode]
    results = [await _transport("stdio", size, None)]
    async with _http_server() as url:
        results.append(await _transport("http", size, url))
    return results


def _summary(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for r in results:
        t = r["transport"]
        rows.append(
            _row(
                f"MCP {t} call: what repertory adds beyond the engine's step, p50",
                r["step_adds_beyond_engine_p50_ms"],
                "ms",
                TARGET_MS if t == "stdio" else None,
                note=f"step {r['engine_step_with_mcp_call']['p50_ms']:.2f} ms - local step "
                f"{r['engine_step_with_local_tool']['p50_ms']:.2f} ms - direct call "
                f"{r['direct_call']['p50_ms']:.2f} ms",
            )
        )
        rows.append(
            _row(
                f"MCP {t} call through MCPTool vs a direct SDK session, p50 / p99",
                r["repertory_tool_call"]["p50_ms"],
                "ms",
                note=f"direct {r['direct_call']['p50_ms']:.2f} / {r['direct_call']['p99_ms']:.2f} ms, repertory "
                f"{r['repertory_tool_call']['p50_ms']:.2f} / {r['repertory_tool_call']['p99_ms']:.2f} ms",
            )
        )
    return rows


def render(report: dict[str, Any]) -> str:
    """The table printed after a run."""
    lines = [
        f"MCP call overhead ({report['mode']}), demo server echo, in-memory store; ms",
        f"{'transport':>9} {'kind':<28} {'p50':>8} {'p90':>8} {'p99':>8} {'n':>6}",
    ]
    kinds = (
        ("direct SDK session", "direct_call"),
        ("repertory MCPTool.invoke", "repertory_tool_call"),
        ("engine step, MCP call", "engine_step_with_mcp_call"),
        ("engine step, local tool", "engine_step_with_local_tool"),
    )
    for r in report["results"]:
        for label, key in kinds:
            d = r[key]
            lines.append(
                f"{r['transport']:>9} {label:<28} {d['p50_ms']:>8.3f} {d['p90_ms']:>8.3f} {d['p99_ms']:>8.3f} "
                f"{d['count']:>6}"
            )
    lines += [
        f"  {s['figure']}: {s['value']:.3f} {s['unit']} (met: {s['met']}; {s['note']})" for s in report["summary"]
    ]
    return "\n".join(lines)


class McpOverheadReport(Report):
    """``benchmarks/results/mcp_overhead.json``: per transport, each kind of call's distribution (JSON)."""

    server: str
    store: str
    sizes: dict[str, int]
    target: dict[str, float]
    results: list[dict[str, Any]]

    def summarise(self) -> list[Row]:
        """Per transport: what repertory adds beyond the engine's step, and MCPTool against a direct session."""
        return [Row.model_validate(r) for r in _summary(self.results)]

    def render(self) -> str:
        """The table printed after a run."""
        return render({"mode": self.mode, "results": self.results, "summary": [r.model_dump() for r in self.rows()]})


REPORT = McpOverheadReport
PLOTS: list[Any] = []


def measure(quick: bool) -> McpOverheadReport:
    """Both transports, then the summary; the report."""
    mode = mode_of(quick)
    clock = Clock.start(NAME, mode)
    report = McpOverheadReport(
        **clock.frame(),
        server="repertory.demo.mcp_server, tool echo (read-only)",
        store="in-memory",
        sizes=SIZES[mode],
        target={"stdio_step_adds_beyond_engine_p50_ms": TARGET_MS},
        results=asyncio.run(_measure(mode)),
    )
    return finish(report, clock)


def run_suite(quick: bool, out_dir: Path = RESULTS, peers: bool = True) -> McpOverheadReport:
    """The suite's entry: measure, print, write ``out_dir/mcp_overhead.json``."""
    return suite_entry(NAME, measure, quick, out_dir)


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.mcp_overhead [--quick] [--out PATH]``."""
    main_of(NAME, __doc__, "a few hundred calls (seconds); figures mean little", measure, argv)


if __name__ == "__main__":
    main()
