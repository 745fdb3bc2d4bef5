"""Answering a step's tool calls: the part of the step loop between the model and the next request.

``settle_calls`` decides, for every call of the last assistant message that has no result yet,
what it gets: an approval request, a rejection, the tool's real result, a suspension, or (after a
crash, for a tool that is not idempotent) "outcome unknown". It queues approvals before suspends so
a human is asked one thing at a time, in call order, and suspends on the first with a fresh token.

A call that went to ``sleep()`` gets no result yet: it waits, like an approval, until its timer is
woken (or a human resumes it early), and the wake writes its result, which says when it woke. Its
timer row is armed before the suspension is committed, so a crash in between leaves a timer for a
token that never became live (woken, it fails redemption and is dropped), never a suspension
without a timer.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue
from pydantic_core import to_jsonable_python

from repertory.core.clock import iso_ms
from repertory.core.ids import new_id, new_token
from repertory.core.messages import ToolCallPart, ToolResultPart
from repertory.core.state import ApprovalRecord, Delegation, PendingCall, SuspendReason
from repertory.errors import SleepSignal
from repertory.runtime._calls import error_result, run_calls, tool_message, unanswered_calls
from repertory.runtime.tools import Tool, ToolContext

if TYPE_CHECKING:
    from repertory.runtime._loop import Drive

__all__ = ["OUTCOME_UNKNOWN", "reserve_delegations", "settle_calls", "suspend_on_first"]

OUTCOME_UNKNOWN = (
    "outcome unknown: the run stopped while this tool was running, and it is not idempotent, so it was not run again"
)


def reserve_delegations(drive: Drive, calls: list[ToolCallPart]) -> bool:
    """Mint the child session and turn ids of every call that delegates; whether there was one.

    The caller commits right after, before any tool runs: a delegation is a side effect (a child
    session), so its ids are durable before the child exists, whatever the tool's idempotency, and
    a recovery finds that child instead of making a second. Without a session tree to delegate in
    (a bare ``Session``) this raises ``ValueError``: a configuration error, not the model's.
    """
    run = drive.run_state
    reserved = {d.tool_call_id for d in run.delegations}
    delegating = False
    for call in calls:
        tool = drive.tools.get(call.tool_name)
        if tool is None or tool.delegates_to is None:
            continue
        if drive.deps.services is None:
            raise ValueError(
                f"tool {tool.name!r} delegates to agent {tool.delegates_to!r}, which needs a session tree: "
                "run this agent in a Runtime (Runtime.start(agents=...)), not a bare Session"
            )
        delegating = True
        if call.tool_call_id not in reserved:
            run.delegations.append(
                Delegation(
                    tool_call_id=call.tool_call_id,
                    agent=tool.delegates_to,
                    session_id=new_id(),
                    submission_id=new_id(),
                )
            )
    return delegating


async def settle_calls(drive: Drive, fresh: bool) -> bool:
    """Answer the last assistant message's unanswered calls; True when the run suspended.

    ``fresh`` calls come straight from the model and have not started. Otherwise a call may
    have started before a crash: it is re-run only if idempotent (or approved in this drive).
    """
    run = drive.run_state
    unanswered = unanswered_calls(drive.messages)
    if not unanswered:
        if run.pending:
            await suspend_on_first(drive)
            return True
        return False
    queued = {p.tool_call_id for p in run.pending}
    decided = {a.tool_call_id: a for a in run.approvals if a.decision is not None}
    delegations = {d.tool_call_id: d for d in run.delegations} if run.delegations else {}
    results: dict[str, ToolResultPart] = {}
    jobs: list[tuple[Tool, Any, dict[str, Any], ToolContext]] = []
    approvals: list[PendingCall] = []
    for call in unanswered:
        cid = call.tool_call_id
        if cid in queued:
            continue
        tool = drive.tools.get(call.tool_name)
        if tool is None:
            known = ", ".join(sorted(drive.tools)) or "none"
            results[cid] = error_result(call, f"unknown tool {call.tool_name!r}; available tools: {known}")
            continue
        if call.invalid_args is not None:
            # Never run, nor put to a human: the model reads what it sent and can call again.
            raw = call.invalid_args[:2000]
            results[cid] = error_result(
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
                results[cid] = error_result(call, str(exc))
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
            results[cid] = error_result(call, decision.reason or "not approved")
            continue
        delegation = delegations.get(cid)
        if tool.delegates_to is not None and drive.deps.services is None:
            # Recovered outside a runtime (``Session.recover``): leave the call for one that has the tree.
            raise ValueError(f"tool {tool.name!r} delegates to agent {tool.delegates_to!r}, which needs a Runtime")
        # A delegation runs again after a crash: its committed ids lead it to the child it made.
        if not fresh and cid not in drive.just_decided and not tool.idempotent and delegation is None:
            results[cid] = error_result(call, OUTCOME_UNKNOWN)
            continue
        ctx = ToolContext(
            call_id=cid,
            tool_name=tool.name,
            run_id=run.run_id,
            thread_id=run.thread_id,
            approval=None if decision is None else decision.approval,
            scratch=run.scratch,
            services=drive.deps.services,
            delegation=delegation,
            detaching=drive.is_detaching,
        )
        jobs.append((tool, call, args, ctx))
    suspends: list[PendingCall] = []
    if jobs:
        # An empty scratch (most runs never use it) needs neither the copy nor the conversion:
        # a JSON round trip and a pydantic walk of ``{}`` on every tool step bought nothing.
        scratch_before = json.loads(json.dumps(run.scratch)) if run.scratch else {}
        outcomes = await run_calls([(t, c, a, x) for t, c, a, x in jobs])
        if run.scratch:
            try:
                # Tools may write anything into ctx.scratch; it must stay JSON (sets become lists).
                run.scratch = to_jsonable_python(run.scratch)
            except Exception as exc:
                run.scratch = scratch_before
                names = ", ".join(sorted({t.name for t, *_ in jobs}))
                raise ValueError(f"a tool ({names}) put a value into ctx.scratch that is not JSON: {exc}") from None
        for (tool, call, args, _), outcome in zip(jobs, outcomes, strict=True):
            if isinstance(outcome.suspend, SleepSignal):
                suspends.append(_timer_call(drive, tool.name, call.tool_call_id, args, outcome.suspend))
                continue  # answered when it wakes
            results[call.tool_call_id] = outcome.result
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
                    )
                )
    if results:
        ordered = [results[c.tool_call_id] for c in unanswered if c.tool_call_id in results]
        drive.append(tool_message(ordered))
        for part in ordered:
            drive.emit(
                "tool.result",
                {
                    "tool_call_id": part.tool_call_id,
                    "tool_name": part.tool_name,
                    "result": part.result,
                    "is_error": part.is_error,
                },
            )
    for p in approvals:
        run.approvals.append(
            ApprovalRecord(tool_call_id=p.tool_call_id, tool_name=p.tool_name, args=p.args, requested_at=p.requested_at)
        )
    waiting = [p for p in run.pending if p.kind == "approval"] + approvals
    run.pending = waiting + [p for p in run.pending if p.kind != "approval"] + suspends
    if run.pending:
        await suspend_on_first(drive)
        return True
    return False


def _timer_call(drive: Drive, tool_name: str, call_id: str, args: dict[str, Any], signal: SleepSignal) -> PendingCall:
    """The pending timer of a call that slept; its due time is read from the drive's clock now."""
    if signal.until_ms is not None:
        wake_at = signal.until_ms
    else:
        wake_at = drive.deps.clock.now_ms() + math.ceil((signal.seconds or 0) * 1000)
    return PendingCall(
        kind="timer",
        tool_call_id=call_id,
        tool_name=tool_name,
        args=args,
        reason=signal.reason or f"sleeping until {iso_ms(wake_at)}",
        wake_at=wake_at,
    )


