"""The demo's MCP server: a tiny figures service, written with the ``mcp`` SDK's ``MCPServer``.

    python -m repertory.demo.mcp_server             # stdio (how the demo's analyst agent starts it)
    python -m repertory.demo.mcp_server --http 8765 # streamable HTTP on 127.0.0.1:8765/mcp

Its tools carry MCP annotations, which ``repertory.mcp`` turns into policies: ``lookup_figures``
and ``echo`` are read-only (idempotent, never asked), ``publish_figures`` is destructive (asked
under ``approval="destructive"``, never sent twice). ``echo`` is what ``benchmarks/mcp_overhead.py``
calls. Results are deterministic, so the demo needs no network and no keys.

With ``REPERTORY_FIGURES_LEDGER`` naming a file (the chaos soak sets it, ``tests.soak``), each
``publish_figures`` appends one JSON line there before it answers: the side effect, keyed by the
call id repertory sends in the request's ``_meta`` (``repertory.mcp.META_TOOL_CALL_ID``), with the
session and run ids beside it. A line is one ``O_APPEND`` write, synced before the answer, so a
server killed mid-call leaves every line it wrote whole. Without the variable nothing is written.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

__all__ = ["LEDGER_ENV", "build", "main"]

LEDGER_ENV = "REPERTORY_FIGURES_LEDGER"
"""The environment variable naming the file ``publish_figures`` records each side effect in (unset: none)."""
# The ``_meta`` keys repertory sends (``repertory.mcp.tool``); spelt out so the server needs only the SDK.
_CALL_ID, _SESSION_ID, _RUN_ID = "repertory/tool_call_id", "repertory/session_id", "repertory/run_id"

_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False)


def _record(ledger: str, ctx: Context, args: dict[str, Any]) -> None:
    """Append one side effect of ``publish_figures`` to ``ledger``, synced, keyed by the call's ``_meta`` ids."""
    meta = ctx.request_context.meta or {}
    line = {
        "session_id": meta.get(_SESSION_ID),
        "run_id": meta.get(_RUN_ID),
        "tool_call_id": meta.get(_CALL_ID),
        "tool": "publish_figures",
        "args": args,
        "pid": os.getpid(),
        "at_ms": int(time.time() * 1000),
    }
    fd = os.open(ledger, os.O_APPEND | os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line, sort_keys=True) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def build() -> MCPServer:
    """The server and its three tools (``publish_figures`` records its side effects where ``LEDGER_ENV`` says)."""
    app = MCPServer("figures", instructions="Figures for the demo's projects.", log_level="WARNING")
    ledger = os.environ.get(LEDGER_ENV)

    @app.tool(annotations=_READ_ONLY, structured_output=False)
    def lookup_figures(topic: str) -> str:
        """Look up the key figures for a topic (read-only)."""
        digest = hashlib.blake2b(topic.encode(), digest_size=4).digest()
        revenue, growth = int.from_bytes(digest[:2], "big") % 900 + 100, digest[2] % 40 - 10
        return f"{topic}: revenue {revenue}k, growth {growth:+d}%"

    @app.tool(annotations=_DESTRUCTIVE, structured_output=False)
    def publish_figures(topic: str, summary: str, ctx: Context) -> str:
        """Publish checked figures to the shared report (replaces what was there: needs approval)."""
        if ledger:
            _record(ledger, ctx, {"topic": topic, "summary": summary})
        return f"published {len(summary)} characters about {topic!r}"

    @app.tool(annotations=_READ_ONLY, structured_output=False)
    def echo(text: str) -> str:
        """Return the text unchanged (the benchmark's call)."""
        return text

    return app


def main(argv: list[str] | None = None) -> None:
    """Serve over stdio, or over streamable HTTP with ``--http PORT``."""
    parser = argparse.ArgumentParser(prog="python -m repertory.demo.mcp_server", description="The demo's MCP server.")
    parser.add_argument("--http", type=int, default=None, metavar="PORT", help="serve streamable HTTP on this port")
    args = parser.parse_args(argv)
    app = build()
    if args.http is None:
        app.run()
    else:
        app.run("streamable-http", host="127.0.0.1", port=args.http)


if __name__ == "__main__":
    main()
