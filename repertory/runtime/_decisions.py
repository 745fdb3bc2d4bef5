"""Pure helpers of ``Session``: turning inputs into messages, decisions into run bookkeeping, tokens into runs.

A decision function mutates a drive's run (it records what was decided) and returns the call ids
decided in this drive; it runs before the token is consumed, so a decision that raises (approval
arguments that do not validate) leaves the token live. Nothing here touches a session: redeeming a
token (claiming the session, driving on) is ``Session``'s own.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter

from repertory.core.clock import iso_ms
from repertory.core.ids import now_ms
from repertory.core.messages import ModelMessage, Origin, ToolResultPart
from repertory.core.state import RunState, SuspendKind, snapshot
from repertory.core.store import SessionStore
from repertory.errors import (
    InvalidResumeToken,
    RunNotFound,
    WrongSuspensionKind,
)
from repertory.runtime._calls import tool_message
from repertory.runtime._loop import Drive

__all__ = [
    "SessionInput",
    "SuspendKinds",
    "approve",
    "checked_run",
    "wake_timer",
    "held_run",
    "input_messages",
    "reject",
    "stored_run",
    "value_text",
]

SessionInput = str | dict[str, Any]
_MESSAGES = TypeAdapter(list[ModelMessage])


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


def approve(approval: Any, args: dict[str, Any] | None) -> Callable[[Drive], tuple[str, ...]]:
    """Record an approval (with replaced, validated arguments) for the live pending call."""

    def decide(drive: Drive) -> tuple[str, ...]:
        run = drive.run_state
        pending = run.pending[0]
        record = next(a for a in run.approvals if a.tool_call_id == pending.tool_call_id)
        if args is not None:
            tool = drive.tools.get(pending.tool_name)
            if tool is not None:
                tool.validate(args)  # raises ToolError before the token is used
            record.args = json.loads(json.dumps(args, default=str))
            record.args_replaced = True
        record.decision, record.decided_at = "approved", now_ms()
        record.approval = json.loads(json.dumps(approval, default=str))
        return (pending.tool_call_id,)

    return decide


def reject(reason: str) -> Callable[[Drive], tuple[str, ...]]:
    """Record a rejection for the live pending call; the loop answers it with an error result."""

    def decide(drive: Drive) -> tuple[str, ...]:
        run = drive.run_state
        pending = run.pending[0]
        record = next(a for a in run.approvals if a.tool_call_id == pending.tool_call_id)
        record.decision, record.decided_at, record.reason = "rejected", now_ms(), reason
        return ()

    return decide


def wake_timer(at: int, early: bool, value: Any = None) -> Callable[[Drive], tuple[str, ...]]:
    """Answer the live timer's call with when it woke (``early``: a human resumed it, with ``value``)."""

    def decide(drive: Drive) -> tuple[str, ...]:
        pending = drive.run_state.pending[0]
        planned = "" if pending.wake_at is None else f" (it was set for {iso_ms(pending.wake_at)})"
        if early:
            text = f"woken early at {iso_ms(at)} by a resume{planned}"
            if value is not None:
                text += f": {value_text(value)}"
        else:
            text = f"woke at {iso_ms(at)}{planned}"
        part = ToolResultPart(tool_call_id=pending.tool_call_id, tool_name=pending.tool_name, result=text)
        drive.append(tool_message([part]))
        drive.emit(
            "tool.result",
            {"tool_call_id": part.tool_call_id, "tool_name": part.tool_name, "result": text, "is_error": False},
        )
        return ()

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
