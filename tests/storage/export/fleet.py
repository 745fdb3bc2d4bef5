"""A small, deterministic fleet for the export tests: orchestrators, workers, approvals, a fork, failures.

``build_fleet`` drives a ``Runtime`` the way a user would. Every model is a ``ScriptedModel`` step
function that answers from the conversation alone, so the same calls produce the same history on
every backend. It returns what the tests check the export against, including every resume token
the fleet ever saw (none of which may appear in an export).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from repertory import Agent, ModelMessage, Runtime, SessionHandle, ToolContext, tool
from repertory.core.model import ToolSpec
from repertory.errors import RepertoryError, ToolError
from repertory.testing import ScriptedModel, Step

__all__ = ["Fleet", "agents", "build_fleet", "more_work"]


@tool
async def search(query: str) -> str:
    """Search the knowledge base."""
    return f"3 results for {query}"


@tool
async def flaky(item: str) -> str:
    """A tool that fails on some inputs."""
    if item.startswith("bad"):
        raise ToolError(f"cannot process {item}")
    return f"processed {item}"


@tool(requires_approval=True)
async def delete_record(ctx: ToolContext, record_id: str) -> str:
    """Delete a record (needs a human's approval)."""
    return f"deleted {record_id}"


_PLANS: dict[str, list[Step]] = {
    "triage": [
        {"tool": "search", "args": {"query": "open tickets"}, "usage": {"input_tokens": 120, "output_tokens": 20}},
        {"tools": [{"tool": "flaky", "args": {"item": "t1"}}, {"tool": "flaky", "args": {"item": "bad-t2"}}],
         "usage": {"input_tokens": 180, "output_tokens": 30}},
        {"tool": "delete_record", "args": {"record_id": "t2"}, "usage": {"input_tokens": 240, "output_tokens": 15}},
        {"text": "triage finished", "usage": {"input_tokens": 300, "output_tokens": 40}},
    ],
    "work": [
        {"tool": "search", "args": {"query": "subtask"}, "usage": {"input_tokens": 60, "output_tokens": 10}},
        {"text": "subtask done", "usage": {"input_tokens": 90, "output_tokens": 25}},
    ],
    "chat": [{"text": "noted", "usage": {"input_tokens": 50, "output_tokens": 5}}],
}  # fmt: skip


def _step(messages: list[ModelMessage], tools: list[ToolSpec]) -> Step:
    """The plan named by the last user or system message's first word, at the step this turn reached."""
    start = max(i for i, m in enumerate(messages) if m.role in ("user", "system") and m.origin is not None)
    words = messages[start].text.split()
    plan = _PLANS.get(words[0] if words else "", _PLANS["chat"])
    done = sum(1 for m in messages[start:] if m.role == "assistant")
    return plan[min(done, len(plan) - 1)]


def _broken(messages: list[ModelMessage], tools: list[ToolSpec]) -> Step:
    raise RuntimeError("the model endpoint is down")


def agents() -> dict[str, Agent]:
    """The fleet's agents: an orchestrator and a worker on the planned model, and one whose model fails."""
    tools = [search, flaky, delete_record]
    return {
        "orchestrator": Agent(name="orchestrator", model=ScriptedModel(_step), tools=tools, instructions="lead"),
        "worker": Agent(name="worker", model=ScriptedModel(_step), tools=tools),
        "fragile": Agent(name="fragile", model=ScriptedModel(_broken)),
    }


@dataclass
class Fleet:
    """What the fleet did, for the tests to compare with the export."""

    roots: list[SessionHandle] = field(default_factory=list)
    sessions: list[SessionHandle] = field(default_factory=list)
    tokens: set[str] = field(default_factory=set)
    pending: list[tuple[SessionHandle, str]] = field(default_factory=list)
    failures: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


async def _triage(h: SessionHandle, fleet: Fleet, decision: str | None) -> None:
    """Run a triage turn; decide its approval (``None``: leave it pending)."""
    result = await h.run("triage the queue")
    assert result.status == "suspended", result
    [pending] = await h.pending_approvals()
    fleet.tokens.add(pending.token)
    if decision == "approve":
        await h.approve(pending.token, approval={"by": "ops"})
    elif decision == "reject":
        await h.reject(pending.token, reason="keep the record")
    else:
        fleet.pending.append((h, pending.token))


async def build_fleet(rt: Runtime) -> Fleet:
    """Two trees: spawned workers, approvals approved, rejected and pending, a fork, and a failed run."""
    fleet = Fleet()
    for n, decision in enumerate(("approve", "reject")):
        root = await rt.create_session(agent="orchestrator", title=f"orchestrator {n}", model="gpt-4o")
        fleet.roots.append(root)
        fleet.sessions.append(root)
        await _triage(root, fleet, decision)
        for w in range(2):
            child = await root.spawn(agent="worker", title=f"worker {n}.{w}", model="gpt-4o-mini")
            fleet.sessions.append(child)
            assert (await child.run("work on a subtask")).text == "subtask done"
    first = fleet.roots[0]
    fork = await first.fork(title="what if")
    fleet.sessions.append(fork)
    await fork.run("chat about alternatives")
    deeper = await fork.fork(title="what if, again")
    fleet.sessions.append(deeper)
    await deeper.run("chat once more")
    fragile = await fleet.roots[1].spawn(agent="fragile", title="fragile")
    fleet.sessions.append(fragile)
    try:
        await fragile.run("work that fails")
    except RepertoryError:
        fleet.failures += 1
    # Left waiting: a live token the export must never contain.
    waiting = await fleet.roots[1].spawn(agent="worker", title="waiting")
    fleet.sessions.append(waiting)
    await _triage(waiting, fleet, None)
    return fleet


async def more_work(fleet: Fleet) -> None:
    """What happens between two exports: the pending approval is decided, and a root gets another turn."""
    for h, token in fleet.pending:
        await h.approve(token)
    fleet.pending.clear()
    await fleet.roots[0].run("chat: anything else?")
