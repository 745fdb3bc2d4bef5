"""Guardrails: checks an agent runs on a turn's input and on its final reply.

``Agent(input_guardrails=[...], output_guardrails=[...])`` takes callables
``(ctx: GuardrailContext, text: str) -> str | None``, sync or async. ``None`` lets the text pass; a
string trips the guardrail: the step loop records a ``guardrail.tripped`` event and the run ends
``error`` with ``GuardrailTripped(that string)``. Input guardrails run before the run's first model
request (so a refused input costs no tokens), output guardrails on the reply that would end the run,
after it validated into the output type (so they judge the reply that would be returned); a refused
reply is not committed to the history (its request's usage still counts). A
guardrail that raises fails the run like any error. Sync guardrails run in a worker thread, as sync
tools do, so a slow check (a moderation call) never stalls the other sessions of the process.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from repertory.core.messages import ModelMessage
from repertory.errors import GuardrailTripped

__all__ = ["Guardrail", "GuardrailContext", "GuardrailStage", "check_guardrails", "run_input"]

GuardrailStage = Literal["input", "output"]


@dataclass(frozen=True)
class GuardrailContext:
    """What a guardrail may know besides the text: which run, thread and agent, and which side it guards.

    ``messages`` is the conversation as the model would see it (history, without the instructions),
    for a guardrail that judges the text in context.
    """

    run_id: str
    thread_id: str
    agent: str
    stage: GuardrailStage
    messages: Sequence[ModelMessage]


Guardrail = Callable[[GuardrailContext, str], str | Awaitable[str | None] | None]
"""``(ctx, text) -> str | None``, sync or async: a string trips the guardrail and is the error's message."""


def guardrail_name(guardrail: Guardrail) -> str:
    """A guardrail's name for events and errors: its ``__name__``, else its type's."""
    return getattr(guardrail, "__name__", None) or type(guardrail).__name__


async def check_guardrails(
    guardrails: Sequence[Guardrail], ctx: GuardrailContext, text: str
) -> GuardrailTripped | None:
    """The verdict of ``guardrails``, run in order on ``text``: ``None`` passes, else the first trip, to raise.

    The step loop records a trip as a ``guardrail.tripped`` event before it raises it, so the event
    and the failed run are durable together; a refused final reply it drops first, so no reader of
    the thread (a UI, the next turn's model) sees what the guardrail kept back.
    """
    for guardrail in guardrails:
        if _is_async(guardrail):
            verdict = guardrail(ctx, text)
        else:
            verdict = await asyncio.to_thread(guardrail, ctx, text)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is None:
            continue
        if not isinstance(verdict, str):
            raise TypeError(
                f"guardrail {guardrail_name(guardrail)!r} returned {type(verdict).__name__}; "
                "a guardrail returns None (pass) or a string (the reason it tripped)"
            )
        return GuardrailTripped(verdict or "guardrail tripped", guardrail=guardrail_name(guardrail), stage=ctx.stage)
    return None


def _is_async(fn: object) -> bool:
    """An ``async def`` function, or an object whose ``__call__`` is one."""
    call = type(fn).__call__ if callable(fn) and not inspect.isroutine(fn) else None
    return inspect.iscoroutinefunction(fn) or (call is not None and inspect.iscoroutinefunction(call))


def run_input(messages: Sequence[ModelMessage]) -> str:
    """The text of a run's input: the user and system messages at the end of its history, joined.

    Before a run's first model request its history ends with the messages that started it (a turn's
    message, a notification, a ``{"messages": [...]}`` input), so this is derived from the history
    alone and a run re-driven after a crash checks the same text.
    """
    tail: list[str] = []
    for message in reversed(messages):
        if message.role not in ("user", "system"):
            break
        tail.append(message.text)
    return "\n\n".join(reversed(tail))
