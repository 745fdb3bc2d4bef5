"""Tools from Model Context Protocol servers (extra ``mcp``): ``MCPServer.stdio(...)``, ``MCPServer.http(...)``.

An ``MCPServer`` in an agent's ``tools`` adds every tool the server lists, with approval and
idempotency policies drawn from MCP's tool annotations (see ``repertory.mcp.server``). The engine
treats them as any other tool: a non-idempotent call is committed before it is sent and is never
sent twice, also across a crash. Each ``tools/call`` carries the call's id, session id and run id in
its request ``_meta`` (``META_TOOL_CALL_ID``, ``META_SESSION_ID``, ``META_RUN_ID``): the call id is the
idempotency key a server can deduplicate its side effects on.
"""

from repertory._extras import require

require("repertory.mcp", "mcp")

from repertory.mcp._connection import close_loop_connections as close_connections  # noqa: E402
from repertory.mcp.server import ApprovalSetting, IdempotentSetting, MCPServer  # noqa: E402
from repertory.mcp.tool import META_RUN_ID, META_SESSION_ID, META_TOOL_CALL_ID, MCPTool, call_meta  # noqa: E402

__all__ = [
    "ApprovalSetting",
    "IdempotentSetting",
    "MCPServer",
    "MCPTool",
    "META_RUN_ID",
    "META_SESSION_ID",
    "META_TOOL_CALL_ID",
    "call_meta",
    "close_connections",
]
