"""``FallbackModel``: ask the next model when one fails, so an overloaded provider does not fail the run.

Each model keeps its own retry policy: a request goes to the next model only once the one before
has given up (its ``ModelError``). Every assistant message names the model that wrote it
(``ModelMessage.model``), so a history served by several models still says who answered each step.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from repertory.core.messages import ModelMessage
from repertory.core.model import (
    Model,
    ModelEvent,
    ModelResponse,
    ModelSettings,
    ReasoningDelta,
    StreamRestart,
    TextDelta,
    TokenCounter,
    ToolSpec,
)
from repertory.errors import ModelError

__all__ = ["FallbackModel"]


def _name(model: Model) -> str:
    name = getattr(model, "model", None)
    return name if isinstance(name, str) else type(model).__name__


class FallbackModel:
    """``FallbackModel(primary, *fallbacks)``: each request tries the models in order until one answers.

    A model that fails with ``ModelError`` (after its own retries: an overload, a rate limit, a cut
    stream, a refusal...) hands the request to the next; ``fallback_on(error)`` returning ``False``
    stops that and raises the error as it is. Other exceptions, and cancellation, pass through at once.
    When every model fails, the ``ModelError`` names each failure (``failures`` in its details) and
    carries the last one's ``status_code``.

    Deltas a failed model streamed before it failed were already shown (and stored, with an agent's
    delta window): the next model's answer starts with a ``StreamRestart``, so the session retracts
    them; the history only ever holds the one reply that finished.
    """

    def __init__(
        self, primary: Model, *fallbacks: Model, fallback_on: Callable[[ModelError], bool] | None = None
    ) -> None:
        self.models: tuple[Model, ...] = (primary, *fallbacks)
        for m in self.models:
            if not isinstance(m, Model):
                raise TypeError(f"FallbackModel takes models (objects with request()), got {type(m).__name__}")
        self.fallback_on = fallback_on
        self.model = _name(primary)

    def __repr__(self) -> str:
        return f"FallbackModel({', '.join(repr(m) for m in self.models)})"

    async def request(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        """Stream the first model's answer that finishes; on its ``ModelError``, the next model's."""
        failures: list[tuple[Model, ModelError]] = []
        streamed = False  # this model's deltas are out
        restart = False  # a failed model's deltas are out: the next answer starts over
        for model in self.models:
            answered = False
            stream = model.request(messages, tools, settings)
            try:
                async for event in stream:
                    answered = answered or isinstance(event, ModelResponse)
                    if restart:
                        restart = False
                        yield StreamRestart(reason=f"model {_name(failures[-1][0])!r} failed: {failures[-1][1]}")
                    streamed = streamed or isinstance(event, TextDelta | ReasoningDelta)
                    yield event
                if not answered:
                    raise ModelError(f"model {_name(model)!r}: its stream ended without a response")
                return
            except ModelError as exc:
                if answered or (self.fallback_on is not None and not self.fallback_on(exc)):
                    raise
                failures.append((model, exc))
                restart, streamed = restart or streamed, False
            finally:
                close: Any = getattr(stream, "aclose", None)  # a caller that stops early closes the model's stream too
                if callable(close):
                    await close()
        said = "; ".join(f"{_name(m)!r}: {e}" for m, e in failures)
        last = failures[-1][1]
        raise ModelError(
            f"all {len(failures)} models failed: {said}",
            model=self.model,
            status_code=getattr(last, "status_code", None),
            failures=[str(e) for _, e in failures],
        ) from last

    async def count_tokens(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> int | None:
        """The count of the first model that can count (the primary, unless it cannot); ``None`` if none can."""
        for model in self.models:
            if isinstance(model, TokenCounter):
                return await model.count_tokens(messages, tools, settings)
        return None

    async def aclose(self) -> None:
        """Close every model that has an ``aclose()``."""
        for model in self.models:
            close: Any = getattr(model, "aclose", None)
            if callable(close):
                await close()
