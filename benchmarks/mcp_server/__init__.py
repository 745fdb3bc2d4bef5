"""MCP server overhead: an agent's turn as a ``tools/call`` through repertory's MCP server against ``handle.run()``.

Run ``python -m benchmarks.mcp_server [--quick] [--out PATH]``; it prints the figures and writes
``benchmarks/results/mcp_server.json``. Nothing here asserts a speed. The target read against:
the MCP server adds at most 3 ms (p50) to a turn on loopback.

One agent (``benchmarks.harness.echo:agents``: a zero-delay ``ScriptedModel`` that answers
at once, no tools), three ways, each on its own fresh SQLite file (WAL, durability normal), in
interleaved blocks so a busy machine slows every kind alike:

- ``direct``: ``await handle.run("ping")`` on a session of a ``Runtime`` in the benchmark process
  (local backend): the turn itself, through the session tree;
- ``stdio``: ``mcp.Client(...).call_tool("echo", {"task": "ping", "session_id": ...})`` against
  ``python -m repertory mcp`` (a child process speaking 2026-07-28 over its stdin and stdout);
- ``http``: the same call against ``repertory serve``'s ``/mcp`` (a separate process, streamable
  HTTP on loopback, keyless).

Each kind continues one session, so every call is one turn of the same size as the direct run's.
The first calls of each client are warm-up (the client lists the tools once to check output
schemas). The figure against the target: ``p50(stdio or http) - p50(direct)``, what the MCP layer
(client, transport, the SDK's server, our handler and the wait for the turn) adds to the turn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness.cli import deliver
from benchmarks.harness.report import RESULTS_DIR, Report, Row, row
from benchmarks.harness.stats import Dist

__all__ = ["NAME", "PLOTS", "REPORT", "McpServerReport", "TARGET_ADDED_MS", "run_suite"]

NAME = "mcp_server"
PLOTS: list[Any] = []
TARGET_ADDED_MS = 3.0


class McpServerReport(Report):
    """``benchmarks/results/mcp_server.json``."""

    store: str
    blocks: int
    calls_per_block: int
    direct: Dist
    """``handle.run()`` in process: one turn."""
    stdio: Dist
    """``tools/call`` through ``repertory mcp`` over stdio."""
    http: Dist
    """``tools/call`` through ``repertory serve``'s ``/mcp`` on loopback."""
    stdio_added_p50_ms: float
    http_added_p50_ms: float
    stdio_added_p99_ms: float
    http_added_p99_ms: float

    def summarise(self) -> list[Row]:
        """What each transport adds to a turn at p50 against the target, with p99 and the raw figures."""
        rows = []
        for name, dist, added, added99 in (
            ("stdio", self.stdio, self.stdio_added_p50_ms, self.stdio_added_p99_ms),
            ("HTTP", self.http, self.http_added_p50_ms, self.http_added_p99_ms),
        ):
            rows.append(
                row(f"MCP server over {name}: added to a turn (tools/call - handle.run()), p50", round(added, 2),
                    "ms", TARGET_ADDED_MS,
                    note=f"call p50 {dist.p50_ms:.2f} / p99 {dist.p99_ms:.2f} ms vs handle.run() p50 "
                         f"{self.direct.p50_ms:.2f} / p99 {self.direct.p99_ms:.2f} ms; added at p99 {added99:.2f} ms; "
                         f"{dist.count} calls")
            )  # fmt: skip
        return rows

    def render(self) -> str:
        """The summary lines printed after a run."""
        return "\n".join(f"  {r.figure}: {r.value} {r.unit}  {r.note}" for r in self.rows())


REPORT = McpServerReport


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> McpServerReport:
    """The suite's entry: measure through real server processes, print, write ``out_dir/mcp_server.json``."""
    from benchmarks.mcp_server.measure import measure

    report = measure(quick)
    deliver(report, out_dir / f"{NAME}.json")
    return report
