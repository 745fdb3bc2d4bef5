"""Reading a Gemini Interactions API event stream: live deltas, where the stream is, and how it ended.

A background interaction runs server-side and numbers nothing: each event carries an opaque
``event_id``, and ``GET /interactions/{id}?stream=true&last_event_id=...`` goes on after it. The
events: ``interaction.created`` (the id), ``step.start`` (a step's type and what it already holds:
a function call's name, id and arguments, a thought's signature), ``step.delta`` (``text``,
``thought_summary``, ``thought_signature``, ``arguments_delta``), ``step.stop``,
``interaction.status_update``, and last ``interaction.completed`` with the final status and usage
but no steps, or an ``error``. So the reply is what the steps streamed; a reader that joined
half-way (a re-attach) never saw the first steps and takes the reply from the stored interaction
instead (``message_of``), which holds every step whole.

Steps map onto our parts as ``_gemini_stream`` maps ``generateContent`` parts, so a reply reads the
same either way: a thought with a summary is a ``ReasoningPart`` with its signature, a thought with
only a signature is a redacted ``ReasoningPart`` (it goes back as a thought step before the next
step), text is a ``TextPart``, a function call a ``ToolCallPart``. The SDK builds an event without
validating it when it does not fit its types, so shapes are checked here: anything unexpected is a
``MalformedReply``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from repertory.core.messages import ModelMessage, Part, ReasoningPart, TextPart, ToolCallPart
from repertory.core.model import ReasoningDelta, TextDelta
from repertory.core.state import Usage
from repertory.models._stream import MalformedReply

__all__ = ["ANSWERED", "InteractionAssembler", "message_of", "usage_of"]

ANSWERED = frozenset({"completed", "requires_action"})
"""Final statuses that are an answer: ``requires_action`` is a reply that calls functions."""

_ENDED = frozenset({"failed", "cancelled", "incomplete", "budget_exceeded"})
"""Statuses after which the interaction says nothing more, though no answer came."""


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


@dataclass
class _Step:
    kind: Literal["thought", "text", "call", "other"]
    pieces: list[str] = field(default_factory=list)
    signature: str | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: Any = None
    argument_text: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Ended:
    """How the interaction ended: its status, and the error's code and message if it failed."""

    status: str
    code: str | None = None
    detail: str | None = None


