"""Whether spans carry message content, and that content in the GenAI conventions' JSON shape.

Prompts, replies, tool arguments and tool results are the user's data: spans carry them only after
``capture_content(True)``. Off (the default), spans hold names, ids, counts, statuses and error
types, never text, so a trace backend can be given to people who may not read the conversations.
Resume tokens are never recorded, with or without content.
"""

from __future__ import annotations

import json
from typing import Any

from repertory.core.messages import ModelMessage, ReasoningPart, TextPart, ToolCallPart, ToolResultPart

__all__ = ["capture_content", "content_captured", "dumps", "input_messages", "output_messages"]

_capture = False


def capture_content(enabled: bool = True) -> bool:
    """Record message content (prompts, replies, tool arguments and results) in spans; returns the old setting.

    Process-wide, off by default. It applies to spans that start after the call.
    """
    global _capture
    before, _capture = _capture, bool(enabled)
    return before


def content_captured() -> bool:
    """Whether ``capture_content(True)`` is in force."""
    return _capture


def dumps(value: Any) -> str:
    """JSON text for an attribute value (span attributes are scalars or lists of scalars)."""
    return json.dumps(value, ensure_ascii=False, default=str)


def _part(part: Any) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "content": part.text}
    if isinstance(part, ReasoningPart):
        return {"type": "reasoning", "content": part.text}
    if isinstance(part, ToolCallPart):
        return {"type": "tool_call", "id": part.tool_call_id, "name": part.tool_name, "arguments": part.args}
    if isinstance(part, ToolResultPart):
        return {"type": "tool_call_response", "id": part.tool_call_id, "response": part.result}
    return {"type": str(getattr(part, "type", "unknown"))}


def input_messages(messages: list[ModelMessage]) -> str:
    """``gen_ai.input.messages``: the request's messages as ``[{role, parts: [...]}]`` JSON."""
    return dumps([{"role": m.role, "parts": [_part(p) for p in m.parts]} for m in messages])


def output_messages(message: ModelMessage, finish_reason: str) -> str:
    """``gen_ai.output.messages``: the reply as ``[{role, parts, finish_reason}]`` JSON."""
    return dumps([{"role": message.role, "parts": [_part(p) for p in message.parts], "finish_reason": finish_reason}])
