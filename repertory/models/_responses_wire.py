"""Translation between repertory's records and OpenAI's Responses API input items (plain dicts).

A conversation becomes a list of input items: ``system``/``user``/``assistant`` messages, and for
an assistant turn its reasoning items, its text and its ``function_call`` items in the order the
model wrote them; a ``tool`` message becomes one ``function_call_output`` item per result.

A reasoning item is stored as ``ReasoningPart``s, one per summary part, the last of them carrying
the item's id and its encrypted content (``encrypted_content``, what a response that is not stored
hands back so the next request can continue the same reasoning) in ``signature``, as a small JSON
envelope only this module writes. An item with no summary is one part with no text, marked
``redacted``. A reasoning model loses its reasoning between tool calls unless the items come back,
so they are sent back unchanged, in place; reasoning another adapter wrote has no envelope and is
dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from repertory.core.messages import ModelMessage, ReasoningPart, TextPart, ToolCallPart
from repertory.core.model import ToolSpec
from repertory.models._convert import response_format, tool_result_text

__all__ = ["ReasoningItem", "reasoning_parts", "text_format", "to_responses_input", "to_responses_tools"]

_ENVELOPE = "openai-reasoning"


class ReasoningItem:
    """What a Responses reasoning item needs to go back: its id, its summary parts, its encrypted content."""

    __slots__ = ("encrypted", "id", "summary")

    def __init__(self, id: str, summary: list[str], encrypted: str | None) -> None:
        self.id = id
        self.summary = summary
        self.encrypted = encrypted

    def signature(self) -> str:
        """The envelope stored in the last part's ``signature``."""
        return json.dumps({"type": _ENVELOPE, "id": self.id, "encrypted_content": self.encrypted})

    @staticmethod
    def opened(signature: str | None) -> tuple[str, str | None] | None:
        """The id and encrypted content of an envelope; ``None`` for a signature this module did not write."""
        if signature is None or not signature.startswith("{"):
            return None
        try:
            data = json.loads(signature)
        except ValueError:
            return None
        if not isinstance(data, dict) or data.get("type") != _ENVELOPE or not isinstance(data.get("id"), str):
            return None
        encrypted = data.get("encrypted_content")
        return data["id"], encrypted if isinstance(encrypted, str) else None


def reasoning_parts(item: ReasoningItem) -> list[ReasoningPart]:
    """The parts that store ``item``: one per summary part, the envelope on the last."""
    if not item.summary:
        return [ReasoningPart(text="", signature=item.signature(), redacted=True)]
    *first, last = item.summary
    return [ReasoningPart(text=t) for t in first] + [ReasoningPart(text=last, signature=item.signature())]


def to_responses_input(
    messages: list[ModelMessage], ours: Callable[[str | None], bool], *, stored: bool
) -> list[dict[str, Any]]:
    """The ``input`` items of a conversation.

    ``ours(message.model)`` says whether an assistant message's reasoning may go back to this
    model (encrypted reasoning belongs to the model that wrote it). ``stored`` says the responses
    are kept server-side, so a reasoning item without encrypted content can still be named by its
    id; otherwise such an item could not be found and is left out.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            out.extend(
                {"type": "function_call_output", "call_id": p.tool_call_id, "output": tool_result_text(p)}
                for p in message.tool_results
            )
        elif message.role == "assistant":
            out.extend(_assistant(message, ours(message.model), stored))
        else:
            out.append({"role": message.role, "content": message.text})
    return out


def _assistant(message: ModelMessage, ours: bool, stored: bool) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    summary: list[str] = []  # the reasoning parts of the item whose envelope is still to come
    text: list[str] = []

    def flush_text() -> None:
        if text:
            items.append({"role": "assistant", "content": "".join(text)})
            text.clear()

    for part in message.parts:
        if isinstance(part, ReasoningPart):
            if not part.redacted:
                summary.append(part.text)
            opened = ReasoningItem.opened(part.signature)
            if opened is None:
                continue
            item_id, encrypted = opened
            if ours and (encrypted is not None or stored):
                flush_text()
                item: dict[str, Any] = {
                    "type": "reasoning",
                    "id": item_id,
                    "summary": [{"type": "summary_text", "text": s} for s in summary],
                }
                if encrypted is not None:
                    item["encrypted_content"] = encrypted
                items.append(item)
            summary = []
        elif isinstance(part, TextPart):
            text.append(part.text)
            summary = []  # reasoning without its envelope (another adapter's) goes nowhere
        elif isinstance(part, ToolCallPart):
            flush_text()
            items.append(_function_call(part))
            summary = []
    flush_text()
    return items


def _function_call(call: ToolCallPart) -> dict[str, Any]:
    # Arguments that never parsed go back as "{}" (the error result the model reads next quotes them).
    args = "{}" if call.invalid_args is not None else json.dumps(call.args)
    return {"type": "function_call", "call_id": call.tool_call_id, "name": call.tool_name, "arguments": args}


def to_responses_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as Responses ``function`` tools (flat: no nested ``function`` object, unlike chat completions)."""
    return [
        {"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters, "strict": False}
        for t in tools
    ]


def text_format(schema: dict[str, Any]) -> dict[str, Any]:
    """The ``text`` option asking for a JSON reply of ``schema`` (the chat format's fields, flattened)."""
    spec = response_format(schema)["json_schema"]
    return {"format": {"type": "json_schema", **spec}}
