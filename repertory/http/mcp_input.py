"""A suspended turn's questions as MCP elicitations, and their answers as decisions made exactly once.

A run waits for a human in one of two ways, and each becomes one form elicitation, keyed so an
answer names exactly what it answers:

- ``approval-{tool_call_id}``: a tool call that needs approval. The form asks for a ``decision``
  (``approve``, ``reject`` or ``edit``), an optional ``reason`` (what the model reads on a
  reject) and, for an edit, ``args``: the call's new arguments as a JSON object in a string (form
  fields are flat primitives). Every approval still pending in the step is asked at once, in order.
- ``suspend-{digest}``: a tool's ``suspend()``, keyed by a digest of its single-use token (a tool
  may suspend again after an answer; that is a new question with a new key). A payload that is
  already a flat form schema (``{"type": "object", "properties": {...}}`` of primitives) is asked
  as it is and the submitted form is the resume value; any other payload is shown as JSON in the
  message and the form asks for one string, ``value``, which is the resume value.

A declined or dismissed elicitation is a reject for an approval; for a ``suspend()`` there is no
answer to give the tool, so the turn is cancelled (the human chose not to go on).

Answers are applied through the run's live single-use tokens, the way every face decides
(``repertory.http.hitl.apply_decisions``): an answer whose question is no longer live (it was
answered, by this client or any other, or the turn ended) is refused with ``InputRefused``, and
of two racing answers exactly one is applied. An answer, once accepted, is applied whatever
becomes of the request that carried it: a dropped connection never leaves a decision half made.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Mapping
from typing import Any

import mcp_types as t
from pydantic import JsonValue

from repertory.core.state import PendingCall, RunState
from repertory.errors import InvalidResumeToken, RepertoryError
from repertory.http.auth import Caller
from repertory.http.errors import HttpError
from repertory.http.gateway import Gateway
from repertory.http.hitl import Decision, apply_decisions, parse_resume
from repertory.runtime import Agent
from repertory.tree.handle import SessionHandle

__all__ = ["APPROVAL_SCHEMA", "InputRefused", "answer", "input_requests", "live_keys"]

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "title": "Decision",
            "enum": ["approve", "reject", "edit"],
            "description": "approve the call as it is, reject it, or run it with edited arguments",
        },
        "reason": {"type": "string", "title": "Reason", "description": "why it is rejected (the agent reads it)"},
        "args": {
            "type": "string",
            "title": "Edited arguments",
            "description": "for edit: the call's arguments as a JSON object",
        },
    },
    "required": ["decision"],
}
"""The form an approval is answered with."""

_VALUE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"value": {"type": "string", "title": "Answer", "description": "your answer to the agent"}},
    "required": ["value"],
}
_PRIMITIVES = frozenset({"string", "number", "integer", "boolean"})


class InputRefused(RepertoryError):
    """An answer that cannot be applied: its question is no longer live (already answered), or it is malformed.

    ``already_answered`` says which: the MCP faces answer both with invalid params, the first as
    "already answered".
    """

    already_answered: bool

    def __init__(self, message: str = "", *, already_answered: bool = False, **details: object) -> None:
        super().__init__(message, already_answered=already_answered, **details)


def _suspend_key(token: str) -> str:
    return "suspend-" + hashlib.sha256(token.encode()).hexdigest()[:24]


def _flat_form(payload: JsonValue) -> dict[str, Any] | None:
    """``payload`` when it is already a form schema an elicitation may carry (flat primitives), else ``None``."""
    if not isinstance(payload, dict) or payload.get("type") != "object":
        return None
    properties = payload.get("properties")
    if not isinstance(properties, dict) or not properties:
        return None
    for prop in properties.values():
        if not isinstance(prop, dict) or prop.get("type") not in _PRIMITIVES:
            return None
    return dict(payload)


def _approval_request(call: PendingCall, agent: Agent | None) -> t.ElicitRequest:
    args = json.dumps(call.args, ensure_ascii=False, sort_keys=True)
    who = f"{agent.name!r} wants" if agent is not None else "The agent wants"
    tool = agent.tools.get(call.tool_name) if agent is not None else None
    what = f" ({tool.description.strip().splitlines()[0]})" if tool is not None and tool.description else ""
    message = f"{who} to call {call.tool_name}{what} with {args}. Approve, reject, or edit the arguments?"
    return t.ElicitRequest(params=t.ElicitRequestFormParams(message=message, requested_schema=APPROVAL_SCHEMA))


def _suspend_request(run: RunState) -> t.ElicitRequest:
    on = run.suspended_on
    assert on is not None
    form = _flat_form(on.payload)
    reason = on.reason or "the agent needs your input"
    if form is not None:
        return t.ElicitRequest(params=t.ElicitRequestFormParams(message=reason, requested_schema=form))
    shown = "" if on.payload is None else ": " + json.dumps(on.payload, ensure_ascii=False, sort_keys=True)
    return t.ElicitRequest(params=t.ElicitRequestFormParams(message=reason + shown, requested_schema=_VALUE_SCHEMA))


def input_requests(run: RunState, agent: Agent | None) -> dict[str, t.ElicitRequest]:
    """The elicitations that answer a suspended run: its pending approvals, or its ``suspend()``; ``{}`` otherwise.

    A run asleep on a timer asks nothing (it wakes by itself).
    """
    on = run.suspended_on
    if run.status != "suspended" or on is None:
        return {}
    if on.kind == "approval":
        return {f"approval-{p.tool_call_id}": _approval_request(p, agent) for p in run.pending if p.kind == "approval"}
    if on.kind == "suspend":
        return {_suspend_key(on.token): _suspend_request(run)}
    return {}


def live_keys(run: RunState | None) -> list[str]:
    """The keys a run's answers may use now, in the order they are decided (the live one first)."""
    return [] if run is None else list(input_requests(run, None))


