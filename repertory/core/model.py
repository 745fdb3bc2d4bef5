"""The ``Model`` protocol: what the step loop asks of any language model.

A model streams ``ModelEvent``s (text and reasoning deltas, for live display) and ends with one
``ModelResponse`` holding the whole assistant message, its usage and its cost. The loop only
relies on the final response; the session stores deltas as the agent's ``delta_window`` says.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from repertory.core.messages import ModelMessage
from repertory.core.state import Usage
from repertory.core.toolspec import ToolSpec

__all__ = [
    "Model",
    "CallCanceller",
    "ModelCall",
    "ModelEvent",
    "ModelResponse",
    "ModelSettings",
    "ReasoningDelta",
    "StreamRestart",
    "TextDelta",
    "TokenCounter",
    "ToolSpec",
]


class ModelSettings(BaseModel):
    """Per-request settings; ``output_schema`` asks for a JSON reply of that schema where supported.

    ``attach`` is set by the session, never by hand: the last ``ModelCall`` state of a call a
    previous drive of this step started (it died mid-reply). An adapter that yielded it continues
    that call from there instead of starting another.
    """

    temperature: float | None = None
    max_tokens: int | None = None
    output_schema: dict[str, Any] | None = None
    extra: dict[str, Any] = Field(default_factory=dict)
    attach: dict[str, Any] | None = None


class TextDelta(BaseModel):
    """A piece of the reply's text as it streams."""

    type: Literal["text-delta"] = "text-delta"
    text: str


class ReasoningDelta(BaseModel):
    """A piece of the model's reasoning as it streams."""

    type: Literal["reasoning-delta"] = "reasoning-delta"
    text: str


class ModelResponse(BaseModel):
    """The end of a request: the full assistant message, its usage and its cost (if priced)."""

    type: Literal["response"] = "response"
    message: ModelMessage
    usage: Usage = Field(default_factory=Usage)
    cost: float | None = None


class StreamRestart(BaseModel):
    """The deltas streamed so far belong to no reply: the answer starts over (a fallback model takes over).

    The session retracts what was streamed (``reply.retracted``) and streams the rest as a new reply.
    """

    type: Literal["stream-restart"] = "stream-restart"
    reason: str = ""


class ModelCall(BaseModel):
    """Where this model call can be found again: a server-side response's id and its position in the stream.

    An adapter that can re-attach (a background response) yields it once the call exists, before
    its reply streams, and again as the reply goes on. The session commits the first before it
    reads on and keeps the latest with the reply's stored deltas, so a run recovered after a crash,
    in any process, hands the last one back (``ModelSettings.attach``) and the call goes on: no
    token is generated twice. A position covers every delta yielded before it (yield it right after
    the delta, nothing awaited between). An adapter that cannot attach (the call expired) starts
    over with a ``StreamRestart``.
    """

    type: Literal["model-call"] = "model-call"
    state: dict[str, Any]


ModelEvent = TextDelta | ReasoningDelta | StreamRestart | ModelCall | ModelResponse


@runtime_checkable
class Model(Protocol):
    """Anything that answers a conversation; real adapters live in ``repertory.models``."""

    def request(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        """Stream events for one request, ending with exactly one ``ModelResponse``."""


@runtime_checkable
class TokenCounter(Protocol):
    """A model that can say how many input tokens a request would cost before sending it.

    Only adapters whose provider (or a tokenizer it ships) answers exactly implement it: an estimate
    is the caller's business, so a caller can tell a count from a guess. ``None`` means this model
    cannot count this request (a ``FallbackModel`` none of whose models counts); a provider that
    fails to answer raises ``ModelError``.
    """

    async def count_tokens(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> int | None:
        """The input tokens of this request as the provider counts them, system and tools included."""


@runtime_checkable
class CallCanceller(Protocol):
    """A model whose calls run on after the request is dropped (a background response) and can be stopped.

    A run cancelled while such a call is under way stops it (``cancel_call`` with its last
    ``ModelCall`` state); a drive that only lets go (a host shutting down, a crash) never does, so
    the call can be re-attached.
    """

    async def cancel_call(self, state: dict[str, Any]) -> None:
        """Stop the server-side call ``state`` names (best effort: an error is logged, never raised to the run)."""
