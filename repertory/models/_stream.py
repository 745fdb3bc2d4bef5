"""Assembling one assistant message from a chat completions stream (or a whole, unstreamed reply).

Chunks are checked as they arrive: the SDK builds its chunk objects without validation, so a
server that sends the wrong shape would otherwise surface as an ``AttributeError`` deep inside the
engine, or worse, as a silently wrong message in the history. Anything unexpected is a
``ModelError`` and nothing is kept, so a broken stream never reaches the history half-written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from repertory.core.ids import new_id
from repertory.core.messages import ModelMessage, Part, ReasoningPart, TextPart, ToolCallPart
from repertory.core.model import ModelEvent, ReasoningDelta, TextDelta
from repertory.core.state import Usage

__all__ = ["REASONING_FIELDS", "MalformedReply", "MessageAssembler"]

REASONING_FIELDS = ("reasoning_content", "reasoning")
"""Where OpenAI-compatible servers put reasoning: vLLM and DeepSeek use ``reasoning_content``,
OpenRouter (and newer vLLM) ``reasoning``. OpenAI itself streams none."""


class MalformedReply(Exception):
    """The server's reply is not what the protocol says; the adapter turns it into a ``ModelError``."""


@dataclass
class _Call:
    """A tool call being streamed: its id and name come once, its arguments in pieces."""

    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


def _text(value: Any, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedReply(f"malformed reply from the server: {what} is of type {type(value).__name__}, not a string")
    return value


def _extra(obj: Any) -> dict[str, Any]:
    extra = getattr(obj, "model_extra", None)
    return extra if isinstance(extra, dict) else {}


class MessageAssembler:
    """Collects deltas into the final assistant message, its usage and the model name the server reported."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, _Call] = {}
        self.usage: Usage | None = None
        self.finish_reason: str | None = None
        self.served_by: str | None = None

    # -- input ------------------------------------------------------------------------------------

    def feed(self, chunk: Any) -> list[ModelEvent]:
        """Take one streamed chunk; returns the deltas it carried, for live display."""
        try:
            return self._feed(chunk)
        except MalformedReply:
            raise
        except (AttributeError, TypeError, ValueError, KeyError) as exc:
            raise MalformedReply(f"malformed chunk from the server: {type(exc).__name__}: {exc}") from None

    def feed_completion(self, completion: Any) -> list[ModelEvent]:
        """Take a whole unstreamed reply (``stream=False``); returns its text and reasoning as deltas."""
        try:
            choices = self._head(completion)
            if not choices:
                raise MalformedReply("malformed reply from the server: no choices")
            choice = choices[0]
            message = choice.message
            events = self._content(message, "message")
            for i, call in enumerate(message.tool_calls or []):
                self._call_piece(i, call)
            self._finish(choice)
            return events
        except MalformedReply:
            raise
        except (AttributeError, TypeError, ValueError, KeyError) as exc:
            raise MalformedReply(f"malformed reply from the server: {type(exc).__name__}: {exc}") from None

    def _feed(self, chunk: Any) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        for choice in self._head(chunk):
            if choice.index not in (0, None):
                continue  # n > 1 is never asked for; ignore stray choices rather than mix them in
            delta = choice.delta
            if delta is not None:
                events.extend(self._content(delta, "delta"))
                for piece in delta.tool_calls or []:
                    self._call_piece(piece.index, piece)
            self._finish(choice)
        return events

    def _head(self, obj: Any) -> list[Any]:
        """Record what every chunk may carry (model name, usage); return its choices."""
        if isinstance(obj.model, str) and obj.model:
            self.served_by = obj.model
        usage = obj.usage
        if usage is not None:
            inp, out, total = usage.prompt_tokens or 0, usage.completion_tokens or 0, usage.total_tokens or 0
            if not all(isinstance(n, int) for n in (inp, out, total)):
                raise MalformedReply(f"malformed usage from the server: {usage!r}")
            total = total or inp + out
            # OpenAI counts cached prompt tokens inside prompt_tokens, as Usage does.
            details = getattr(usage, "prompt_tokens_details", None)
            cached = getattr(details, "cached_tokens", None) or 0
            if not isinstance(cached, int):
                raise MalformedReply(f"malformed usage from the server: {usage!r}")
            self.usage = Usage(
                input_tokens=inp, output_tokens=out, total_tokens=total, requests=1, cache_read_tokens=cached
            )
        choices = obj.choices or []
        if not isinstance(choices, list):
            raise MalformedReply(f"malformed reply from the server: choices is a {type(choices).__name__}")
        return choices

    def _content(self, source: Any, what: str) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        for name in REASONING_FIELDS:
            piece = _extra(source).get(name)
            if isinstance(piece, str) and piece:  # lenient: servers disagree on what else may be there
                self.reasoning.append(piece)
                events.append(ReasoningDelta(text=piece))
                break
        # A refusal (structured outputs) is what the model said instead of content: keep it as text.
        for piece in (_text(source.content, f"{what}.content"), _text(getattr(source, "refusal", None), "refusal")):
            if piece:
                self.text.append(piece)
                events.append(TextDelta(text=piece))
        return events

    def _call_piece(self, index: Any, piece: Any) -> None:
        call_id = _text(piece.id, "tool_calls.id") or None
        if not isinstance(index, int):
            # Some servers omit the index: a new id starts a new call, a piece without one continues the last.
            known = [i for i, c in self.calls.items() if call_id is not None and c.id == call_id]
            if known:
                index = known[0]
            elif call_id is not None or not self.calls:
                index = len(self.calls)
            else:
                index = max(self.calls)
        call = self.calls.setdefault(index, _Call())
        if call_id and call.id is None:
            call.id = call_id
        function = piece.function
        if function is not None:
            name = _text(function.name, "tool_calls.function.name")
            if name and not call.name:
                call.name = name
            call.arguments.append(_text(function.arguments, "tool_calls.function.arguments"))

    def _finish(self, choice: Any) -> None:
        reason = choice.finish_reason
        if reason is not None:
            self.finish_reason = _text(reason, "finish_reason")

    # -- output -----------------------------------------------------------------------------------

    def message(self) -> ModelMessage:
        """The assistant message; ``MalformedReply`` if the stream ended before the model finished."""
        if self.finish_reason is None:
            # The SDK ends quietly when a server closes the connection early without chunked
            # framing; a reply without finish_reason is one we did not get in full.
            raise MalformedReply("the stream ended before the model finished its reply (no finish_reason)")
        parts: list[Part] = []
        if self.reasoning:
            parts.append(ReasoningPart(text="".join(self.reasoning)))
        if self.text:
            parts.append(TextPart(text="".join(self.text)))
        for index in sorted(self.calls):
            call = self.calls[index]
            if not call.name:
                raise MalformedReply(f"malformed reply from the server: tool call #{index} has no function name")
            parts.append(
                ToolCallPart.from_arguments_text(
                    tool_call_id=call.id or f"call_{new_id()}",
                    tool_name=call.name,
                    arguments="".join(call.arguments),
                )
            )
        if not parts:
            parts.append(TextPart(text=""))  # an empty reply is still a reply; the engine ends the run on it
        return ModelMessage(role="assistant", parts=parts)
