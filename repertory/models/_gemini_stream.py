"""Assembling one assistant message from a Gemini ``streamGenerateContent`` stream.

Each streamed ``GenerateContentResponse`` carries whole parts: pieces of text, pieces of thought
(``thought: true``), whole function calls, and sometimes a ``thought_signature`` on one of them.
Consecutive pieces of one kind make one part; a piece that carries a second signature starts a new
one, so every signature stays on the part it came with (see ``_gemini_wire`` for how a signature
on a text or call part is stored). The last ``usage_metadata`` is the request's (the server sends
running totals). A stream that ends without a finish reason was cut off: ``message`` refuses it.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Literal

from repertory.core.ids import new_id
from repertory.core.messages import ModelMessage, Part, ReasoningPart, TextPart, ToolCallPart
from repertory.core.model import ModelEvent, ReasoningDelta, TextDelta
from repertory.core.state import Usage
from repertory.models._stream import MalformedReply

__all__ = ["ReplyAssembler"]


@dataclass
class _Segment:
    kind: Literal["thought", "text", "call"]
    pieces: list[str] = field(default_factory=list)
    signature: str | None = None
    call: ToolCallPart | None = None


def _count(value: Any, what: str) -> int:
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise MalformedReply(f"malformed usage from the server: {what} is {value!r}")
    return value


def _name(value: Any) -> str | None:
    """An enum's value (the SDK's finish and block reasons are ``str`` enums), or ``None``."""
    if value is None:
        return None
    return str(getattr(value, "value", value))


class ReplyAssembler:
    """Collects streamed chunks into the assistant message, its usage, its finish reason and safety verdicts."""

    def __init__(self) -> None:
        self.segments: list[_Segment] = []
        self.finish_reason: str | None = None
        self.finish_message: str | None = None
        self.block_reason: str | None = None
        self.block_message: str | None = None
        self.blocked_categories: list[str] = []
        self.served_by: str | None = None
        self._usage: Any = None

    def feed(self, chunk: Any) -> list[ModelEvent]:
        """Take one streamed ``GenerateContentResponse``; returns the text and thought deltas it carried."""
        try:
            return self._feed(chunk)
        except MalformedReply:
            raise
        except (AttributeError, TypeError, ValueError, KeyError) as exc:
            raise MalformedReply(f"malformed chunk from the server: {type(exc).__name__}: {exc}") from None

    def _feed(self, chunk: Any) -> list[ModelEvent]:
        if isinstance(chunk.model_version, str) and chunk.model_version:
            self.served_by = chunk.model_version.removeprefix("models/")
        if chunk.usage_metadata is not None:
            self._usage = chunk.usage_metadata
        feedback = chunk.prompt_feedback
        if feedback is not None and feedback.block_reason is not None:
            self.block_reason = _name(feedback.block_reason)
            self.block_message = feedback.block_reason_message
            self._blocked(feedback.safety_ratings)
        events: list[ModelEvent] = []
        for candidate in chunk.candidates or []:
            if candidate.index not in (0, None):
                continue  # one candidate is asked for; a stray one is not mixed in
            content = candidate.content
            for part in (content.parts if content is not None else None) or []:
                events.extend(self._part(part))
            if candidate.finish_reason is not None:
                self.finish_reason = _name(candidate.finish_reason)
                self.finish_message = candidate.finish_message
            self._blocked(candidate.safety_ratings)
        return events

    def _blocked(self, ratings: Any) -> None:
        for rating in ratings or []:
            if rating.blocked:
                category = _name(rating.category) or "unknown"
                if category not in self.blocked_categories:
                    self.blocked_categories.append(category)

    def _part(self, part: Any) -> list[ModelEvent]:
        raw = part.thought_signature
        signature = base64.b64encode(raw).decode("ascii") if raw else None
        call = part.function_call
        if call is not None:
            if not isinstance(call.name, str) or not call.name:
                raise MalformedReply("malformed reply from the server: a function call has no name")
            args = call.args if call.args is not None else {}
            if not isinstance(args, dict):
                raise MalformedReply(f"malformed reply from the server: function call args are {type(args).__name__}")
            tool_call = ToolCallPart(tool_call_id=call.id or f"call_{new_id()}", tool_name=call.name, args=args)
            self.segments.append(_Segment("call", signature=signature, call=tool_call))
            return []
        text = part.text
        if text is None and signature is None:
            return []  # inline data, executable code...: nothing this adapter keeps
        if text is not None and not isinstance(text, str):
            raise MalformedReply(f"malformed reply from the server: part text is {type(text).__name__}")
        kind: Literal["thought", "text"] = "thought" if part.thought else "text"
        last = self.segments[-1] if self.segments else None
        if last is None or last.kind != kind or (signature is not None and last.signature is not None):
            last = _Segment(kind)
            self.segments.append(last)
        if signature is not None:
            last.signature = signature
        if not text:
            return []
        last.pieces.append(text)
        return [ReasoningDelta(text=text) if kind == "thought" else TextDelta(text=text)]

    # -- output -----------------------------------------------------------------------------------

    def usage(self) -> Usage:
        """The request's usage: thoughts are output (billed so), cached content is part of the input."""
        meta = self._usage
        if meta is None:
            return Usage(requests=1)
        prompt = _count(meta.prompt_token_count, "prompt_token_count")
        tool_prompt = _count(meta.tool_use_prompt_token_count, "tool_use_prompt_token_count")
        cached = _count(meta.cached_content_token_count, "cached_content_token_count")
        thought = _count(meta.thoughts_token_count, "thoughts_token_count")
        output = _count(meta.candidates_token_count, "candidates_token_count") + thought
        total = _count(meta.total_token_count, "total_token_count") or prompt + tool_prompt + output
        return Usage(
            input_tokens=prompt + tool_prompt,
            output_tokens=output,
            total_tokens=total,
            requests=1,
            cache_read_tokens=cached,
            reasoning_tokens=thought,
        )

    def message(self, model: str) -> ModelMessage:
        """The assistant message, parts in the order the model wrote them; ``MalformedReply`` if unfinished."""
        if self.finish_reason is None:
            raise MalformedReply("the stream ended before the model finished its reply (no finish_reason)")
        parts: list[Part] = []
        for segment in self.segments:
            text = "".join(segment.pieces)
            if segment.kind == "thought":
                parts.append(ReasoningPart(text=text, signature=segment.signature))
                continue
            if segment.signature is not None:
                parts.append(ReasoningPart(text="", signature=segment.signature, redacted=True))
            if segment.call is not None:
                parts.append(segment.call)
            elif text:
                parts.append(TextPart(text=text))
        if not any(isinstance(p, TextPart | ToolCallPart) for p in parts):
            parts.append(TextPart(text=""))  # an empty reply is still a reply; the engine ends the run on it
        return ModelMessage(role="assistant", parts=parts, model=self.served_by or model)
