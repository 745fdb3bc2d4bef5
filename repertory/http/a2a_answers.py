"""The next message on an ``input-required`` task: its answer, decided exactly once through the single-use tokens.

What the task asks is in its status message (``repertory.http.a2a_tasks.question_data``); the
answer is the next ``SendMessage`` (or ``SendStreamingMessage``) naming the task:

- tool calls waiting for approval: a data part ``{"decision": "approve" | "reject" | "edit",
  "reason"?: str, "args"?: {...}}`` per call, in the order the question lists them (a list of
  such objects, or ``{"decisions": [...]}``, answers several at once; a call left out stays
  pending and is asked again). ``reason`` is what the model reads on a reject; ``args`` replace
  the call's arguments on an edit (validated against the tool before anything is applied);
- a ``suspend()``: the message's text is the value the tool gets (a data part instead, when the
  message has no text).

The decisions go through ``repertory.http.hitl.apply_decisions`` with the run's live tokens, the
way every face decides: a question that is no longer live (answered by this client or any other
face, or the task moved on) is refused with ``AnswerRefused(already_answered=True)``, and of two
racing answers the store lets exactly one redeem the token. The decisions run as the gateway's
background work, so a client that goes away mid-way never leaves them half applied.
"""

from __future__ import annotations

import asyncio
from typing import Any

from a2a.types import Message
from google.protobuf.json_format import MessageToDict
from pydantic import JsonValue

from repertory.core.state import RunState
from repertory.errors import InvalidResumeToken, RepertoryError
from repertory.http.auth import Caller
from repertory.http.errors import HttpError
from repertory.http.gateway import Gateway
from repertory.http.hitl import Decision, apply_decisions, parse_resume
from repertory.runtime import Agent

__all__ = ["AnswerRefused", "decide", "decisions_for", "message_text"]


class AnswerRefused(RepertoryError):
    """An answer that cannot be applied: its question is no longer live (``already_answered``), or it is malformed."""

    already_answered: bool

    def __init__(self, message: str = "", *, already_answered: bool = False, **details: object) -> None:
        super().__init__(message, already_answered=already_answered, **details)


def message_text(message: Message) -> str:
    """The message's text parts, joined by blank lines."""
    return "\n\n".join(part.text for part in message.parts if part.HasField("text"))


def _data(message: Message) -> list[JsonValue]:
    out: list[JsonValue] = []
    for part in message.parts:
        if part.HasField("data"):
            out.append(MessageToDict(part.data))
    return out


def _items(message: Message) -> list[dict[str, Any]]:
    """The approval answers a message carries, each ``{"decision": ...}``, in order."""
    items: list[Any] = []
    for data in _data(message):
        decisions = data.get("decisions") if isinstance(data, dict) else None
        if isinstance(decisions, list):
            items.extend(decisions)
        elif isinstance(data, list):
            items.extend(data)
        else:
            items.append(data)
    if not items or not all(isinstance(i, dict) and "decision" in i for i in items):
        raise AnswerRefused(
            'tool calls wait for approval: answer with a data part {"decision": "approve" | "reject" | "edit", '
            '"reason"?: str, "args"?: {...}} per call (see the task status message)'
        )
    return [i for i in items if isinstance(i, dict)]


def _hitl_item(item: dict[str, Any], tool_name: str) -> dict[str, Any]:
    """One A2A answer as the decision item ``parse_resume`` reads."""
    kind, reason = item.get("decision"), item.get("reason")
    if kind == "approve":
        return {"type": "approve"}
    if kind == "reject":
        return {"type": "reject", "message": reason if isinstance(reason, str) and reason else None}
    if kind == "edit":
        args = item.get("args")
        if not isinstance(args, dict):
            raise AnswerRefused("an edit needs args: the call's new arguments as an object")
        return {"type": "edit", "edited_action": {"name": tool_name, "args": args}}
    raise AnswerRefused(f"decision must be approve, reject or edit, not {kind!r}")


def decisions_for(run: RunState, agent: Agent | None, caller: Caller, message: Message) -> list[Decision]:
    """The decisions ``message`` makes for the run's live question (module docstring), else ``AnswerRefused``."""
    on = run.suspended_on
    if run.status != "suspended" or on is None:
        raise AnswerRefused("the question was already answered", already_answered=True)
    if agent is None:
        raise AnswerRefused(f"the run's agent {run.agent!r} is not served here")
    by = caller.principal.model_dump(mode="json")
    if on.kind == "suspend":
        text = message_text(message)
        data = _data(message)
        value: JsonValue = text if text or not data else data[0]
        resume: JsonValue = value
    else:
        calls = [p for p in run.pending if p.kind == "approval"]
        items = _items(message)
        if len(items) > len(calls):
            raise AnswerRefused(f"{len(items)} decisions for {len(calls)} pending approval(s)")
        resume = {"decisions": [_hitl_item(item, call.tool_name) for item, call in zip(items, calls, strict=False)]}
    try:
        return parse_resume(resume, run, agent, by)
    except HttpError as exc:
        raise AnswerRefused(str(exc), already_answered=exc.status == 409) from None


async def decide(
    gw: Gateway, caller: Caller, asking: RunState, agent: Agent | None, message: Message
) -> asyncio.Task[None]:
    """Start applying ``message``'s answer to the live question of ``asking``; the task ends when the run rests again.

    Liveness and the answer's form are checked before anything is applied (``AnswerRefused``); the
    returned task raises ``AnswerRefused(already_answered=True)`` when another request redeemed
    the token in between.
    """
    run = await gw.store.load_run(asking.run_id)
    live = run.suspended_on if run is not None else None
    if run is None or live is None or asking.suspended_on is None or live.token != asking.suspended_on.token:
        raise AnswerRefused("the question was already answered", already_answered=True)
    decisions = decisions_for(run, agent, caller, message)
    handle = await gw.runtime.session(run.thread_id, caller.principal)
    return gw.spawn(_apply(gw, handle, run.run_id, decisions))


async def _apply(gw: Gateway, handle: Any, run_id: str, decisions: list[Decision]) -> None:
    try:
        await apply_decisions(handle, gw.store, run_id, decisions)
    except HttpError as exc:
        raise AnswerRefused(str(exc), already_answered=exc.status == 409) from None
    except InvalidResumeToken:  # redeemed by another request between the check and the decision
        raise AnswerRefused("the question was already answered", already_answered=True) from None