async def suspend_on_first(drive: Drive) -> None:
    """Suspend on the first pending call with a fresh token, and commit (a timer is armed first)."""
    run = drive.run_state
    first = run.pending[0]
    payload: JsonValue = first.payload
    if first.kind == "approval":
        payload = {"tool_name": first.tool_name, "args": first.args, "tool_call_id": first.tool_call_id}
    run.to_suspended(
        SuspendReason(
            token=new_token(),
            kind=first.kind,
            reason=first.reason,
            payload=payload,
            tool_call_id=first.tool_call_id,
            wake_at=first.wake_at,
        )
    )
    assert run.suspended_on is not None
    if first.kind == "timer" and first.wake_at is not None and drive.deps.timers is not None:
        await drive.deps.timers.arm(run.run_id, run.thread_id, run.suspended_on.token, first.wake_at)
    # Emitted before the commit so they are durable with the suspension itself: emitted after it,
    # they waited in the buffer for the next commit (the decision), so nobody saw the request in time.
    data = {
        "run_id": run.run_id,
        "kind": first.kind,
        "reason": first.reason,
        "payload": payload,
        "tool_call_id": first.tool_call_id,
    }
    if first.wake_at is not None:
        data["wake_at"] = first.wake_at
    if first.kind == "approval":
        drive.emit("approval.requested", data)
    drive.emit("run.suspended", data)
    await drive.commit()
