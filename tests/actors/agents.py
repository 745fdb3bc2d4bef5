"""Agents importable by path (``tests.actors.agents:clerk``): what a Ray host imports by itself."""

from __future__ import annotations

import os
from typing import Any

from repertory import Agent, agent_tool, tool
from repertory.core.messages import ModelMessage
from repertory.testing import ScriptedModel


def _step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
    return {"text": f"{os.getpid()}:{messages[-1].text}"}


clerk = Agent(name="clerk", model=ScriptedModel(_step))


@tool(requires_approval=True)
def publish(report: str) -> str:
    """Publish a report (needs approval)."""
    return f"published {report}"


def _boss(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
    if messages[-1].role == "user":
        return {"tool": "drafter", "args": {"task": f"draft {messages[-1].text}"}}
    return {"text": f"boss: {messages[-1].tool_results[0].result}"}


def _drafter(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
    if messages[-1].role == "user":
        return {"tool": "publish", "args": {"report": messages[-1].text}}
    return {"text": f"drafted ({messages[-1].tool_results[0].result})"}


boss = Agent(name="boss", model=ScriptedModel(_boss), tools=[agent_tool("drafter")])
"""Delegates every message to ``drafter`` (by path, so another process registers the same agents)."""
drafter = Agent(name="drafter", model=ScriptedModel(_drafter), tools=[publish])
"""Asks for an approval to publish what it was given, then reports."""
