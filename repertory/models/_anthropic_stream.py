"""Assembling one assistant message from a Messages API event stream.

The stream is ``message_start``, then per content block a ``content_block_start``, its
``content_block_delta``s and a ``content_block_stop``, then ``message_delta`` (stop reason and
cumulative usage) and ``message_stop``; ``ping`` may come anywhere and the SDK drops it, and turns an
``error`` event into an exception. Blocks are text, thinking (``thinking_delta`` pieces and one
``signature_delta``), redacted thinking (whole in its start event) and tool use
(``input_json_delta`` pieces of the arguments' JSON).

The SDK builds its event objects without validating them, so every field is checked here as it
arrives: a malformed event, a delta for a block that never started, or a stream that ends before
``message_stop`` is a ``MalformedReply`` (a ``ModelError`` for the caller), and nothing is kept.
Event and block types this module does not know are skipped, as Anthropic asks clients to do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from repertory.core.ids import new_id
from repertory.core.messages import ModelMessage, Part, ReasoningPart, TextPart, ToolCallPart
from repertory.core.model import ModelEvent, ReasoningDelta, TextDelta
from repertory.core.state import Usage
from repertory.models._stream import MalformedReply

__all__ = ["EventAssembler"]

_DELTAS = {
    "text_delta": ("text", "text"),
    "thinking_delta": ("thinking", "thinking"),
    "signature_delta": ("thinking", "signature"),
    "input_json_delta": ("tool", "partial_json"),
}
"""Each delta type this module keeps: the block kind it belongs to and the field that holds its piece."""

_KNOWN_EVENTS = frozenset(
    {"content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
)


def _get(obj: Any, name: str) -> Any:
    """A field of an SDK object or of a plain dict (what the SDK leaves when an event has the wrong shape)."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _str(value: Any, what: str, *, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise MalformedReply(f"malformed event from the server: {what} is {type(value).__name__}, not a string")
    return value


