"""A scripted conversation for the compaction tests (the crash worker uses it too).

Turn ``i`` is four messages: the user's ``t{i} ...`` (padded so a few turns fill a small budget), a
call to ``lookup``, its result, and the answer; a prompt saying ``wire`` calls ``wire_money`` instead,
which waits for a human's approval. A summary request (recognised by its origin) is
answered with ``covers t3 t4 ...``: every turn its transcript names, the earlier summary's turns
included, so a test can check that stacked summaries lose no turn. Every request is recorded with
its estimated tokens and must pair each tool call with one result.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from repertory import Agent, Compaction, ModelMessage, ToolSpec, tool
from repertory.runtime.compaction import estimate_tokens
from repertory.testing import ScriptedModel
from tests.runtime.helpers import assert_paired

BUDGET = 1500
KEEP = 6
PAD = "please look this up and keep the answer in mind for later " * 2
SUMMARY_USAGE = {"input_tokens": 100_000, "output_tokens": 7}
"""A summary request's usage, large enough to be told apart in a run's total."""

_TURN = re.compile(r"\bt(\d+)\b")


def is_summary(messages: list[ModelMessage]) -> bool:
    """A compaction's summary request (its user message has the compaction origin)."""
    origin = messages[-1].origin
    return origin is not None and origin.kind == "system" and origin.id == "compaction"


def turns_named(text: str) -> set[int]:
    """The turn numbers ``t{i}`` a text names."""
    return {int(n) for n in _TURN.findall(text)}


def prompt(i: int) -> str:
    """Turn ``i``'s user message."""
    return f"t{i} {PAD}"


@tool(idempotent=True)
async def lookup(q: str) -> str:
    """Look something up."""
    return f"facts about {q}: " + "x" * 80


@tool(requires_approval=True)
async def wire_money(amount: int) -> str:
    """Move money (a human approves)."""
    return f"wired {amount}"


class Conversation:
    """The step function of the scripted model: summaries, lookups and answers, every request recorded."""

    def __init__(self, on_summary: Callable[[], Awaitable[None]] | None = None) -> None:
        self.requests: list[tuple[list[ModelMessage], int, bool]] = []
        self.on_summary = on_summary

    async def __call__(self, messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        summary = is_summary(messages)
        self.requests.append((list(messages), estimate_tokens(messages, tools), summary))
        if summary:
            if self.on_summary is not None:
                await self.on_summary()
            covered = sorted(turns_named(messages[-1].text))
            return {"text": "covers " + " ".join(f"t{n}" for n in covered), "usage": SUMMARY_USAGE}
        assert_paired(messages)
        last = messages[-1]
        if last.role == "user" and "wire" in last.text:
            return {"tool": "wire_money", "args": {"amount": 5}}
        if last.role == "tool":
            q = last.tool_results[0].tool_name
            return {"text": f"answer from {q}"}
        asked = sorted(turns_named(last.text))
        return {"tool": "lookup", "args": {"q": f"q{asked[-1] if asked else 0}"}}

    @property
    def agent_requests(self) -> list[list[ModelMessage]]:
        return [m for m, _, summary in self.requests if not summary]

    @property
    def summary_requests(self) -> list[list[ModelMessage]]:
        return [m for m, _, summary in self.requests if summary]


def compacting_agent(conversation: Conversation, *, budget: int = BUDGET, keep: int = KEEP, **kw: Any) -> Agent:
    """The agent of the compaction tests: ``lookup``, short instructions, a small budget."""
    return Agent(
        name="compacting",
        model=ScriptedModel(conversation),
        instructions="Answer from what lookup returns.",
        tools=[lookup, wire_money],
        compaction=Compaction(max_input_tokens=budget, keep_last=keep),
        **kw,
    )
