"""Translation between repertory's records and the chat completions wire format (plain dicts).

This module does not import ``openai``: the wire format is JSON, and keeping the translation
pure makes it testable without a server and reusable by any OpenAI-compatible adapter.
"""

from __future__ import annotations

import json
import re
from typing import Any

from repertory.core.content import readable
from repertory.core.messages import ModelMessage, ToolCallPart, ToolResultPart
from repertory.core.model import ToolSpec

__all__ = ["ERROR_PREFIX", "response_format", "to_openai_messages", "to_openai_tools", "tool_result_text"]

ERROR_PREFIX = "Error: "
"""Put before an error tool result's text: the wire format has no ``is_error`` flag, and a model that
cannot tell a failure from a result tends to carry on as if the call had worked."""

_SCHEMA_NAME = re.compile(r"[^a-zA-Z0-9_-]")


def to_openai_messages(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    """Convert a conversation to chat completions messages.

    Reasoning parts are dropped (servers reject or ignore them, and they are the model's own
    scratch work); a ``tool`` message becomes one wire message per result, because the wire format
    pairs each ``tool`` message with exactly one ``tool_call_id``.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            out.extend(_tool_result(part) for part in message.tool_results)
        elif message.role == "assistant":
            out.append(_assistant(message))
        else:
            out.append({"role": message.role, "content": message.text})
    return out


def _assistant(message: ModelMessage) -> dict[str, Any]:
    calls = message.tool_calls
    wire: dict[str, Any] = {"role": "assistant", "content": message.text or (None if calls else "")}
    if calls:
        wire["tool_calls"] = [_tool_call(c) for c in calls]
    return wire


def _tool_call(call: ToolCallPart) -> dict[str, Any]:
    # A call whose arguments never parsed goes back as "{}": some servers (vLLM among them) parse
    # the arguments of past calls and would reject the whole request; the error result the model
    # reads next quotes what it actually sent.
    args = "{}" if call.invalid_args is not None else json.dumps(call.args)
    return {"id": call.tool_call_id, "type": "function", "function": {"name": call.tool_name, "arguments": args}}


def _tool_result(part: ToolResultPart) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": part.tool_call_id, "content": tool_result_text(part)}


def tool_result_text(part: ToolResultPart) -> str:
    """A tool result as the text OpenAI's APIs take (chat completions and Responses alike)."""
    # Base64 payloads (an MCP tool's image) are described, not sent: see repertory.core.content.
    content = part.result if isinstance(part.result, str) else json.dumps(readable(part.result))
    return ERROR_PREFIX + content if part.is_error else content


def to_openai_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    """Convert tool specs to chat completions ``function`` tools."""
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in tools
    ]


def response_format(schema: dict[str, Any]) -> dict[str, Any]:
    """A ``json_schema`` response format for ``schema``.

    Not ``strict``: strict mode demands every property be required and ``additionalProperties``
    be false, which ordinary pydantic schemas are not; the engine validates the reply anyway and
    sends validation errors back to the model.
    """
    name = _SCHEMA_NAME.sub("_", str(schema.get("title") or "output"))[:64]
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": False}}
