"""The demo's MCP server: a tiny figures service, written with the ``mcp`` SDK's ``MCPServer``.

    python -m repertory.demo.mcp_server             # stdio (how the demo's analyst agent starts it)
    python -m repertory.demo.mcp_server --http 8765 # streamable HTTP on 127.0.0.1:8765/mcp

Its tools carry MCP annotations, which ``repertory.mcp`` turns into policies: ``lookup_figures``
and ``echo`` are read-only (idempotent, never asked), ``publish_figures`` is destructive (asked
under ``approval="destructive"``, never sent twice). ``echo`` is what ``benchmarks/mcp_overhead.py``
calls. Results are deterministic, so the demo needs no network and no keys.
"""

from __future__ import annotations

import argparse
import hashlib

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

__all__ = ["build", "main"]

_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False)


def build() -> MCPServer:
    """The server and its three tools."""
    app = MCPServer("figures", instructions="Figures for the demo's projects.", log_level="WARNING")

    @app.tool(annotations=_READ_ONLY, structured_output=False)
    def lookup_figures(topic: str) -> str:
        """Look up the key figures for a topic (read-only)."""
        digest = hashlib.blake2b(topic.encode(), digest_size=4).digest()
        revenue, growth = int.from_bytes(digest[:2], "big") % 900 + 100, digest[2] % 40 - 10
        return f"{topic}: revenue {revenue}k, growth {growth:+d}%"

    @app.tool(annotations=_DESTRUCTIVE, structured_output=False)
    def publish_figures(topic: str, summary: str) -> str:
        """Publish checked figures to the shared report (replaces what was there: needs approval)."""
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
