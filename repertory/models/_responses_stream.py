"""Reading a Responses API event stream: live deltas as they come, the reply from the finished response.

Every event carries a ``sequence_number``; the assembler remembers the last one, which is where a
background response is re-attached from. Deltas (output text, reasoning summary or reasoning text)
are only for display: the stored message is built from the response the terminal event carries
(``response.completed``, or ``response.incomplete``/``response.failed``), which holds every output
item whole, reasoning items with their encrypted content included. So a stream re-attached half-way
(whose earlier events it never saw) ends with the same message as one read from the start.

The SDK builds its event objects without validating them, so shapes are checked here: anything
unexpected is a ``MalformedReply`` and nothing is kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from repertory.core.messages import ModelMessage, Part, TextPart, ToolCallPart
from repertory.core.model import ReasoningDelta, TextDelta
from repertory.core.state import Usage
from repertory.models._responses_wire import ReasoningItem, reasoning_parts
from repertory.models._stream import MalformedReply

__all__ = ["TERMINAL", "Finished", "ResponseAssembler"]

TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})
"""Events after which a response's stream has nothing more to say."""

_TEXT_DELTAS = frozenset({"response.output_text.delta"})
_REASONING_DELTAS = frozenset({"response.reasoning_summary_text.delta", "response.reasoning_text.delta"})


@dataclass(frozen=True)
class Finished:
    """What a finished response said: its status, the reply, usage, and why it is not an answer if it is not one."""

    status: str  # completed, incomplete, failed, cancelled, or "error" (an error event)
    message: ModelMessage | None
    usage: Usage
    served_by: str | None
    reason: str | None  # incomplete_details.reason, the error's code
    detail: str | None  # the refusal's text, the error's message


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise MalformedReply(f"malformed event from the server: {what} is {type(value).__name__}, not a string")
    return value


def _count(value: Any, what: str) -> int:
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise MalformedReply(f"malformed usage from the server: {what} is {value!r}")
    return value


class ResponseAssembler:
    """Follows one response's events: its id, the last sequence number, its deltas and its end."""

    def __init__(self, response_id: str | None = None, sequence: int | None = None) -> None:
        self.response_id = response_id
        self.sequence = sequence
        self.finished: Finished | None = None

    def feed(self, event: Any) -> TextDelta | ReasoningDelta | None:
        """Take one event; returns the delta it carried, if any. A terminal event sets ``finished``."""
        kind = getattr(event, "type", None)
        if not isinstance(kind, str):
            raise MalformedReply(f"malformed event from the server: no type in {event!r:.200}")
        seq = getattr(event, "sequence_number", None)
        if seq is not None:
            self.sequence = _count(seq, "sequence_number")
        if kind in _TEXT_DELTAS or kind in _REASONING_DELTAS:
            text = _str(getattr(event, "delta", None), f"the delta of {kind}")
            return TextDelta(text=text) if kind in _TEXT_DELTAS else ReasoningDelta(text=text)
        if kind in ("response.created", "response.in_progress", "response.queued"):
            response_id = getattr(getattr(event, "response", None), "id", None)
            if self.response_id is None:
                self.response_id = _str(response_id, f"the response id of {kind}")
        elif kind == "error":
            message = getattr(event, "message", None)
            code = getattr(event, "code", None)
            self.finished = Finished(
                "error", None, Usage(requests=1), None, code if isinstance(code, str) else None, str(message)
            )
        elif kind in TERMINAL:
            self.finished = _finished(getattr(event, "response", None))
        return None


def _finished(response: Any) -> Finished:
    if response is None:
        raise MalformedReply("malformed event from the server: a terminal event without its response")
    status = _str(getattr(response, "status", None), "the response's status")
    served = getattr(response, "model", None)
    usage = _usage(getattr(response, "usage", None))
    served_by = served if isinstance(served, str) and served else None
    if status == "failed":
        error = getattr(response, "error", None)
        code, message = getattr(error, "code", None), getattr(error, "message", None)
        return Finished(status, None, usage, served_by, str(code) if code else None, str(message) if message else None)
    incomplete = getattr(getattr(response, "incomplete_details", None), "reason", None)
    message, refusal = _message(getattr(response, "output", None), served_by)
    reason = "refusal" if refusal is not None else (incomplete if isinstance(incomplete, str) else None)
    return Finished(status, message, usage, served_by, reason, refusal)


def _message(output: Any, served_by: str | None) -> tuple[ModelMessage, str | None]:
    """The assistant message the output items make, and the refusal's text if the model refused."""
    if not isinstance(output, list):
        raise MalformedReply("malformed response from the server: its output is not a list")
    parts: list[Part] = []
    refusals: list[str] = []
    for item in output:
        kind = getattr(item, "type", None)
        if kind == "reasoning":
            texts = [
                _str(getattr(s, "text", None), "a reasoning summary") for s in getattr(item, "summary", None) or []
            ]
            if not texts:  # raw reasoning (open-weight models served with the Responses API)
                texts = [_str(getattr(c, "text", None), "reasoning text") for c in getattr(item, "content", None) or []]
            encrypted = getattr(item, "encrypted_content", None)
            reasoning = ReasoningItem(
                _str(getattr(item, "id", None), "a reasoning item's id"),
                texts,
                encrypted if isinstance(encrypted, str) else None,
            )
            parts.extend(reasoning_parts(reasoning))
        elif kind == "message":
            for content in getattr(item, "content", None) or []:
                ctype = getattr(content, "type", None)
                if ctype == "output_text":
                    parts.append(TextPart(text=_str(getattr(content, "text", None), "output text")))
                elif ctype == "refusal":
                    refusals.append(_str(getattr(content, "refusal", None), "a refusal"))
                else:
                    raise MalformedReply(f"malformed response from the server: message content of type {ctype!r}")
        elif kind == "function_call":
            parts.append(
                ToolCallPart.from_arguments_text(
                    tool_call_id=_str(getattr(item, "call_id", None), "a function call's call_id"),
                    tool_name=_str(getattr(item, "name", None), "a function call's name"),
                    arguments=_str(getattr(item, "arguments", None), "a function call's arguments"),
                )
            )
        else:
            raise MalformedReply(f"the response holds an output item of type {kind!r}, which this adapter does not use")
    message = ModelMessage(role="assistant", parts=parts, model=served_by)
    return message, ("".join(refusals) if refusals else None)


def _usage(raw: Any) -> Usage:
    """The response's usage: cached input is part of the input; reasoning tokens are part of the output."""
    if raw is None:
        return Usage(requests=1)
    inp = _count(getattr(raw, "input_tokens", None), "input_tokens")
    out = _count(getattr(raw, "output_tokens", None), "output_tokens")
    total = _count(getattr(raw, "total_tokens", None), "total_tokens") or inp + out
    details = getattr(raw, "input_tokens_details", None)
    cached = _count(getattr(details, "cached_tokens", None), "cached_tokens")
    written = _count(getattr(details, "cache_write_tokens", None), "cache_write_tokens")
    if cached + written > inp:
        raise MalformedReply(f"malformed usage from the server: {cached} cached of {inp} input tokens")
    thought = _count(getattr(getattr(raw, "output_tokens_details", None), "reasoning_tokens", None), "reasoning_tokens")
    return Usage(
        input_tokens=inp,
        output_tokens=out,
        total_tokens=total,
        requests=1,
        cache_read_tokens=cached,
        cache_write_tokens=written,
        reasoning_tokens=min(thought, out),
    )
