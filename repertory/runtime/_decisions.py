"""Pure helpers of ``Session``: turning inputs into messages, decisions into run bookkeeping, tokens into runs.

A decision (a ``Decider``) reads the run's live suspension and returns what it decided
(``Decided``: the approval record as decided, what it says in the thread, the calls it approved);
the drive applies it. It runs before the token is consumed, so a decision that raises (approval
arguments that do not validate) leaves the run and the token as they were. Nothing here touches a
session: redeeming a token (claiming the session, driving on) is ``Session``'s own.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import JsonValue, TypeAdapter

from repertory.core.clock import Clock, iso_ms
from repertory.core.ids import now_ms
from repertory.core.messages import ModelMessage, Origin, ToolResultPart
from repertory.core.state import ApprovalRecord, RunState, SuspendKind, snapshot
from repertory.core.store import SessionStore
from repertory.errors import (
    InvalidResumeToken,
    RunNotFound,
    WrongSuspensionKind,
)
from repertory.runtime._settle import is_client_call
from repertory.runtime.tools import Tool

__all__ = [
    "Decided",
    "Decider",
    "SessionInput",
    "SuspendKinds",
    "approve",
    "checked_run",
    "held_run",
    "input_messages",
    "reject",
    "resume",
    "stored_run",
    "value_text",
    "wake_timer",
]

SessionInput = str | dict[str, Any]
_MESSAGES = TypeAdapter(list[ModelMessage])
_JSON: TypeAdapter[JsonValue] = TypeAdapter(JsonValue)


def input_messages(value: SessionInput, origin: Origin | None) -> list[ModelMessage]:
    """A run's input as messages: a string becomes one user message with ``origin``."""
    if isinstance(value, str):
        return [ModelMessage.user(value, origin=origin)]
    if isinstance(value, dict) and set(value) == {"messages"}:
        given = value["messages"]
        if isinstance(given, list) and all(isinstance(m, ModelMessage) for m in given):
            messages = list(given)  # records already (a queued turn's message): nothing to validate again
        else:
            messages = _MESSAGES.validate_python(given)
        if not messages:
            raise ValueError("input {'messages': [...]} needs at least one message")
        return messages
    raise TypeError("a session input is a string or {'messages': [ModelMessage, ...]}")


