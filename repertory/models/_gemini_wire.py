"""Translation from repertory's records to a Gemini ``generateContent`` request (plain dicts).

It does not import ``google.genai``: the SDK takes its request as dicts of its field names, and a
pure translation is testable without a server. Where Gemini differs from the other APIs:

- there is no system role in ``contents``: leading system messages become ``system_instruction``,
  a later one (a notification) is said by the user;
- the assistant role is ``model``; tool results are ``function_response`` parts of a user turn,
  with the output under ``output`` (or ``error``) because the response must be a JSON object;
- a thought signature belongs to the part that carried it and must come back on that part, or
  Gemini 3 refuses a function-call turn. A signature on a thought part is that part's
  ``ReasoningPart.signature``; a signature on a text or function-call part is stored as a redacted
  ``ReasoningPart`` (no text, the signature) just before that part, and goes back on the part that
  follows it. Signatures another model wrote cannot be verified, so they are left out.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Any

from repertory.core.content import readable
from repertory.core.messages import ModelMessage, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from repertory.core.model import ToolSpec

__all__ = ["to_gemini_contents", "to_gemini_tools", "to_interaction_input", "to_interaction_tools"]


def to_gemini_contents(
    messages: list[ModelMessage], signed_by_us: Callable[[str | None], bool]
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The ``system_instruction`` and the ``contents`` of a conversation.

    ``signed_by_us(message.model)`` says whether an assistant message's thought signatures were
    written by the model this request goes to, so they may be sent back.
    """
    system: list[dict[str, Any]] = []
    start = 0
    while start < len(messages) and messages[start].role == "system":
        if messages[start].text:
            system.append({"text": messages[start].text})
        start += 1
    contents: list[dict[str, Any]] = []
    for message in messages[start:]:
        if message.role == "assistant":
            parts = _model_parts(message, signed_by_us(message.model))
            role = "model"
        elif message.role == "tool":
            parts = [_function_response(p) for p in message.tool_results]
            role = "user"
        else:  # user, and a system message said mid-conversation (Gemini has no other place for it)
            parts = [{"text": message.text}] if message.text else []
            role = "user"
        if not parts:
            continue  # Gemini refuses a turn without parts; an empty reply said nothing worth replaying
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    return ({"parts": system} if system else None), contents


def _model_parts(message: ModelMessage, replay_signatures: bool) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    pending: bytes | None = None  # a redacted part's signature, for the part that follows it
    for part in message.parts:
        if isinstance(part, ReasoningPart):
            signature = _signature(part.signature) if replay_signatures else None
            if signature is None:
                continue  # a thought summary with no signature is the model's scratch work: not sent back
            if part.redacted:
                pending = signature
            else:
                parts.append({"text": part.text, "thought": True, "thought_signature": signature})
            continue
        wire: dict[str, Any]
        if isinstance(part, TextPart):
            if not part.text and pending is None:
                continue
            wire = {"text": part.text}
        elif isinstance(part, ToolCallPart):
            # A call whose arguments never parsed goes back with none; the error result the model
            # reads next quotes what it actually sent.
            args = {} if part.invalid_args is not None else part.args
            wire = {"function_call": {"id": part.tool_call_id, "name": part.tool_name, "args": args}}
        else:
            continue
        if pending is not None:
            wire["thought_signature"], pending = pending, None
        parts.append(wire)
    if pending is not None:  # the signature came on an empty closing part: it goes back the same way
        parts.append({"text": "", "thought_signature": pending})
    return parts


def _signature(value: str | None) -> bytes | None:
    """The signature's bytes (stored as the base64 the API sent), or ``None`` if it is not ours to send."""
    if not value:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None  # another provider's signature (not base64): not Gemini's to verify


def _function_response(part: ToolResultPart) -> dict[str, Any]:
    # The response must be a JSON object; base64 payloads (an MCP tool's image) are described, not sent.
    value = part.result if isinstance(part.result, str) else readable(part.result)
    key = "error" if part.is_error else "output"
    return {"function_response": {"id": part.tool_call_id, "name": part.tool_name, "response": {key: value}}}


def to_gemini_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as one Gemini tool of function declarations (JSON Schema parameters)."""
    if not tools:
        return []
    declarations = [
        {"name": t.name, "description": t.description, "parameters_json_schema": t.parameters} for t in tools
    ]
    return [{"function_declarations": declarations}]


# -- the Interactions API (background mode) ---------------------------------------------------------
#
# The same conversation as steps: it is read off the ``generateContent`` contents above, so there is
# one translation of our records and the two request shapes cannot drift apart. A signature rides a
# ``thought`` step there, never a text or call step: a redacted signature (on a text or call part in
# ``generateContent``) becomes a summary-less thought step just before its part.


def to_interaction_input(
    messages: list[ModelMessage], signed_by_us: Callable[[str | None], bool]
) -> tuple[str | None, list[dict[str, Any]]]:
    """The ``system_instruction`` and the ``input`` steps of an ``interactions.create`` request."""
    system, contents = to_gemini_contents(messages, signed_by_us)
    instruction = "\n\n".join(p["text"] for p in system["parts"]) if system is not None else None
    steps: list[dict[str, Any]] = []
    for content in contents:
        for part in content["parts"]:
            steps.extend(_steps(part, content["role"]))
    return instruction, steps


def _steps(part: dict[str, Any], role: str) -> list[dict[str, Any]]:
    raw = part.get("thought_signature")
    signature = base64.b64encode(raw).decode("ascii") if isinstance(raw, bytes) else None
    if part.get("thought"):
        thought: dict[str, Any] = {"type": "thought", "signature": signature}
        if part.get("text"):
            thought["summary"] = [{"type": "text", "text": part["text"]}]
        return [thought]
    steps: list[dict[str, Any]] = [{"type": "thought", "signature": signature}] if signature is not None else []
    if "function_call" in part:
        call = part["function_call"]
        steps.append({"type": "function_call", "id": call["id"], "name": call["name"], "arguments": call["args"]})
    elif "function_response" in part:
        response = part["function_response"]
        is_error = "error" in response["response"]
        result = response["response"]["error" if is_error else "output"]
        steps.append(
            {
                "type": "function_result",
                "call_id": response["id"],
                "name": response["name"],
                "result": result if isinstance(result, str) else json.dumps(result),
                "is_error": is_error,
            }
        )
    elif part.get("text"):
        kind = "model_output" if role == "model" else "user_input"
        steps.append({"type": kind, "content": [{"type": "text", "text": part["text"]}]})
    return steps


def to_interaction_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as the Interactions API's function tools (JSON Schema parameters)."""
    return [
        {"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters} for t in tools
    ]
