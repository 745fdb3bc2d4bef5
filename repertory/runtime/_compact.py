"""One compaction of a drive's context, decided: the cut and the summary requests (the drive commits the boundary).

The cut keeps at most ``keep_last`` of the latest context messages and never parts a tool call
from its result: every call before the cut has its result before the cut, so a pending approval
(a call with no result yet) always stays after it with everything that follows. The summarised
messages go to the summary model as a transcript inside one user message (so no provider sees a
tool result without its call), in chunks that each fit the budget, each chunk's request carrying
the summary so far. ``plan_compaction`` returns the summary as a boundary message (``Compacted``);
the drive inserts it into the lineage right after the last message it covers
(``MessageHistory.insert``) and commits it with the run in one
compare-and-set: a concurrent writer makes the commit fail whole, and a crash before it leaves the
history as it was (the next drive compacts again: never two summaries of one stretch).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from repertory.core.history import HistoryRevision
from repertory.core.messages import ModelMessage, Origin, TextPart, ToolCallPart, ToolResultPart
from repertory.core.model import Model, ModelResponse, ModelSettings, TokenCounter
from repertory.core.state import Usage
from repertory.errors import ModelError
from repertory.runtime.compaction import SUMMARY_PREFIX, Compaction, message_tokens

__all__ = ["COMPACTION_ORIGIN", "MAX_PASSES", "Compacted", "plan_compaction", "plan_cut", "summarize"]

COMPACTION_ORIGIN = Origin(kind="system", id="compaction")
MAX_PASSES = 3
"""Compactions one request may stack before it gives up (a summary longer than it was allowed to be)."""

_ASK = "Summarise this conversation transcript as instructed.\n\n"
_EARLIER = "The summary of the transcript before this part, to fold into yours:\n"
_PART = "Transcript:\n"
_MAX_SHRINKS = 8
_TRUNCATED = " [... {n} characters left out of this summary request; the message is whole in the history]"


def valid_cuts(messages: list[ModelMessage]) -> list[bool]:
    """``valid[c]``: cutting after the first ``c`` messages parts no tool call from its result."""
    valid = [True] * (len(messages) + 1)
    open_calls: set[str] = set()
    for i, message in enumerate(messages):
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                open_calls.add(part.tool_call_id)
            elif isinstance(part, ToolResultPart):
                open_calls.discard(part.tool_call_id)
        valid[i + 1] = not open_calls
    return valid


def plan_cut(messages: list[ModelMessage], tokens: list[int], keep_last: int, kept_budget: int) -> int | None:
    """How many leading context messages to summarise, or ``None`` when no cut helps.

    The most messages kept (at most ``keep_last``) whose tokens fit ``kept_budget``, at a cut that
    parts no call from its result; more than ``keep_last`` only when no cut at or after it is valid
    (a pending approval further back). An earlier summary at the start is never summarised alone.
    """
    n = len(messages)
    first = 2 if messages and messages[0].boundary else 1
    if n < first:
        return None
    valid = valid_cuts(messages)
    kept = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        kept[i] = kept[i + 1] + tokens[i]
    start = max(first, n - keep_last)
    for cut in range(start, n + 1):
        if valid[cut] and kept[cut] <= kept_budget:
            return cut
    for cut in range(start - 1, first - 1, -1):
        if valid[cut] and kept[cut] <= kept_budget:
            return cut
    return None


def _result_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def transcript_line(message: ModelMessage) -> str:
    """One message as a line of the transcript the summary model reads."""
    if message.boundary:
        text = message.text.removeprefix(SUMMARY_PREFIX)
        return f"[summary of the conversation before this point]\n{text}"
    lines = []
    if message.text:
        lines.append(f"{message.role}: {message.text}")
    for part in message.parts:
        if isinstance(part, ToolCallPart):
            args = part.invalid_args if part.invalid_args is not None else json.dumps(part.args, ensure_ascii=False)
            lines.append(f"assistant called tool {part.tool_name} with {args}")
        elif isinstance(part, ToolResultPart):
            verb = "failed with" if part.is_error else "returned"
            lines.append(f"tool {part.tool_name} {verb}: {_result_text(part.result)}")
    return "\n".join(lines) or f"{message.role}: (no text)"


def _tokens(text: str) -> int:
    return (len(text) + 3) // 4


def _pack(lines: list[str], room: int) -> list[list[str]]:
    """Lines in order, in chunks of at most ``room`` tokens each (a longer line is cut to fit)."""
    chunks: list[list[str]] = [[]]
    used = 0
    for line in lines:
        cost = _tokens(line) + 1
        if cost > room:
            keep = max(0, room * 4 - 4 - len(_TRUNCATED) - 12)
            line = line[:keep] + _TRUNCATED.format(n=len(line) - keep)
            cost = _tokens(line) + 1
        if used + cost > room and chunks[-1]:
            chunks.append([])
            used = 0
        chunks[-1].append(line)
        used += cost
    return [c for c in chunks if c]


async def _ask(model: Model, messages: list[ModelMessage], settings: ModelSettings) -> ModelResponse:
    """One summary request; its deltas are not forwarded (nobody is talking to the user)."""
    response: ModelResponse | None = None
    async for event in model.request(messages, [], settings):
        if isinstance(event, ModelResponse):
            response = event
    if response is None:
        raise ModelError("the summary request's stream ended without a response")
    if not response.message.text.strip():
        raise ModelError("the summary request returned no text (a summary model must reply with text)")
    return response


async def summarize(
    model: Model, compaction: Compaction, messages: list[ModelMessage]
) -> tuple[str, Usage, float | None]:
    """Summarise ``messages`` (a stretch of context) in requests that each fit the budget."""
    budget = compaction.max_input_tokens
    system = ModelMessage.system(compaction.instructions, origin=COMPACTION_ORIGIN)
    overhead = message_tokens(system) + _tokens(_ASK + _EARLIER + _PART) + 8
    room = budget - overhead - compaction.summary_tokens
    if room < 16:
        raise ModelError(
            f"max_input_tokens={budget} leaves no room for a summary request: its instructions take about "
            f"{overhead} tokens and the summary up to {compaction.summary_tokens}"
        )
    settings = ModelSettings(max_tokens=compaction.summary_tokens)
    counter = model if isinstance(model, TokenCounter) else None
    pending = _pack([transcript_line(m) for m in messages], room)
    summary = ""
    shrinks = 0
    usage = Usage()
    cost: float | None = None
    while pending:
        chunk = pending.pop(0)
        prompt = _ASK + (f"{_EARLIER}{summary}\n\n" if summary else "") + _PART + "\n".join(chunk)
        request = [system, ModelMessage.user(prompt, origin=COMPACTION_ORIGIN)]
        if counter is not None:
            counted = await counter.count_tokens(request, [], settings)
            if counted is not None and counted > budget:
                # The estimate was optimistic for this text: send it in two, or cut a lone line shorter.
                if len(chunk) > 1:
                    half = len(chunk) // 2
                    pending[:0] = [chunk[:half], chunk[half:]]
                else:
                    shrinks += 1
                    if shrinks > _MAX_SHRINKS:
                        raise ModelError(
                            f"the summary request does not fit max_input_tokens={budget} by the model's own "
                            f"count ({counted} tokens) even with one transcript line cut short"
                        )
                    line = chunk[0]
                    keep = len(line) // 2
                    pending.insert(0, [line[:keep] + _TRUNCATED.format(n=len(line) - keep)])
                continue
        response = await _ask(model, request, settings)
        usage = usage + response.usage
        if response.cost is not None:
            cost = (cost or 0.0) + response.cost
        summary = response.message.text.strip()
    return summary, usage, cost


@dataclass(frozen=True, slots=True)
class Compacted:
    """One compaction as decided: the summary to insert after ``after`` and what its requests cost.

    ``summarized`` leading context messages are covered by ``boundary``; ``kept`` follow it.
    """

    boundary: ModelMessage
    after: HistoryRevision
    summarized: int
    kept: int
    usage: Usage
    cost: float | None


async def plan_compaction(
    compaction: Compaction,
    model: Model,
    messages: list[ModelMessage],
    revisions: list[HistoryRevision],
    fixed_tokens: int,
    thread_id: str,
) -> Compacted | None:
    """Decide one compaction of a context (``messages`` at ``revisions``) and summarise; ``None`` when no cut helps.

    ``fixed_tokens`` is what every request carries beside the context (instructions, recalled
    memory, tools). Raises ``ModelError``, before any request, when one context message (or the
    fixed part alone) is larger than the budget: no request could ever carry it. The caller inserts
    the boundary into its history and commits it.
    """
    budget = compaction.max_input_tokens
    limit = budget - fixed_tokens
    if limit <= 0:
        raise ModelError(
            f"the agent's instructions, recalled memory and tools alone take about {fixed_tokens} tokens, "
            f"more than max_input_tokens={budget}: no request fits"
        )
    tokens = [message_tokens(m) for m in messages]
    for rev, message, count in zip(revisions, messages, tokens, strict=True):
        if count > limit:
            raise ModelError(
                f"message {rev.depth} of thread {thread_id!r} ({message.role}) is about {count} "
                f"tokens, larger than max_input_tokens={budget} allows (about {limit} beside the instructions "
                "and tools): no request can carry it, so it was not sent"
            )
    kept_budget = limit - compaction.summary_tokens - message_tokens(ModelMessage.user(SUMMARY_PREFIX))
    cut = plan_cut(messages, tokens, compaction.keep_last, kept_budget)
    if cut is None:
        return None
    text, usage, cost = await summarize(model, compaction, messages[:cut])
    boundary = ModelMessage(
        role="user", parts=[TextPart(text=SUMMARY_PREFIX + text)], origin=COMPACTION_ORIGIN, boundary=True
    )
    return Compacted(boundary, revisions[cut - 1], cut, len(messages) - cut, usage, cost)