def value_text(value: Any) -> str:
    """A resume value as message text: a string verbatim, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


async def stored_run(store: SessionStore, run_id: str) -> RunState:
    """The stored run, or ``RunNotFound``."""
    run = await store.load_run(run_id)
    if run is None:
        raise RunNotFound(f"no run {run_id!r}", run_id=run_id)
    return run


@dataclass(frozen=True, slots=True)
class Decided:
    """What a decision on a run's live suspension decided; the drive applies it (``Drive.decided``).

    ``record`` is the approval record as decided (it replaces the run's record of that call);
    ``message`` is what the decision says in the thread as a user (a resume value) and ``results``
    the call results it writes (a woken timer's); ``approved`` are the calls approved here, which
    run in this drive although a crash would not run them again.
    """

    record: ApprovalRecord | None = None
    message: ModelMessage | None = None
    results: tuple[ToolResultPart, ...] = ()
    approved: tuple[str, ...] = ()
    answers: tuple[tuple[str, JsonValue], ...] = ()  # (call id, value): calls that run again with their answer


Decider = Callable[[RunState, Mapping[str, Tool]], Decided]
"""``(run, tools) -> Decided``: a decision on ``run.pending[0]``, the live suspension, read from the run's records."""


def _live_record(run: RunState) -> ApprovalRecord:
    pending = run.pending[0]
    return next(a for a in run.approvals if a.tool_call_id == pending.tool_call_id)


def approve(approval: Any, args: dict[str, Any] | None, decided_by: str | None = None) -> Decider:
    """Approve the live pending call (with replaced arguments, validated by its tool: ``ToolError`` if they fail)."""

    def decide(run: RunState, tools: Mapping[str, Tool]) -> Decided:
        pending = run.pending[0]
        update: dict[str, Any] = {
            "decision": "approved",
            "decided_at": now_ms(),
            "decided_by": decided_by,
            "approval": json.loads(json.dumps(approval, default=str)),
        }
        if args is not None:
            tool = tools.get(pending.tool_name)
            if tool is not None:
                tool.validate(args)  # raises ToolError before the token is used
            update["args"] = json.loads(json.dumps(args, default=str))
            update["args_replaced"] = True
        return Decided(record=_live_record(run).model_copy(update=update), approved=(pending.tool_call_id,))

    return decide


def reject(reason: str, decided_by: str | None = None) -> Decider:
    """Reject the live pending call; the loop answers it with an error result."""

    def decide(run: RunState, tools: Mapping[str, Tool]) -> Decided:
        update = {"decision": "rejected", "decided_at": now_ms(), "reason": reason, "decided_by": decided_by}
        return Decided(record=_live_record(run).model_copy(update=update))

    return decide


def wake_timer(at: int, early: bool, value: Any = None) -> Decider:
    """Answer the live timer's call with when it woke (``early``: a human resumed it, with ``value``)."""

    def decide(run: RunState, tools: Mapping[str, Tool]) -> Decided:
        pending = run.pending[0]
        planned = "" if pending.wake_at is None else f" (it was set for {iso_ms(pending.wake_at)})"
        if early:
            text = f"woken early at {iso_ms(at)} by a resume{planned}"
            if value is not None:
                text += f": {value_text(value)}"
        else:
            text = f"woke at {iso_ms(at)}{planned}"
        return Decided(
            results=(ToolResultPart(tool_call_id=pending.tool_call_id, tool_name=pending.tool_name, result=text),)
        )

    return decide


def resume(value: Any, origin: Origin | None, clock: Clock) -> Decider:
    """Answer a ``suspend()`` with ``value`` as a user message said by ``origin``, or wake a timer early with it.

    A call of a tool the client runs (``RunState.client_tools``) is answered by ``value`` as its result.
    """

    def decide(run: RunState, tools: Mapping[str, Tool]) -> Decided:
        if run.pending and run.pending[0].kind == "timer":
            return wake_timer(clock.now_ms(), True, value)(run, tools)
        if run.pending and run.pending[0].rerun:  # the call runs again, with the value as its answer
            answer: JsonValue = _JSON.validate_python(json.loads(json.dumps(value, default=str)))
            return Decided(answers=((run.pending[0].tool_call_id, answer),))
        if run.pending and is_client_call(run, run.pending[0]):
            call = run.pending[0]
            result: JsonValue = _JSON.validate_python(json.loads(json.dumps(value, default=str)))
            return Decided(
                results=(ToolResultPart(tool_call_id=call.tool_call_id, tool_name=call.tool_name, result=result),)
            )
        return Decided(message=ModelMessage.user(value_text(value), origin=origin))

    return decide


SuspendKinds = SuspendKind | tuple[SuspendKind, ...]
"""The suspension kind(s) a decision may redeem: ``resume()`` answers a ``suspend`` or wakes a ``timer``."""


def _kinds(kind: SuspendKinds) -> tuple[SuspendKind, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _live_token_matches(run: RunState, token: str) -> bool:
    live = run.suspended_on.token if run.status == "suspended" and run.suspended_on is not None else None
    return live is not None and isinstance(token, str) and secrets.compare_digest(live.encode(), token.encode())


def held_run(held: RunState | None, run_id: str, token: str, kind: SuspendKinds) -> RunState | None:
    """A copy of the session's own state of the run when it waits on exactly this token and kind.

    It saves reading the run again (the actor read it when it activated, or committed it itself).
    Trusting it is safe: a token is minted once per suspension, so a run still holding it in the
    store is in the state the session holds, and the commit that uses the token checks, in its
    transaction, that it is still live. Anything else goes through the store (``checked_run``).
    """
    if held is None or held.run_id != run_id or not _live_token_matches(held, token):
        return None
    assert held.suspended_on is not None
    return snapshot(held) if held.suspended_on.kind in _kinds(kind) else None


async def checked_run(store: SessionStore, run_id: str, token: str, kind: SuspendKinds) -> RunState:
    """The stored run, checked in the documented order: it exists, the token is live, the kind matches."""
    run = await store.load_run(run_id)
    if run is None:
        raise RunNotFound(f"no run {run_id!r}", run_id=run_id)
    if not _live_token_matches(run, token):
        raise InvalidResumeToken(f"not the live resume token of run {run_id!r}", run_id=run_id)
    assert run.suspended_on is not None
    if run.suspended_on.kind not in _kinds(kind):
        use = "approve_tool() or reject_tool()" if run.suspended_on.kind == "approval" else "resume()"
        raise WrongSuspensionKind(
            f"run {run_id!r} is suspended for {run.suspended_on.kind!r}; use {use}", run_id=run_id
        )
    return run
