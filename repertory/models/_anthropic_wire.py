"""Translation from repertory's records to Anthropic's Messages API request (plain dicts).

It does not import ``anthropic``: the wire format is JSON, and a pure translation is testable
without a server. The Messages API differs from chat completions in ways that matter here:

- there is no ``system`` role in ``messages``: leading system messages become the ``system``
  parameter; a system message later in the conversation (a notification) is said by the user there;
- tool results are ``tool_result`` blocks inside a user turn, and must come first in that turn;
  consecutive messages of one role are merged into one turn;
- an assistant turn replays its thinking blocks unchanged, with their signatures and in their
  original order, or a tool turn with thinking on is refused. Reasoning written by another model
  (or by a provider that does not sign it) cannot be verified, so it is left out;
- prompt caching is opt-in per block: ``cache_control`` marks the end of a prefix to cache.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from repertory.core.messages import ModelMessage, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from repertory.core.model import ToolSpec

__all__ = [
    "CACHE_CONTROL",
    "OUTPUT_TOOL",
    "add_cache_breakpoints",
    "model_family",
    "output_tool",
    "to_anthropic_messages",
    "to_anthropic_tools",
]

CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}
"""A prompt-cache breakpoint (the default five-minute cache)."""

OUTPUT_TOOL = "final_output"
"""The tool an agent's structured reply is asked through in ``output_mode="tool"``."""

_UNCACHEABLE = frozenset({"thinking", "redacted_thinking"})
_DATED = re.compile(r"-(\d{8}|latest)$")


def model_family(name: str) -> str:
    """A model id without its date or ``-latest``/``-0`` suffix: the alias and the dated id it names agree.

    ``claude-sonnet-4-0`` and ``claude-sonnet-4-20250514`` are both ``claude-sonnet-4``;
    ``claude-sonnet-4-5`` and ``claude-sonnet-4-5-20250929`` both ``claude-sonnet-4-5``.
    """
    name = _DATED.sub("", name)
    return name[:-2] if name.endswith("-0") else name


def to_anthropic_messages(
    messages: list[ModelMessage], signed_by_us: Callable[[str | None], bool]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ``system`` blocks and the ``messages`` turns of a conversation.

    ``signed_by_us(message.model)`` says whether an assistant message's signed reasoning was
    written by the model this request goes to, so its thinking blocks may be sent back.
    """
    system: list[dict[str, Any]] = []
    start = 0
    while start < len(messages) and messages[start].role == "system":
        text = messages[start].text
        if text:
            system.append({"type": "text", "text": text})
        start += 1
    turns: list[dict[str, Any]] = []
    for message in messages[start:]:
        if message.role == "assistant":
            blocks = _assistant_blocks(message, signed_by_us(message.model))
            role = "assistant"
        elif message.role == "tool":
            blocks = [_tool_result(p) for p in message.tool_results]
            role = "user"
        else:  # user, and a system message said mid-conversation (the API has no other place for it)
            blocks = [{"type": "text", "text": message.text}] if message.text else []
            role = "user"
        if not blocks:
            continue  # the API refuses empty turns; an empty reply said nothing worth replaying
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":
            # Tool results must open the turn that follows the calls; a stable sort keeps each group's order.
            turn["content"].sort(key=lambda b: b["type"] != "tool_result")
    return system, turns


def _assistant_blocks(message: ModelMessage, replay_thinking: bool) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ReasoningPart):
            if not replay_thinking or part.signature is None:
                continue
            if part.redacted:
                blocks.append({"type": "redacted_thinking", "data": part.signature})
            else:
                blocks.append({"type": "thinking", "thinking": part.text, "signature": part.signature})
        elif isinstance(part, TextPart):
            if part.text:  # the API refuses empty text blocks
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolCallPart):
            blocks.append({"type": "tool_use", "id": part.tool_call_id, "name": part.tool_name, "input": part.args})
    return blocks


def _tool_result(part: ToolResultPart) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.tool_call_id}
    content = part.result if isinstance(part.result, str) else json.dumps(part.result)
    if content:
        block["content"] = content
    if part.is_error:
        block["is_error"] = True
    return block


def to_anthropic_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as Messages API tool definitions."""
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]


def output_tool(schema: dict[str, Any]) -> dict[str, Any]:
    """The tool whose input is the agent's structured reply (``output_mode="tool"``)."""
    return {
        "name": OUTPUT_TOOL,
        "description": "Give your final answer by calling this tool; its input is the answer.",
        "input_schema": schema,
    }


def add_cache_breakpoints(
    system: list[dict[str, Any]], tools: list[dict[str, Any]], turns: list[dict[str, Any]]
) -> None:
    """Mark the ends of the tool list, the instructions and the conversation as cache breakpoints.

    The cached prefix runs tools, then system, then messages, so the last block of the last turn
    caches everything before it: the next step of the same run (which only appends) reads the whole
    prefix from the cache. Three of the API's four breakpoints; a breakpoint on a prefix too short
    to cache is simply not used. The blocks are fresh dicts built for this request.
    """
    for blocks in (tools, system):
        if blocks:
            blocks[-1]["cache_control"] = dict(CACHE_CONTROL)
    if turns:
        for block in reversed(turns[-1]["content"]):
            if block["type"] not in _UNCACHEABLE:
                block["cache_control"] = dict(CACHE_CONTROL)
                break
