"""A 2025-era MCP server for the tests, on the ``mcp`` SDK's low-level ``Server``: pages and notifications.

    python -m tests.mcp.servers.paged_server [--log PATH] [--tools N] [--page P]

It serves the handshake era only (the SDK's ``serve_loop``), so a client's 2026 ``server/discover``
probe is refused and it falls back to the ``initialize`` handshake, as with most servers in use
today. It lists ``N`` tools (``t0``... each echoing its argument) ``P`` to a page with cursors,
and ``grow`` adds one and sends ``notifications/tools/list_changed`` on the connection.
"""

from __future__ import annotations

import argparse

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from tests.mcp.servers import _log

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def build(log: str | None, count: int, page: int) -> Server:
    """The server: ``count`` tools, ``page`` to a page."""
    names = [f"t{i}" for i in range(count)] + ["grow"]

    async def list_tools(
        ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        start = int(params.cursor) if params is not None and params.cursor else 0
        chunk = names[start : start + page]
        _log.append(log, event="list", cursor=start)
        tools = [types.Tool(name=n, description=f"tool {n}", input_schema=SCHEMA) for n in chunk]
        more = start + page < len(names)
        return types.ListToolsResult(tools=tools, next_cursor=str(start + page) if more else None)

    async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = dict(params.arguments or {})
        _log.append(log, event="call", tool=params.name, args=args)
        if params.name not in names:
            raise MCPError(code=types.INVALID_PARAMS, message=f"no tool {params.name!r}")
        if params.name == "grow":
            names.insert(-1, str(args.get("text")))
            await ctx.session.send_tool_list_changed()
            return types.CallToolResult(content=[types.TextContent(text="grown")])
        return types.CallToolResult(content=[types.TextContent(text=f"{params.name}:{args.get('text')}")])

    return Server("paged", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve(log: str | None, count: int, page: int) -> None:
    server = build(log, count, page)
    async with stdio_server() as (read, write), server.lifespan(server) as state:
        await serve_loop(server, read, write, lifespan_state=state, init_options=server.create_initialization_options())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", default=None)
    parser.add_argument("--tools", type=int, default=5)
    parser.add_argument("--page", type=int, default=2)
    args = parser.parse_args()
    anyio.run(serve, args.log, args.tools, args.page)


if __name__ == "__main__":
    main()