def _approval_item(key: str, response: t.ElicitResult, call: PendingCall) -> dict[str, JsonValue]:
    """One response as the decision item ``parse_resume`` reads (``{"type": ...}``)."""
    content = response.content or {}
    if response.action != "accept":
        return {"type": "reject", "message": f"the user declined the tool call for `{call.tool_name}`"}
    decision = content.get("decision")
    reason = content.get("reason")
    if decision == "approve":
        return {"type": "approve"}
    if decision == "reject":
        return {"type": "reject", "message": reason if isinstance(reason, str) and reason else None}
    if decision == "edit":
        raw = content.get("args")
        try:
            args = json.loads(raw) if isinstance(raw, str) else None
        except json.JSONDecodeError:
            args = None
        if not isinstance(args, dict):
            raise InputRefused(f"{key}: an edit needs args, the call's arguments as a JSON object")
        return {"type": "edit", "edited_action": {"name": call.tool_name, "args": args}}
    raise InputRefused(f"{key}: decision must be approve, reject or edit, not {decision!r}")


def _decisions(
    run: RunState, agent: Agent | None, caller: Caller, responses: Mapping[str, t.ElicitResult]
) -> list[Decision] | None:
    """The decisions the responses make, in the run's order; ``None`` for a declined ``suspend()``."""
    on = run.suspended_on
    assert on is not None
    if agent is None:
        raise InputRefused(f"the run's agent {run.agent!r} is not served here")
    by = caller.principal.model_dump(mode="json")
    if on.kind == "suspend":
        response = responses[_suspend_key(on.token)]
        if response.action != "accept":
            return None
        form = _flat_form(on.payload)
        content: dict[str, JsonValue] = {
            k: v if not isinstance(v, list) else list(v) for k, v in (response.content or {}).items()
        }
        value: JsonValue = content if form is not None else content.get("value")
        if form is None and not isinstance(value, str):
            raise InputRefused("the answer to this question is a string field named value")
        try:
            return parse_resume(value, run, agent, by)
        except HttpError as exc:
            raise InputRefused(str(exc), already_answered=exc.status == 409) from None
    items: list[JsonValue] = []
    for call in (p for p in run.pending if p.kind == "approval"):
        key = f"approval-{call.tool_call_id}"
        if key not in responses:
            break  # decided in order: the rest stay pending and are asked again
        items.append(_approval_item(key, responses[key], call))
    try:
        return parse_resume({"decisions": items}, run, agent, by)
    except HttpError as exc:
        raise InputRefused(str(exc)) from None


async def answer(
    gw: Gateway,
    caller: Caller,
    session_id: str,
    run_id: str,
    responses: Mapping[str, t.InputResponse],
    *,
    wait: bool = True,
) -> None:
    """Apply the answers to the run's live questions, exactly once, through its single-use tokens.

    The caller must already have been checked to see the session. Liveness is checked before
    anything is applied: when the live question (the first of ``live_keys``) has no answer among
    ``responses``, ``InputRefused(already_answered=True)``, whether it was answered before or the
    run moved on; a malformed answer is ``InputRefused`` and changes nothing. The decisions then
    run in the background (``Gateway.spawn``), so a request that goes away mid-way never leaves
    them half applied; ``wait`` waits for them (until the run rests again), else this returns at
    once (the tasks extension's acknowledgement). A token another request redeemed in between is
    refused the same way, by the store.
    """
    run = await gw.store.load_run(run_id)
    if run is None or run.thread_id != session_id:
        raise InputRefused("no such question", already_answered=True)
    keys = live_keys(run)
    if not keys or keys[0] not in responses:
        raise InputRefused("the question was already answered", already_answered=True)
    elicits: dict[str, t.ElicitResult] = {}
    for key in keys:
        if key in responses:
            response = responses[key]
            if not isinstance(response, t.ElicitResult):
                raise InputRefused(f"{key} is answered with an elicitation result (action and content)")
            elicits[key] = response
    agent = gw.agents.get(run.agent or "")
    decisions = _decisions(run, agent, caller, elicits)
    handle = await gw.runtime.session(session_id, caller.principal)
    if decisions is None:
        work = _cancel_turn_of(handle, gw, run_id)
    else:
        work = _apply(gw, handle, run_id, decisions)
    task = gw.spawn(work)
    if wait:
        await asyncio.shield(task)


async def _apply(gw: Gateway, handle: SessionHandle, run_id: str, decisions: list[Decision]) -> None:
    try:
        await apply_decisions(handle, gw.store, run_id, decisions)
    except HttpError as exc:
        raise InputRefused(str(exc), already_answered=exc.status == 409) from None
    except InvalidResumeToken:  # redeemed by another request between the check and the decision
        raise InputRefused("the question was already answered", already_answered=True) from None


async def _cancel_turn_of(handle: SessionHandle, gw: Gateway, run_id: str) -> None:
    """Cancel the suspended turn whose run is ``run_id`` (a ``suspend()`` the human declined to answer)."""
    for turn in await gw.store.list_turns(handle.id, ("suspended",)):
        if turn.run_id == run_id:
            await handle.get_turn(turn.submission_id).cancel()
