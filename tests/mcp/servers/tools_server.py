"""A real MCP server for the tests, written with the ``mcp`` SDK's ``MCPServer`` (it speaks the 2026 protocol).

    python -m tests.mcp.servers.tools_server [--log PATH] [--http PORT]

Over stdio by default, or streamable HTTP on ``127.0.0.1:PORT`` (``--http``). Every call is logged
(``_log``) when it arrives and when it answers; ``charge`` and ``echo`` log the ``repertory/*`` keys
of the request's ``_meta`` too (the ids repertory sends with each call). The tools cover what the client must handle:
annotations of every kind, structured results, errors, images and embedded resources, a slow call,
a call during which the server dies, and a tool list that changes. Tools answer in text
(``structured_output=False``) except ``stats``, whose answer is structured.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp_types import CallToolResult, EmbeddedResource, TextContent, TextResourceContents, ToolAnnotations
from pydantic import BaseModel

from tests.mcp.servers import _log

READ_ONLY = ToolAnnotations(read_only_hint=True)
IDEMPOTENT = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True)
ADDITIVE = ToolAnnotations(read_only_hint=False, destructive_hint=False)
PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


class Stats(BaseModel):
    """A structured result (the SDK sends it as structuredContent)."""

    count: int
    total: float


def build(log: str | None) -> MCPServer:
    """The server, with every call logged to ``log``."""
    app = MCPServer("test-tools", log_level="WARNING")

    def logged(name: str, args: dict[str, Any], ctx: Context | None = None) -> None:
        extra: dict[str, Any] = {}
        if ctx is not None:
            meta = ctx.request_context.meta or {}
            extra["meta"] = {k: v for k, v in meta.items() if k.startswith("repertory/")}
        _log.append(log, event="call", tool=name, args=args, **extra)

    def answered(name: str, args: dict[str, Any]) -> None:
        _log.append(log, event="done", tool=name, args=args)

    @app.tool(annotations=READ_ONLY, structured_output=False)
    def echo(text: str, ctx: Context) -> str:
        """Say the text back (read-only)."""
        logged("echo", {"text": text}, ctx)
        answered("echo", {"text": text})
        return text

    @app.tool(annotations=IDEMPOTENT, structured_output=False)
    async def put(key: str, value: str, delay: float = 0.0) -> str:
        """Set a key (idempotent, not destructive); slow by ``delay`` only the first time a key is put."""
        first = not any(e.get("args", {}).get("key") == key for e in _log.read(log)) if log else True
        logged("put", {"key": key, "value": value, "delay": delay})
        if delay and first:
            await asyncio.sleep(delay)
        answered("put", {"key": key, "value": value, "delay": delay})
        return f"{key}={value}"

    @app.tool(structured_output=False)
    async def charge(ctx: Context, amount: int, delay: float = 0.0, ref: str = "") -> str:
        """Charge an amount (no annotations: not idempotent, destructive by the MCP defaults)."""
        logged("charge", {"amount": amount, "delay": delay, "ref": ref}, ctx)
        if delay:
            await asyncio.sleep(delay)
        answered("charge", {"amount": amount, "delay": delay, "ref": ref})
        return f"charged {amount}"

    @app.tool(annotations=DESTRUCTIVE, structured_output=False)
    def delete(path: str) -> str:
        """Delete a path (destructive)."""
        logged("delete", {"path": path})
        answered("delete", {"path": path})
        return f"deleted {path}"

    @app.tool(annotations=ADDITIVE, structured_output=False)
    def append_note(note: str) -> str:
        """Add a note (not destructive, not idempotent)."""
        logged("append_note", {"note": note})
        answered("append_note", {"note": note})
        return "noted"

    @app.tool(annotations=READ_ONLY, structured_output=True)
    def stats(values: list[float]) -> Stats:
        """Count and sum numbers (a structured result)."""
        logged("stats", {"values": values})
        answered("stats", {"values": values})
        return Stats(count=len(values), total=sum(values))

    @app.tool(annotations=READ_ONLY, structured_output=False)
    def fail(message: str) -> str:
        """Always fails with the message (an isError result)."""
        logged("fail", {"message": message})
        raise ValueError(message)

    @app.tool(annotations=READ_ONLY, structured_output=False)
    def picture() -> list[Any]:
        """A caption and a one-pixel PNG."""
        logged("picture", {})
        return ["a red pixel", Image(data=PIXEL, format="png")]

    @app.tool(annotations=READ_ONLY, structured_output=False)
    def document() -> CallToolResult:
        """An embedded text resource beside a line of text."""
        logged("document", {})
        resource = TextResourceContents(uri="file:///notes.txt", mime_type="text/plain", text="the notes")
        return CallToolResult(content=[TextContent(text="here it is"), EmbeddedResource(resource=resource)])

    @app.tool(annotations=READ_ONLY, structured_output=False)
    async def slow(seconds: float) -> str:
        """Answer after ``seconds``."""
        logged("slow", {"seconds": seconds})
        await asyncio.sleep(seconds)
        answered("slow", {"seconds": seconds})
        return "finally"

    @app.tool(structured_output=False)
    def die() -> str:
        """The server process exits in the middle of this call."""
        logged("die", {})
        os._exit(3)

    @app.tool(annotations=READ_ONLY, structured_output=False)
    def whoami() -> str:
        """This server's process id and its parent's (the process that started it)."""
        logged("whoami", {})
        return f"{os.getpid()} {os.getppid()}"

    @app.tool(annotations=READ_ONLY, structured_output=False)
    def header(name: str, ctx: Context) -> str:
        """The value of one HTTP header of this request (empty over stdio)."""
        logged("header", {"name": name})
        headers = getattr(ctx.request_context.request, "headers", None)
        return "" if headers is None else str(headers.get(name, ""))

    @app.tool(structured_output=False)
    async def grow(name: str, ctx: Context) -> str:
        """Add a tool called ``name`` and announce that the tool list changed."""
        logged("grow", {"name": name})

        def added(text: str) -> str:
            logged(name, {"text": text})
            return f"{name}: {text}"

        app.add_tool(
            added,
            name=name,
            description=f"a tool added at run time ({name})",
            annotations=READ_ONLY,
            structured_output=False,
        )
        await ctx.notify_tools_changed()  # 2026 protocol: a subscriptions/listen event
        await ctx.request_context.session.send_tool_list_changed()  # 2025: a notification
        return f"added {name}"

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", default=None)
    parser.add_argument("--http", type=int, default=None, help="serve streamable HTTP on this port")
    parser.add_argument("--fail-start", action="store_true", help="exit at once, saying why on stderr")
    args = parser.parse_args()
    if args.fail_start:
        print("tools_server: refusing to start (asked to by --fail-start)", file=sys.stderr, flush=True)
        sys.exit(2)
    app = build(args.log)
    if args.http is None:
        app.run()
    else:
        app.run("streamable-http", host="127.0.0.1", port=args.http)


if __name__ == "__main__":
    main()