class InteractionAssembler:
    """Follows one interaction's events: its id, the last event id, its deltas, its steps and its end.

    ``whole`` says whether the stream was read from its start: only then do the steps make the reply.
    """

    def __init__(self, interaction_id: str | None = None, last_event_id: str | None = None) -> None:
        self.interaction_id = interaction_id
        self.last_event_id = last_event_id
        self.whole = interaction_id is None
        self.ended: Ended | None = None
        self.served_by: str | None = None
        self.steps: dict[int, _Step] = {}
        self._usage: Any = None

    def state(self) -> dict[str, Any]:
        """Where this interaction can be read on from: the ``ModelCall`` state."""
        return {"interaction_id": self.interaction_id, "last_event_id": self.last_event_id}

    def feed(self, event: Any) -> TextDelta | ReasoningDelta | None:
        """Take one event; returns the delta it carried, if any. A final event sets ``ended``."""
        try:
            return self._feed(event)
        except MalformedReply:
            raise
        except (AttributeError, TypeError, ValueError, KeyError) as exc:
            raise MalformedReply(f"malformed event from the server: {type(exc).__name__}: {exc}") from None

    def _feed(self, event: Any) -> TextDelta | ReasoningDelta | None:
        kind = getattr(event, "event_type", None)
        if not isinstance(kind, str):
            raise MalformedReply(f"malformed event from the server: no event_type in {event!r:.200}")
        event_id = getattr(event, "event_id", None)
        if isinstance(event_id, str) and event_id:
            self.last_event_id = event_id
        if kind == "step.delta":
            return self._delta(getattr(event, "index", None), getattr(event, "delta", None))
        if kind == "step.start":
            self._start(getattr(event, "index", None), getattr(event, "step", None))
        elif kind == "step.stop":
            self._took(getattr(event, "usage", None))
        elif kind in ("interaction.created", "interaction.completed"):
            interaction = getattr(event, "interaction", None)
            if self.interaction_id is None:
                self.interaction_id = _str(getattr(interaction, "id", None), f"the interaction id of {kind}")
            served = getattr(interaction, "model", None)
            if isinstance(served, str) and served:
                self.served_by = served.removeprefix("models/")
            self._took(getattr(interaction, "usage", None))
            status = getattr(interaction, "status", None)
            if kind == "interaction.completed" and status != "requires_continuation":
                self.ended = Ended(_str(status, "the final status"))
        elif kind == "interaction.status_update":
            self._took(getattr(event, "usage", None))
            status = getattr(event, "status", None)
            if status in _ENDED:
                self.ended = Ended(str(status))
        elif kind == "error":
            error = getattr(event, "error", None)
            code, message = getattr(error, "code", None), getattr(error, "message", None)
            self.ended = Ended("error", str(code) if code else None, str(message) if message else None)
        return None

    def _took(self, usage: Any) -> None:
        if usage is not None:
            self._usage = usage  # running totals: the last is the interaction's

    def _step(self, index: Any, kind: Literal["thought", "text", "call", "other"]) -> _Step:
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise MalformedReply(f"malformed event from the server: step index {index!r}")
        step = self.steps.get(index)
        if step is None:  # a re-attached reader meets steps whose start it never saw
            step = self.steps[index] = _Step(kind)
        return step

    def _start(self, index: Any, step: Any) -> None:
        kind = getattr(step, "type", None)
        if kind == "thought":
            found = self._step(index, "thought")
            found.signature = _signature(getattr(step, "signature", None)) or found.signature
            found.pieces.extend(_texts(getattr(step, "summary", None)))
        elif kind == "model_output":
            found = self._step(index, "text")
            found.pieces.extend(_texts(getattr(step, "content", None)))
        elif kind == "function_call":
            found = self._step(index, "call")
            found.call_id = _str(getattr(step, "id", None), "a function call's id")
            found.name = _str(getattr(step, "name", None), "a function call's name")
            found.arguments = getattr(step, "arguments", None)
        else:  # a server-side tool's step, which this adapter never asks for: not part of the reply
            self._step(index, "other")

    def _delta(self, index: Any, delta: Any) -> TextDelta | ReasoningDelta | None:
        kind = getattr(delta, "type", None)
        if kind == "text":
            text = _str(getattr(delta, "text", None), "a text delta")
            self._step(index, "text").pieces.append(text)
            return TextDelta(text=text) if text else None
        if kind == "thought_summary":
            text = "".join(_texts([getattr(delta, "content", None)]))
            self._step(index, "thought").pieces.append(text)
            return ReasoningDelta(text=text) if text else None
        if kind == "thought_signature":
            self._step(index, "thought").signature = _signature(getattr(delta, "signature", None))
        elif kind == "arguments_delta":
            self._step(index, "call").argument_text.append(_str(getattr(delta, "arguments", None), "arguments"))
        return None

    @property
    def reported_usage(self) -> bool:
        """Whether the stream said what the interaction used (a re-attached one may not have)."""
        return self._usage is not None

    def usage(self) -> Usage:
        """The interaction's usage as the stream last reported it."""
        return usage_of(self._usage)

    def message(self, model: str) -> ModelMessage:
        """The reply the steps streamed (``whole`` streams only), parts in the order the model wrote them."""
        parts: list[Part] = []
        for index in sorted(self.steps):
            step = self.steps[index]
            text = "".join(step.pieces)
            if step.kind == "thought":
                if text or step.signature:
                    parts.append(ReasoningPart(text=text, signature=step.signature, redacted=not text))
            elif step.kind == "text" and text:
                parts.append(TextPart(text=text))
            elif step.kind == "call":
                parts.append(_call(step))
        return _reply(parts, self.served_by or model)


