"""Answering a step's tool calls, decided from records alone: the step loop between the model and the next request.

``plan_calls`` decides, for every call of the last assistant message that has no result yet,
what it gets: an error result the model reads (an unknown tool, arguments that are not JSON or do
not validate for an approval, a rejection, and, after a crash, "outcome unknown" for a tool that
is not idempotent), an approval to ask a human for, or a run now (a ``CallJob``). It reads only
the calls, the tools and the run's records, so the plan is a value a table test checks; the drive
(``repertory.runtime._loop``) applies it: it runs the jobs, appends the results, records the
approvals and suspends. ``settle_outcomes`` turns what the jobs did into results and suspensions,
and ``queue_pending`` orders the suspensions so a human is asked one thing at a time, in call
order, approvals first; the drive suspends on the first with a fresh token (``suspension``).

A call that went to ``sleep()`` gets no result yet: it waits, like an approval, until its timer is
woken (or a human resumes it early), and the wake writes its result, which says when it woke. Its
timer row is armed before the suspension is committed, so a crash in between leaves a timer for a
token that never became live (woken, it fails redemption and is dropped), never a suspension
without a timer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from pydantic import JsonValue

from repertory.core.clock import Clock, iso_ms
from repertory.core.ids import new_id, new_token
from repertory.core.messages import ToolCallPart, ToolResultPart
from repertory.core.state import ApprovalRecord, Delegation, PendingCall, RunState, SuspendReason
from repertory.errors import SleepSignal
from repertory.runtime._calls import CallOutcome, error_result
from repertory.runtime.tools import Tool

__all__ = [
    "OUTCOME_UNKNOWN",
    "CallJob",
    "CallPlan",
    "approval_record",
    "client_call",
    "is_client_call",
    "new_delegations",
    "plan_calls",
    "queue_pending",
    "settle_outcomes",
    "suspension",
]

OUTCOME_UNKNOWN = (
    "outcome unknown: the run stopped while this tool was running, and it is not idempotent, so it was not run again"
)


class CallJob(NamedTuple):
    """A call to run now: its tool, the arguments it runs with, and what its ``ToolContext`` carries."""

    tool: Tool
    call: ToolCallPart
    args: dict[str, Any]
    approval: JsonValue | None  # what the human who approved it said (``ToolContext.approval``)
    delegation: Delegation | None  # the child ids committed with a delegating call


@dataclass(frozen=True, slots=True)
class CallPlan:
    """What the unanswered calls of a step get; calls in none of these are queued already.

    ``errors`` maps a call id to the error result it gets instead of running, "outcome unknown"
    included; ``approvals`` are the calls to put to a human, in call order; ``jobs`` the calls to
    run now, in call order; ``clients`` the calls of tools the turn's client runs (the run
    suspends on each, ``RunState.client_tools``), in call order.
    """

    errors: dict[str, ToolResultPart]
    approvals: list[PendingCall]
    jobs: list[CallJob]
    clients: list[PendingCall]


def new_delegations(
    calls: Sequence[ToolCallPart], tools: Mapping[str, Tool], reserved: Sequence[Delegation], in_tree: bool
) -> list[Delegation] | None:
    """The child session and turn ids to mint for the calls that delegate; ``None`` when none does.

    The drive commits them right after, before any tool runs: a delegation is a side effect (a
    child session), so its ids are durable before the child exists, whatever the tool's
    idempotency, and a recovery finds that child instead of making a second. A call reserved
    already keeps its ids (the list may so be empty). Outside a session tree (a bare ``Session``:
    ``in_tree`` false) a delegating call raises ``ValueError``: a configuration error, not the model's.
    """
    minted: list[Delegation] | None = None
    for call in calls:
        tool = tools.get(call.tool_name)
        if tool is None or tool.delegates_to is None:
            continue
        if not in_tree:
            raise ValueError(
                f"tool {tool.name!r} delegates to agent {tool.delegates_to!r}, which needs a session tree: "
                "run this agent in a Runtime (Runtime.start(agents=...)), not a bare Session"
            )
        if minted is None:
            minted = []
        if any(d.tool_call_id == call.tool_call_id for d in reserved):
            continue
        minted.append(
            Delegation(
                tool_call_id=call.tool_call_id,
                agent=tool.delegates_to,
                session_id=new_id(),
                submission_id=new_id(),
            )
        )
    return minted


def plan_calls(
    unanswered: Sequence[ToolCallPart],
    tools: Mapping[str, Tool],
    run: RunState,
    *,
    fresh: bool,
    just_decided: Collection[str] = (),
    in_tree: bool = False,
) -> CallPlan:
    """What each of ``unanswered`` gets, from the tools and the run's records (pending, approvals, delegations).

    ``fresh`` calls come straight from the model and have not started. Otherwise a call may have
    started before a crash: it runs again only if its tool is idempotent, it delegates (its
    committed ids lead it to the child it made), it reattaches (``Tool.reattaches``: it finds its
    first attempt's work from the call's ids), or it was approved in this drive
    (``just_decided``); anything else gets "outcome unknown". ``in_tree`` says the run has a
    session tree to delegate in; a delegating call recovered without one raises ``ValueError``.
    """
    queued = {p.tool_call_id for p in run.pending}
    decided = {a.tool_call_id: a for a in run.approvals if a.decision is not None}
    delegations = {d.tool_call_id: d for d in run.delegations} if run.delegations else {}
    errors: dict[str, ToolResultPart] = {}
    jobs: list[CallJob] = []
    approvals: list[PendingCall] = []
    clients: list[PendingCall] = []
    client_tools = {t.name for t in run.client_tools} if run.client_tools else ()
    for call in unanswered:
        cid = call.tool_call_id
        if cid in queued:
            continue
        tool = tools.get(call.tool_name)
        if tool is None and call.tool_name in client_tools:
            clients.append(client_call(call))
            continue
        if tool is None:
            known = ", ".join(sorted(tools)) or "none"
            errors[cid] = error_result(call, f"unknown tool {call.tool_name!r}; available tools: {known}")
            continue
        if call.invalid_args is not None:
            # Never run, nor put to a human: the model reads what it sent and can call again.
            raw = call.invalid_args[:2000]
            errors[cid] = error_result(
                call,
                f"the arguments of this call to {tool.name!r} are not a JSON object, "
                f"so it did not run; call it again with valid JSON arguments. Received: {raw}",
            )
            continue
        decision = decided.get(cid)
        args: dict[str, Any] = decision.args if decision is not None else call.args
        if decision is None and tool.needs_approval(args):  # a policy callable decides per call
            try:
                tool.validate(args)  # never ask a human to approve a call that cannot run
            except Exception as exc:
                errors[cid] = error_result(call, str(exc))
                continue
            approvals.append(
                PendingCall(
                    kind="approval",
                    tool_call_id=cid,
                    tool_name=tool.name,
                    args=args,
                    reason=f"tool {tool.name!r} requires approval",
                )
            )
            continue
        if decision is not None and decision.decision != "approved":
            errors[cid] = error_result(call, decision.reason or "not approved")
            continue
        delegation = delegations.get(cid)
        if tool.delegates_to is not None and not in_tree:
            # Recovered outside a runtime (``Session.recover``): leave the call for one that has the tree.
            raise ValueError(f"tool {tool.name!r} delegates to agent {tool.delegates_to!r}, which needs a Runtime")
        # A call resumed with its answer (``suspend(rerun=True)``) runs again to deliver it.
        rerun = tool.idempotent or tool.reattaches or delegation is not None or cid in run.answers
        if not fresh and cid not in just_decided and not rerun:
            errors[cid] = error_result(call, OUTCOME_UNKNOWN)
            continue
        jobs.append(CallJob(tool, call, args, None if decision is None else decision.approval, delegation))
    return CallPlan(errors, approvals, jobs, clients)


def client_call(call: ToolCallPart) -> PendingCall:
    """The suspension on a call of a tool the client runs: its payload is the call, its answer the result.

    The whole call travels (arguments that did not parse as JSON too, as the raw text): the client
    runs it, and the value the run is resumed with becomes its result (``is_client_call``).
    """
    payload: dict[str, JsonValue] = {"client_tool": call.tool_name, "tool_call_id": call.tool_call_id}
    payload["args"] = call.args if call.invalid_args is None else call.invalid_args
    return PendingCall(
        kind="suspend",
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        args=call.args,
        reason=f"the client runs tool {call.tool_name!r}",
        payload=payload,
    )


def is_client_call(run: RunState, pending: PendingCall) -> bool:
    """Whether ``pending`` waits on a tool the run's client runs (its answer is the call's result)."""
    return (
        pending.kind == "suspend"
        and isinstance(pending.payload, dict)
        and pending.payload.get("client_tool") == pending.tool_name
        and any(t.name == pending.tool_name for t in run.client_tools)
    )


def approval_record(asked: PendingCall) -> ApprovalRecord:
    """The open record of an approval just asked for (decided later by a human)."""
    return ApprovalRecord(
        tool_call_id=asked.tool_call_id, tool_name=asked.tool_name, args=asked.args, requested_at=asked.requested_at
    )


def settle_outcomes(
    jobs: Sequence[CallJob], outcomes: Sequence[CallOutcome], clock: Clock
) -> tuple[dict[str, ToolResultPart], list[PendingCall]]:
    """What the jobs did: a result per call that has one now, and the suspensions they asked for, in call order.

    A call that slept has no result until it wakes (its timer's due time is read from ``clock`` now);
    a call that suspended has its note as result and waits for its answer as a user message, or,
    asking with ``rerun``, no result until it runs again with the answer.
    """
    results: dict[str, ToolResultPart] = {}
    suspends: list[PendingCall] = []
    for (tool, call, args, _, _), outcome in zip(jobs, outcomes, strict=True):
        if isinstance(outcome.suspend, SleepSignal):
            suspends.append(_timer_call(tool.name, call.tool_call_id, args, outcome.suspend, clock))
            continue  # answered when it wakes
        rerun = outcome.suspend is not None and outcome.suspend.rerun
        result = outcome.result
        if args is not call.args and args != call.args and result is not None:
            result = result.model_copy(update={"ran_with": args})  # the edit beside the request it replaced
        if not rerun:
            results[call.tool_call_id] = result
        if outcome.suspend is not None:
            payload: JsonValue = json.loads(json.dumps(outcome.suspend.payload, default=str))
            suspends.append(
                PendingCall(
                    kind="suspend",
                    tool_call_id=call.tool_call_id,
                    tool_name=tool.name,
                    args=args,
                    reason=outcome.suspend.reason,
                    payload=payload,
                    rerun=rerun,
                )
            )
    return results, suspends


def _timer_call(tool_name: str, call_id: str, args: dict[str, Any], signal: SleepSignal, clock: Clock) -> PendingCall:
    """The pending timer of a call that slept; its due time is read from ``clock`` now."""
    if signal.until_ms is not None:
        wake_at = signal.until_ms
    else:
        wake_at = clock.now_ms() + math.ceil((signal.seconds or 0) * 1000)
    return PendingCall(
        kind="timer",
        tool_call_id=call_id,
        tool_name=tool_name,
        args=args,
        reason=signal.reason or f"sleeping until {iso_ms(wake_at)}",
        wake_at=wake_at,
    )


def queue_pending(
    pending: list[PendingCall], approvals: list[PendingCall], suspends: list[PendingCall]
) -> list[PendingCall]:
    """The run's pending calls with new ``approvals`` and ``suspends``: every approval first, then the rest, in order.

    Nothing new leaves ``pending`` as it is: it is always kept in that order.
    """
    if not approvals and not suspends:
        return pending
    waiting = [p for p in pending if p.kind == "approval"] + approvals
    return waiting + [p for p in pending if p.kind != "approval"] + suspends


def suspension(first: PendingCall) -> SuspendReason:
    """The suspension on ``first`` (the live pending call), with a fresh single-use token."""
    payload: JsonValue = first.payload
    if first.kind == "approval":
        payload = {"tool_name": first.tool_name, "args": first.args, "tool_call_id": first.tool_call_id}
    return SuspendReason(
        token=new_token(),
        kind=first.kind,
        reason=first.reason,
        payload=payload,
        tool_call_id=first.tool_call_id,
        wake_at=first.wake_at,
    )
