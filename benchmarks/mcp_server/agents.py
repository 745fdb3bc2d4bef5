"""The agent the MCP server benchmark serves (``--agents benchmarks.mcp_server.agents:agents``) and runs directly."""

from __future__ import annotations

from repertory import Agent
from repertory.testing import ScriptedModel

__all__ = ["REPLY", "agents"]

REPLY = "pong"


def agents() -> dict[str, Agent]:
    """``echo``: a zero-delay scripted model that answers every turn at once, no tools."""
    return {"echo": Agent(name="echo", model=ScriptedModel(lambda messages, tools: {"text": REPLY}))}
