"""The demo's agents: scripted, deterministic, with realistic delays and tool calls.

An orchestrator plans sub-tasks and delegates them itself: its model calls a delegating tool
(``agent_tool``) once per sub-task, in one step, so the runtime spawns a child session per call and
runs them concurrently; it summarises what they answered. A worker searches (an idempotent tool),
and for some tasks writes a file, which needs a human's approval (decided at the orchestrator).
The analyst (the child for "check the numbers") takes its tools from an MCP server shipped with
the demo (``repertory.demo.mcp_server``, started over stdio once per process): it looks figures up
(read-only, so idempotent and never asked) and publishes them (destructive, so a human approves).
Given the URL of an A2A agent (``make_agents(a2a_url=...)``; the demo serves one,
``repertory.demo.a2a_agent``), the orchestrator also has a ``second_opinion`` tool
(``repertory.a2a.a2a_agent``), and the first project's orchestrator sends one more sub-task there:
it leaves repertory over A2A and its answer comes back as the remote task's artifact.
The models are ``ScriptedModel`` step functions, so the demo needs no network and no keys; pass an
OpenAI-compatible model (``--model``) to put a real one in the workers' place.
"""

from __future__ import annotations

import hashlib
import json
import sys
from typing import Any

from repertory.core.messages import ModelMessage
from repertory.core.model import Model, ToolSpec
from repertory.runtime import Agent, tool
from repertory.testing.scripted import ScriptedModel
from repertory.tree.delegation import agent_tool

__all__ = [
    "AGENT_FOR",
    "REMOTE_TOOL",
    "SUBTASKS",
    "analyst_step",
    "figures_server",
    "make_agents",
    "orchestrator_step",
    "worker_step",
]

SUBTASKS = ("collect sources", "check the numbers", "draft the section")
REMOTE_TOOL = "second_opinion"
"""The orchestrator's tool for the remote A2A reviewer (present when ``make_agents`` is given its URL)."""
AGENT_FOR = {"check the numbers": "analyst"}
"""The agent (and the orchestrator's delegating tool) a sub-task goes to: ``worker`` unless named here."""


def _jitter(text: str, low: float, high: float) -> float:
    digest = hashlib.blake2b(text.encode(), digest_size=2).digest()
    return low + (high - low) * int.from_bytes(digest, "big") / 65535


@tool(idempotent=True)
def search(query: str) -> str:
    """Search the knowledge base (idempotent: safe to repeat after a crash)."""
    return f"3 documents about {query!r}"


@tool(requires_approval=True)
def write_file(path: str, content: str) -> str:
    """Write a file in the workspace (needs a reviewer's approval)."""
    return f"wrote {len(content)} bytes to {path}"


def orchestrator_step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """Delegate the sub-tasks in one step, summarise their answers, acknowledge follow-ups."""
    last = messages[-1]
    usage = {"input_tokens": 40 * len(messages), "output_tokens": 60}
    if last.role == "tool":
        reports = [str(p.result) for p in last.tool_results]
        return {"text": f"Summary of {len(reports)} reports: " + " | ".join(r[:40] for r in reports), "usage": usage}
    if last.text.startswith("plan "):
        project = last.text.removeprefix("plan ")
        calls = [
            {"tool": AGENT_FOR.get(subtask, "worker"), "args": {"task": f"{subtask} for {project}"}}
            for subtask in SUBTASKS
        ]
        if project == "project 0" and any(t.name == REMOTE_TOOL for t in tools):
            calls.append({"tool": REMOTE_TOOL, "args": {"task": f"review the plan for {project}"}})
        return {"tools": calls, "reasoning": "split the work three ways", "usage": usage}
    if last.text.startswith("summarise"):
        return {"text": f"Summary, {last.text.removeprefix('summarise the reports ')}: all three late", "usage": usage}
    return {"text": "noted", "usage": {"input_tokens": 40 * len(messages), "output_tokens": 2}}


