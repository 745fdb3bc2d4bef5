"""``Compaction``: how a long conversation keeps fitting its model's context window, losing nothing.

Before a model request whose input would pass ``max_input_tokens``, the engine has a model
summarise everything before the last ``keep_last`` messages and commits that summary as one
history entry marked as a context boundary (``ModelMessage.boundary``). From then on the model
sees the agent's instructions, the summary and what follows it; the history itself still holds
every message, so memory, forks, exports and ``repertory sessions show`` see the whole
conversation. Peers that compact by rewriting their stored history (clearing a list, replacing
checkpointed messages) lose what a failed write or a concurrent writer had; here the summary is one
more revision under the usual compare-and-set, and nothing is ever deleted.

Tokens are the model's own count where it offers one (``repertory.core.model.TokenCounter``), else
an estimate of about four characters a token (``estimate_tokens``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from repertory.core.messages import ModelMessage, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from repertory.core.model import Model, ToolSpec
from repertory.core.state import Usage

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "SUMMARY_PREFIX",
    "Compaction",
    "CompactionResult",
    "estimate_tokens",
    "message_tokens",
]

DEFAULT_INSTRUCTIONS = (
    "You compact a long conversation between a user and an AI assistant so that it can go on within a "
    "limited context window. Write a summary of the transcript you are given that keeps everything the "
    "assistant needs to continue the conversation seamlessly: the user's goals, requests and preferences; "
    "decisions made and why; facts, names, numbers and identifiers learned; the tools called and what "
    "their results established; what is done, what is unfinished and what was about to happen next. "
    "When the transcript starts with an earlier summary, fold it in: your summary replaces it. Be concise "
    "but do not drop details the conversation may need later. Reply with the summary only."
)
"""The summary request's instructions unless ``Compaction(instructions=...)`` replaces them."""

SUMMARY_PREFIX = "[Summary of the conversation so far: earlier messages were compacted into it]\n\n"
"""What a boundary message's text starts with, so the model reads it as a summary, not as the user speaking."""

_MESSAGE_OVERHEAD = 4  # tokens a chat format spends around each message (role, separators)


def _result_chars(result: Any) -> int:
    return len(result) if isinstance(result, str) else len(json.dumps(result, ensure_ascii=False, default=str))


def message_tokens(message: ModelMessage) -> int:
    """About how many tokens ``message`` costs in a request: four characters a token, plus a little per message.

    Text, reasoning, tool names, arguments and results all count; the estimate is what the engine
    uses where the model has no ``count_tokens()``, and to plan a compaction's cut.
    """
    chars = 0
    for part in message.parts:
        if isinstance(part, TextPart | ReasoningPart):
            chars += len(part.text)
        elif isinstance(part, ToolCallPart):
            chars += len(part.tool_name) + len(part.tool_call_id)
            chars += len(part.invalid_args) if part.invalid_args is not None else _result_chars(part.args)
        elif isinstance(part, ToolResultPart):
            chars += len(part.tool_name) + len(part.tool_call_id) + _result_chars(part.result)
    return (chars + 3) // 4 + _MESSAGE_OVERHEAD


def _tool_tokens(spec: ToolSpec) -> int:
    chars = len(spec.name) + len(spec.description) + len(json.dumps(spec.parameters, default=str))
    return (chars + 3) // 4 + _MESSAGE_OVERHEAD


def estimate_tokens(messages: Iterable[ModelMessage], tools: Iterable[ToolSpec] = ()) -> int:
    """About how many input tokens a request of ``messages`` and ``tools`` costs (four characters a token)."""
    return sum(message_tokens(m) for m in messages) + sum(_tool_tokens(t) for t in tools)


class Compaction:
    """``Agent(compaction=Compaction(max_input_tokens, keep_last=20, model=None, instructions=None))``.

    ``max_input_tokens``: no model request of the agent passes it; a request that would is preceded
    by a compaction (several, stacked, if one summary is not enough), and a single message larger
    than the budget is a ``ModelError`` before any request. ``keep_last``: at most this many of the
    latest messages stay as they are after the summary (fewer where they would not fit, or where
    keeping exactly that many would part a tool call from its result or a pending approval from its
    call; more only to keep a pending approval with its call). ``model``: who writes the summary
    (default: the agent's model; a ``"provider:model"`` string as for ``Agent``). ``instructions``:
    the summary request's own instructions (default ``DEFAULT_INSTRUCTIONS``); the agent's
    instructions are not sent with it. ``summary_tokens`` caps the summary's length (the summary
    request's ``max_tokens``); the default is a quarter of the budget, at most 4,096.

    Summary requests count in the run's ``usage`` and ``cost`` (and ``usage.requests``) but not
    in ``step_index`` or ``max_steps``, which count the agent's own steps.
    """

    def __init__(
        self,
        max_input_tokens: int,
        keep_last: int = 20,
        model: Model | str | None = None,
        instructions: str | None = None,
        *,
        summary_tokens: int | None = None,
    ) -> None:
        if max_input_tokens < 1:
            raise ValueError(f"max_input_tokens must be >= 1, got {max_input_tokens}")
        if keep_last < 0:
            raise ValueError(f"keep_last must be >= 0, got {keep_last}")
        if summary_tokens is not None and not 0 < summary_tokens < max_input_tokens:
            raise ValueError(f"summary_tokens must be between 1 and max_input_tokens - 1, got {summary_tokens}")
        if isinstance(model, str):
            # Imported here so the engine never loads a model SDK unless a model string asks for one.
            from repertory.models import infer_model

            model = infer_model(model)
        self.max_input_tokens = max_input_tokens
        self.keep_last = keep_last
        self.model: Model | None = model
        self.instructions = instructions if instructions is not None else DEFAULT_INSTRUCTIONS
        self.summary_tokens = summary_tokens if summary_tokens is not None else max(1, min(max_input_tokens // 4, 4096))

    def __repr__(self) -> str:
        return f"Compaction(max_input_tokens={self.max_input_tokens}, keep_last={self.keep_last})"


class CompactionResult(BaseModel):
    """One compaction: where its boundary is, what it covered, and what the summary cost.

    ``summarized`` counts the messages the summary covers (an earlier summary among them counts as
    one), ``kept`` the messages after it that the model still sees verbatim. ``tokens_before`` and
    ``tokens_after`` are the request's input tokens (counted or estimated) without and with it.
    """

    model_config = ConfigDict(extra="forbid")
    thread_id: str
    run_id: str
    boundary_revision_id: str
    summarized: int
    kept: int
    tokens_before: int
    tokens_after: int
    usage: Usage = Field(default_factory=Usage)
    cost: float | None = None
