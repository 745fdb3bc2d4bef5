"""Agents carrying an MCP server, loaded by path: ``--agents tests.mcp.agents:make_agents`` (CLI, ``repertory serve``).

The server logs its calls to the file named by ``REPERTORY_TEST_MCP_LOG`` (none if unset).
"""

from __future__ import annotations

import os
from typing import Any

from repertory import Agent, ModelMessage, ToolSpec
from repertory.testing import ScriptedModel
from tests.mcp.helpers import tools_server

__all__ = ["LOG_ENV", "make_agents"]

LOG_ENV = "REPERTORY_TEST_MCP_LOG"


def _step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """``echo X`` calls echo, ``charge N`` calls charge, ``whoami`` calls whoami; a tool result is quoted back."""
    last = messages[-1]
    if last.role == "user":
        verb, _, rest = last.text.partition(" ")
        if verb == "echo":
            return {"tool": "echo", "args": {"text": rest}}
        if verb == "charge":
            return {"tool": "charge", "args": {"amount": int(rest)}}
        if verb == "whoami":
            return {"tool": "whoami", "args": {}}
        return {"text": f"ok: {last.text}"}
    return {"text": "result: " + "; ".join(str(p.result) for p in last.tool_results)}


def make_agents() -> dict[str, Agent]:
    """One agent, ``ops``, whose tools are the test server's (destructive calls need approval)."""
    server = tools_server(os.environ.get(LOG_ENV) or None, approval="destructive")
    return {"ops": Agent(name="ops", model=ScriptedModel(_step), tools=[server])}