def worker_step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """Search, maybe write (approval), then report."""
    task = next((m.text for m in messages if m.role == "user"), "")
    calls = sum(1 for m in messages if m.role == "assistant")
    usage = {"input_tokens": 30 * len(messages), "output_tokens": 50}
    if calls == 0:
        return {"tool": "search", "args": {"query": task}, "usage": usage}
    if calls == 1 and "draft" in task:
        return {"tool": "write_file", "args": {"path": "draft.md", "content": task * 3}, "usage": usage}
    outcome = messages[-1].tool_results[0].result if messages[-1].tool_results else "nothing"
    return {"text": f"{task}: done ({json.dumps(outcome)[:60]})", "usage": usage}


def analyst_step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """Look the figures up on the MCP server, publish them (approval), then report."""
    task = next((m.text for m in messages if m.role == "user"), "")
    calls = sum(1 for m in messages if m.role == "assistant")
    usage = {"input_tokens": 30 * len(messages), "output_tokens": 40}
    if calls == 0:
        return {"tool": "lookup_figures", "args": {"topic": task}, "usage": usage}
    if calls == 1:
        found = str(messages[-1].tool_results[0].result) if messages[-1].tool_results else task
        return {"tool": "publish_figures", "args": {"topic": task, "summary": found}, "usage": usage}
    outcome = messages[-1].tool_results[0].result if messages[-1].tool_results else "nothing"
    return {"text": f"{task}: checked ({json.dumps(outcome)[:60]})", "usage": usage}


def figures_server() -> Any:
    """The demo's MCP server as an ``MCPServer`` (stdio); destructive tools need approval.

    ``ImportError`` without the ``mcp`` extra (``.[dev]``, which ``make demo`` installs, has it).
    """
    from repertory.mcp import MCPServer

    return MCPServer.stdio(sys.executable, ["-m", "repertory.demo.mcp_server"], name="figures", approval="destructive")


def _analyst_tools() -> list[Any]:
    """The figures server; without the ``mcp`` extra, local stand-ins with the same names and policies."""
    try:
        return [figures_server()]
    except ImportError:

        @tool(idempotent=True)
        def lookup_figures(topic: str) -> str:
            """Look up the key figures for a topic (a local stand-in for the demo's MCP server)."""
            return f"{topic}: figures unavailable without the mcp extra"

        @tool(requires_approval=True)
        def publish_figures(topic: str, summary: str) -> str:
            """Publish checked figures (a local stand-in for the demo's MCP server)."""
            return f"published {len(summary)} characters about {topic!r}"

        return [lookup_figures, publish_figures]


def _remote_tools(a2a_url: str | None) -> list[Any]:
    """The ``second_opinion`` tool for the A2A agent at ``a2a_url`` (none without a URL)."""
    if a2a_url is None:
        return []
    from repertory.a2a import a2a_agent

    return [
        a2a_agent(a2a_url, name=REMOTE_TOOL, description="Ask the remote reviewer (over A2A) for a second opinion.")
    ]


def make_agents(delay: float = 0.05, model: Model | None = None, a2a_url: str | None = None) -> dict[str, Agent]:
    """The orchestrator and worker agents, with per-request delays around ``delay`` seconds.

    ``a2a_url`` (an A2A agent's URL) gives the orchestrator its ``second_opinion`` tool.
    """

    class Delayed(ScriptedModel):
        """A scripted model whose delay varies by request (deterministically)."""

        async def request(self, messages: list[ModelMessage], tools: list[ToolSpec], settings: Any) -> Any:
            self.delay = _jitter(messages[-1].text + str(len(messages)), delay * 0.5, delay * 1.5)
            async for event in super().request(messages, tools, settings):
                yield event

    return {
        "orchestrator": Agent(
            name="orchestrator",
            model=Delayed(orchestrator_step),
            tools=[
                agent_tool("worker", description="Delegate one sub-task to a worker; it answers with a report."),
                agent_tool("analyst", description="Have an analyst check a task's figures; it answers with a report."),
                *_remote_tools(a2a_url),
            ],
            instructions="Plan, delegate each sub-task to a worker or the analyst, then summarise.",
        ),
        "worker": Agent(
            name="worker",
            model=model or Delayed(worker_step),
            tools=[search, write_file],
            instructions="Do the sub-task; ask before writing.",
        ),
        "analyst": Agent(
            name="analyst",
            model=model or Delayed(analyst_step),
            tools=_analyst_tools(),
            instructions="Check the figures with the figures server; publishing needs approval.",
        ),
    }
