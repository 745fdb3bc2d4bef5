"""The scripted conversation of the suite's long-conversation tests (``ContextConformance``).

Turn ``i`` is four messages: the user's ``t{i} ...`` (padded so a few turns fill a small budget), a
call to ``lookup``, its result, and the answer; a prompt saying ``wire`` calls ``wire_money`` instead,
which waits for a human's approval. A summary request (recognised by its origin) is answered with
``covers t3 t4 ...``: every turn its transcript names, the earlier summary's turns included.
Every other request must pair each tool call with one result (``assert_paired``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from repertory.core.messages import ModelMessage, ToolCallPart, ToolResultPart
from repertory.core.model import ToolSpec
from repertory.runtime.agent import Agent
from repertory.runtime.compaction import Compaction
from repertory.runtime.tools import tool
from repertory.testing.scripted import ScriptedModel

__all__ = ["SUMMARY_USAGE", "Conversation", "assert_paired", "compacting_agent", "prompt"]

BUDGET = 1500
KEEP = 6
PAD = "please look this up and keep the answer in mind for later " * 2
SUMMARY_USAGE = {"input_tokens": 100_000, "output_tokens": 7}
"""A summary request's usage, large enough to be told apart in a run's total."""

_TURN = re.compile(r"\bt(\d+)\b")


def assert_paired(messages: Sequence[ModelMessage], *, open_calls: Sequence[str] = ()) -> None:
    """Every tool call has exactly one result, after it and before the next assistant message.

    ``open_calls`` names calls allowed to have no result yet (an approval still pending).
    No result may answer a call that does not exist, and call ids are unique.
    """
    calls: dict[str, int] = {}
    answered: dict[str, int] = {}
    waiting: set[str] = set()
    for i, message in enumerate(messages):
        if message.role == "assistant":
            unanswered = waiting - set(open_calls)
            assert not unanswered, f"calls {sorted(unanswered)} have no result before message {i}"
            waiting = set()
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                assert message.role == "assistant", f"a tool call in a {message.role} message"
                assert part.tool_call_id not in calls, f"call id {part.tool_call_id} used twice"
                calls[part.tool_call_id] = i
                waiting.add(part.tool_call_id)
            elif isinstance(part, ToolResultPart):
                cid = part.tool_call_id
                assert cid in calls, f"result for unknown call {cid} at message {i}"
                assert cid not in answered, f"call {cid} has two results (messages {answered[cid]} and {i})"
                assert cid in waiting, f"result for call {cid} arrives after a later assistant message"
                answered[cid] = i
                waiting.discard(cid)
    unanswered = waiting - set(open_calls)
    assert not unanswered, f"calls {sorted(unanswered)} have no result"


def _is_summary(messages: list[ModelMessage]) -> bool:
    """A compaction's summary request (its user message has the compaction origin)."""
    origin = messages[-1].origin
    return origin is not None and origin.kind == "system" and origin.id == "compaction"


def _turns_named(text: str) -> set[int]:
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
    """The step function of the scripted model: summaries, lookups and answers."""

    async def __call__(self, messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        if _is_summary(messages):
            covered = sorted(_turns_named(messages[-1].text))
            return {"text": "covers " + " ".join(f"t{n}" for n in covered), "usage": SUMMARY_USAGE}
        assert_paired(messages)
        last = messages[-1]
        if last.role == "user" and "wire" in last.text:
            return {"tool": "wire_money", "args": {"amount": 5}}
        if last.role == "tool":
            return {"text": f"answer from {last.tool_results[0].tool_name}"}
        asked = sorted(_turns_named(last.text))
        return {"tool": "lookup", "args": {"q": f"q{asked[-1] if asked else 0}"}}


def compacting_agent(conversation: Conversation, *, budget: int = BUDGET, keep: int = KEEP, **kw: Any) -> Agent:
    """The agent of the long-conversation tests: ``lookup``, short instructions, a small budget."""
    return Agent(
        name="compacting",
        model=ScriptedModel(conversation),
        instructions="Answer from what lookup returns.",
        tools=[lookup, wire_money],
        compaction=Compaction(max_input_tokens=budget, keep_last=keep),
        **kw,
    )