def _count(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise MalformedReply(f"malformed usage from the server: {what} is {value!r}")
    return value


@dataclass
class _Block:
    """One content block being streamed."""

    kind: str  # text, thinking, redacted, tool, output (the structured-reply tool), other
    pieces: list[str] = field(default_factory=list)
    signature: str | None = None
    id: str = ""
    name: str = ""
    closed: bool = False


class EventAssembler:
    """Collects a stream's events into the assistant message, its usage and its stop reason.

    ``output_tool`` names the tool whose call is the structured reply (``output_mode="tool"``):
    its arguments become the message's text, streamed as text deltas.
    """

    def __init__(self, output_tool: str | None = None) -> None:
        self.output_tool = output_tool
        self.blocks: dict[int, _Block] = {}
        self.started = False
        self.finished = False
        self.stop_reason: str | None = None
        self.served_by: str | None = None
        self.input_tokens = 0
        self.cache_read_tokens = 0
        self.cache_write_tokens = 0
        self.output_tokens = 0

    # -- input ------------------------------------------------------------------------------------

    def feed(self, event: Any) -> list[ModelEvent]:
        """Take one event; returns the text and reasoning deltas it carried, for live display."""
        try:
            return self._feed(event)
        except MalformedReply:
            raise
        except (AttributeError, TypeError, ValueError, KeyError) as exc:
            raise MalformedReply(f"malformed event from the server: {type(exc).__name__}: {exc}") from None

    def _feed(self, event: Any) -> list[ModelEvent]:
        kind = _get(event, "type")
        if kind == "message_start":
            if self.started:
                raise MalformedReply("malformed stream: a second message_start")
            self.started = True
            message = _get(event, "message")
            self.served_by = _str(_get(message, "model"), "message.model") or None
            self._usage(_get(message, "usage"))
            return []
        if kind not in _KNOWN_EVENTS:
            return []  # ping, and event types added after this was written
        if not self.started:
            raise MalformedReply(f"malformed stream: {kind} before message_start")
        if self.finished:
            raise MalformedReply(f"malformed stream: {kind} after message_stop")
        if kind == "message_delta":
            self.stop_reason = _str(_get(_get(event, "delta"), "stop_reason"), "delta.stop_reason") or self.stop_reason
            self._usage(_get(event, "usage"))
            return []
        if kind == "message_stop":
            self.finished = True
            return []
        index = _get(event, "index")
        if not isinstance(index, int) or isinstance(index, bool):
            raise MalformedReply(f"malformed event from the server: {kind} has index {index!r}")
        if kind == "content_block_start":
            if index in self.blocks:
                raise MalformedReply(f"malformed stream: content block {index} started twice")
            return self._start(index, _get(event, "content_block"))
        block = self.blocks.get(index)
        if block is None or block.closed:
            raise MalformedReply(f"malformed stream: {kind} for content block {index}, which is not open")
        if kind == "content_block_stop":
            block.closed = True
            return []
        return self._delta(block, _get(event, "delta"))

    def _start(self, index: int, content: Any) -> list[ModelEvent]:
        kind = _get(content, "type")
        if kind == "text":
            block = _Block("text")
            return self._add(block, index, _str(_get(content, "text"), "text block text"))
        if kind == "thinking":
            block = _Block("thinking", signature=_str(_get(content, "signature"), "thinking signature") or None)
            return self._add(block, index, _str(_get(content, "thinking"), "thinking block text"))
        if kind == "redacted_thinking":
            data = _str(_get(content, "data"), "redacted_thinking data", required=True)
            self.blocks[index] = _Block("redacted", signature=data)
            return []
        if kind == "tool_use":
            name = _str(_get(content, "name"), "tool_use name", required=True)
            block = _Block(
                "output" if name == self.output_tool else "tool",
                id=_str(_get(content, "id"), "tool_use id", required=True),
                name=name,
            )
            # Streamed tool input starts as {} and arrives in input_json_delta pieces; a server that
            # sends it whole in the start event is taken at its word.
            initial = _get(content, "input")
            if initial:
                if not isinstance(initial, dict):
                    raise MalformedReply(f"malformed event from the server: tool_use input is {type(initial).__name__}")
                return self._add(block, index, json.dumps(initial))
            self.blocks[index] = block
            return []
        self.blocks[index] = _Block("other")  # server tool results, citations...: nothing to keep
        return []

    def _add(self, block: _Block, index: int, first: str) -> list[ModelEvent]:
        self.blocks[index] = block
        return self._piece(block, first) if first else []

    def _piece(self, block: _Block, text: str) -> list[ModelEvent]:
        block.pieces.append(text)
        if block.kind == "thinking":
            return [ReasoningDelta(text=text)]
        if block.kind in ("text", "output"):
            return [TextDelta(text=text)]
        return []

    def _delta(self, block: _Block, delta: Any) -> list[ModelEvent]:
        kind = _get(delta, "type")
        expected = _DELTAS.get(str(kind))
        if expected is None or block.kind == "other":
            return []  # citations and delta types added later: nothing this adapter keeps
        wanted, name = expected
        if block.kind != wanted and not (wanted == "tool" and block.kind == "output"):
            raise MalformedReply(f"malformed stream: a {kind} for a {block.kind} block")
        value = _str(_get(delta, name), f"{kind}.{name}", required=True)
        if kind == "signature_delta":
            block.signature = value
            return []
        return self._piece(block, value) if value else []

    def _usage(self, usage: Any) -> None:
        # message_delta carries cumulative totals: a count it gives replaces the one before, and a
        # count it leaves out keeps the value from message_start.
        if usage is None:
            return
        for attr, source in (
            ("input_tokens", "input_tokens"),
            ("cache_read_tokens", "cache_read_input_tokens"),
            ("cache_write_tokens", "cache_creation_input_tokens"),
            ("output_tokens", "output_tokens"),
        ):
            value = _count(_get(usage, source), source)
            if value is not None:
                setattr(self, attr, value)

    # -- output -----------------------------------------------------------------------------------

    def usage(self) -> Usage:
        """The request's usage; ``input_tokens`` includes the cached input, as ``Usage`` counts it."""
        total_input = self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
        return Usage(
            input_tokens=total_input,
            output_tokens=self.output_tokens,
            total_tokens=total_input + self.output_tokens,
            requests=1,
            cache_read_tokens=self.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens,
        )

    def message(self, model: str) -> ModelMessage:
        """The assistant message, parts in the order the model wrote them; ``MalformedReply`` if incomplete."""
        if not self.finished:
            raise MalformedReply("the stream ended before the model finished its reply (no message_stop)")
        open_blocks = [i for i, b in self.blocks.items() if not b.closed]
        if open_blocks:
            raise MalformedReply(f"malformed stream: content block {open_blocks[0]} was never stopped")
        parts: list[Part] = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            text = "".join(block.pieces)
            if block.kind == "text" and text:
                parts.append(TextPart(text=text))
            elif block.kind == "thinking":
                parts.append(ReasoningPart(text=text, signature=block.signature))
            elif block.kind == "redacted":
                parts.append(ReasoningPart(text="", signature=block.signature, redacted=True))
            elif block.kind == "output":
                parts.append(TextPart(text=text or "{}"))
            elif block.kind == "tool":
                parts.append(
                    ToolCallPart.from_arguments_text(
                        tool_call_id=block.id or f"toolu_{new_id()}", tool_name=block.name, arguments=text
                    )
                )
        if not any(isinstance(p, TextPart | ToolCallPart) for p in parts):
            parts.append(TextPart(text=""))  # an empty reply is still a reply; the engine ends the run on it
        return ModelMessage(role="assistant", parts=parts, model=self.served_by or model)
