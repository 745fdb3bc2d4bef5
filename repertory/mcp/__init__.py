"""Tools from Model Context Protocol servers (extra ``mcp``): ``MCPServer.stdio(...)``, ``MCPServer.http(...)``.

An ``MCPServer`` in an agent's ``tools`` adds every tool the server lists, with approval and
idempotency policies drawn from MCP's tool annotations (see ``repertory.mcp.server``). The engine
treats them as any other tool: a non-idempotent call is committed before it is sent and is never
sent twice, also across a crash.
"""

from repertory._extras import require

require("repertory.mcp", "mcp")

from repertory.mcp._connection import close_loop_connections as close_connections  # noqa: E402
from repertory.mcp.server import ApprovalSetting, IdempotentSetting, MCPServer  # noqa: E402
from repertory.mcp.tool import MCPTool  # noqa: E402

__all__ = ["ApprovalSetting", "IdempotentSetting", "MCPServer", "MCPTool", "close_connections"]