def message_of(interaction: Any, model: str) -> ModelMessage:
    """The reply a stored interaction holds (``interactions.get``): its steps after the last input."""
    steps = getattr(interaction, "steps", None)
    if not isinstance(steps, list):
        raise MalformedReply("malformed interaction from the server: its steps are not a list")
    served = getattr(interaction, "model", None)
    parts: list[Part] = []
    for step in steps:
        kind = getattr(step, "type", None)
        if kind in ("user_input", "function_result"):
            parts = []  # the input echoed back: the reply is what follows the last of it
        elif kind == "thought":
            text = "".join(_texts(getattr(step, "summary", None)))
            signature = _signature(getattr(step, "signature", None))
            if text or signature:
                parts.append(ReasoningPart(text=text, signature=signature, redacted=not text))
        elif kind == "model_output":
            text = "".join(_texts(getattr(step, "content", None)))
            if text:
                parts.append(TextPart(text=text))
        elif kind == "function_call":
            found = _Step(
                "call",
                call_id=_str(getattr(step, "id", None), "a function call's id"),
                name=_str(getattr(step, "name", None), "a function call's name"),
                arguments=getattr(step, "arguments", None),
            )
            parts.append(_call(found))
    name = served.removeprefix("models/") if isinstance(served, str) and served else model
    return _reply(parts, name)


def usage_of(raw: Any) -> Usage:
    """An interaction's usage: thoughts are output (billed so), cached tokens are part of the input."""
    if raw is None:
        return Usage(requests=1)
    inp = _count(getattr(raw, "total_input_tokens", None), "total_input_tokens")
    tool_use = _count(getattr(raw, "total_tool_use_tokens", None), "total_tool_use_tokens")
    out = _count(getattr(raw, "total_output_tokens", None), "total_output_tokens")
    thought = _count(getattr(raw, "total_thought_tokens", None), "total_thought_tokens")
    cached = _count(getattr(raw, "total_cached_tokens", None), "total_cached_tokens")
    total = _count(getattr(raw, "total_tokens", None), "total_tokens") or inp + tool_use + out + thought
    return Usage(
        input_tokens=inp + tool_use,
        output_tokens=out + thought,
        total_tokens=total,
        requests=1,
        cache_read_tokens=cached,
        reasoning_tokens=thought,
    )


def _reply(parts: list[Part], model: str) -> ModelMessage:
    if not any(isinstance(p, TextPart | ToolCallPart) for p in parts):
        parts.append(TextPart(text=""))  # an empty reply is still a reply; the engine ends the run on it
    return ModelMessage(role="assistant", parts=parts, model=model)


def _call(step: _Step) -> ToolCallPart:
    call_id, name = step.call_id, step.name
    if call_id is None or name is None:
        raise MalformedReply("malformed reply from the server: a function call without its start (id and name)")
    if step.argument_text:
        return ToolCallPart.from_arguments_text(
            tool_call_id=call_id, tool_name=name, arguments="".join(step.argument_text)
        )
    args = step.arguments if step.arguments is not None else {}
    if not isinstance(args, dict):
        raise MalformedReply(f"malformed reply from the server: function call arguments are {type(args).__name__}")
    return ToolCallPart(tool_call_id=call_id, tool_name=name, args=dict(args))


def _signature(value: Any) -> str | None:
    """A signature as stored: the base64 text the API sent (``None`` if there is none)."""
    if value is None or value == "":
        return None
    return _str(value, "a thought signature")


def _texts(contents: Any) -> list[str]:
    out: list[str] = []
    for content in contents or []:
        if content is not None and getattr(content, "type", None) == "text":
            out.append(_str(getattr(content, "text", None), "text content"))
    return out
