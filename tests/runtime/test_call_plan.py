"""The call plan: what each unanswered tool call gets, decided from records alone.

No store, no model and no event loop: each case builds the calls, the tools and the run's records
(pending calls, approval records, delegations) and checks the plan ``plan_calls`` makes, and the
pure steps around it (``new_delegations``, ``settle_outcomes``, ``queue_pending``, ``suspension``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from repertory.core.messages import ToolCallPart, ToolResultPart
from repertory.core.state import ApprovalRecord, Delegation, PendingCall, RunState
from repertory.errors import SleepSignal, SuspendSignal
from repertory.runtime._calls import CallOutcome
from repertory.runtime._settle import (
    OUTCOME_UNKNOWN,
    CallJob,
    CallPlan,
    new_delegations,
    plan_calls,
    queue_pending,
    settle_outcomes,
    suspension,
)
from repertory.runtime.tools import Tool, tool
from repertory.testing import ManualClock


@tool
def lookup(city: str) -> str:
    """Read-only, but not marked idempotent."""
    return city


@tool(idempotent=True)
def weather(city: str) -> str:
    """Safe to run twice."""
    return city


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Always asks."""
    return str(amount)


@tool(requires_approval=lambda args: args.get("amount", 0) > 100)
def tip(amount: int) -> str:
    """Asks above 100."""
    return str(amount)


class Delegating(Tool):
    delegates_to = "writer"


def _draft(task: str) -> str:
    return task


draft = Delegating(_draft, name="draft")
TOOLS: dict[str, Tool] = {t.name: t for t in (lookup, weather, pay, tip, draft)}


def call(cid: str, name: str, **args: Any) -> ToolCallPart:
    return ToolCallPart(tool_call_id=cid, tool_name=name, args=args)


def broken(cid: str, name: str, text: str) -> ToolCallPart:
    return ToolCallPart(tool_call_id=cid, tool_name=name, invalid_args=text)


def decided(cid: str, name: str, decision: str, args: dict[str, Any], **rest: Any) -> ApprovalRecord:
    return ApprovalRecord(tool_call_id=cid, tool_name=name, args=args, requested_at=1, decision=decision, **rest)


def delegation(cid: str) -> Delegation:
    return Delegation(tool_call_id=cid, agent="writer", session_id="child-1", submission_id="turn-1")


@dataclass
class Case:
    """One row: the records in, the plan out (call ids; error texts by id, matched as substrings)."""

    calls: list[ToolCallPart]
    fresh: bool = True
    pending: list[PendingCall] = field(default_factory=list)
    approvals: list[ApprovalRecord] = field(default_factory=list)
    delegations: list[Delegation] = field(default_factory=list)
    just_decided: tuple[str, ...] = ()
    in_tree: bool = True
    errors: dict[str, str] = field(default_factory=dict)
    asks: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)


CASES: dict[str, Case] = {
    "fresh calls all run, in call order": Case(
        calls=[call("a", "lookup", city="Oslo"), call("b", "weather", city="Rome")], runs=["a", "b"]
    ),
    "an unknown tool is an error naming the tools there are": Case(
        calls=[call("a", "nope")], errors={"a": "unknown tool 'nope'; available tools: draft, lookup, pay, tip"}
    ),
    "arguments that are not JSON are an error quoting them, never an approval": Case(
        calls=[broken("a", "pay", "{amount: 5")], errors={"a": "are not a JSON object, so it did not run"}
    ),
    "a tool that requires approval is asked for, not run": Case(calls=[call("a", "pay", amount=5)], asks=["a"]),
    "a call that would not validate is an error, never put to a human": Case(
        calls=[call("a", "pay", amount="lots")], errors={"a": "invalid arguments for tool 'pay'"}
    ),
    "a policy asks per call": Case(
        calls=[call("a", "tip", amount=5), call("b", "tip", amount=500)], runs=["a"], asks=["b"]
    ),
    "an approved call runs with the approved arguments": Case(
        calls=[call("a", "pay", amount=5)],
        approvals=[decided("a", "pay", "approved", {"amount": 7}, approval={"by": "ada"})],
        fresh=False,
        just_decided=("a",),
        runs=["a"],
    ),
    "a rejected call is an error with the reason": Case(
        calls=[call("a", "pay", amount=5)],
        approvals=[decided("a", "pay", "rejected", {"amount": 5}, reason="too much")],
        fresh=False,
        errors={"a": "too much"},
    ),
    "a rejection without a reason says not approved": Case(
        calls=[call("a", "pay", amount=5)],
        approvals=[decided("a", "pay", "rejected", {"amount": 5})],
        fresh=False,
        errors={"a": "not approved"},
    ),
    "a call queued already gets nothing new": Case(
        calls=[call("a", "pay", amount=5), call("b", "lookup", city="Oslo")],
        pending=[PendingCall(kind="approval", tool_call_id="a", tool_name="pay", args={"amount": 5})],
        runs=["b"],
    ),
    "recovered: a tool that is not idempotent is outcome unknown": Case(
        calls=[call("a", "lookup", city="Oslo")], fresh=False, errors={"a": OUTCOME_UNKNOWN}
    ),
    "recovered: an idempotent tool runs again": Case(
        calls=[call("a", "weather", city="Oslo")], fresh=False, runs=["a"]
    ),
    "recovered: an approval decided before the crash is outcome unknown": Case(
        calls=[call("a", "pay", amount=5)],
        approvals=[decided("a", "pay", "approved", {"amount": 5})],
        fresh=False,
        errors={"a": OUTCOME_UNKNOWN},
    ),
    "recovered: a delegation runs again with its committed ids": Case(
        calls=[call("a", "draft", task="x")], fresh=False, delegations=[delegation("a")], runs=["a"]
    ),
    "recovered: a delegation never reserved is outcome unknown": Case(
        calls=[call("a", "draft", task="x")], fresh=False, errors={"a": OUTCOME_UNKNOWN}
    ),
    "every kind in one step keeps call order within each": Case(
        calls=[
            call("a", "weather", city="Oslo"),
            call("b", "pay", amount=1),
            call("c", "nope"),
            call("d", "pay", amount=2),
            call("e", "lookup", city="Rome"),
        ],
        errors={"c": "unknown tool"},
        asks=["b", "d"],
        runs=["a", "e"],
    ),
}


def plan_of(case: Case) -> CallPlan:
    run = RunState(
        run_id="r1",
        thread_id="t1",
        pending=case.pending,
        approvals=case.approvals,
        delegations=case.delegations,
    )
    return plan_calls(case.calls, TOOLS, run, fresh=case.fresh, just_decided=case.just_decided, in_tree=case.in_tree)


@pytest.mark.parametrize("name", list(CASES))
def test_the_plan_of_each_case(name: str) -> None:
    case = CASES[name]
    plan = plan_of(case)
    assert [job.call.tool_call_id for job in plan.jobs] == case.runs
    assert [p.tool_call_id for p in plan.approvals] == case.asks
    assert sorted(plan.errors) == sorted(case.errors)
    for cid, text in case.errors.items():
        part = plan.errors[cid]
        assert part.is_error and part.tool_call_id == cid and isinstance(part.result, str)
        assert text in part.result, (part.result, text)


def test_an_approved_job_carries_the_edited_arguments_and_the_approval() -> None:
    plan = plan_of(CASES["an approved call runs with the approved arguments"])
    (job,) = plan.jobs
    assert (job.tool, job.args, job.approval, job.delegation) == (pay, {"amount": 7}, {"by": "ada"}, None)


def test_an_approval_asked_for_says_why_with_the_calls_arguments() -> None:
    (asked,) = plan_of(CASES["a tool that requires approval is asked for, not run"]).approvals
    assert (asked.kind, asked.tool_name, asked.args, asked.reason) == (
        "approval",
        "pay",
        {"amount": 5},
        "tool 'pay' requires approval",
    )


def test_a_delegation_job_carries_its_committed_ids() -> None:
    (job,) = plan_of(CASES["recovered: a delegation runs again with its committed ids"]).jobs
    assert job.delegation == delegation("a")


def test_a_delegation_recovered_outside_a_tree_is_a_configuration_error() -> None:
    case = CASES["recovered: a delegation runs again with its committed ids"]
    case = Case(calls=case.calls, fresh=False, delegations=case.delegations, in_tree=False)
    with pytest.raises(ValueError, match="which needs a Runtime"):
        plan_of(case)


def test_delegations_are_minted_once_per_delegating_call() -> None:
    calls = [call("a", "draft", task="x"), call("b", "lookup", city="Oslo"), call("c", "draft", task="y")]
    assert new_delegations([calls[1]], TOOLS, [], in_tree=True) is None
    minted = new_delegations(calls, TOOLS, [delegation("a")], in_tree=True)
    assert minted is not None and [(d.tool_call_id, d.agent) for d in minted] == [("c", "writer")]
    assert new_delegations(calls[:1], TOOLS, [delegation("a")], in_tree=True) == []  # delegating, all reserved
    with pytest.raises(ValueError, match="needs a session tree"):
        new_delegations(calls, TOOLS, [], in_tree=False)


def _job(t: Tool, cid: str, **args: Any) -> CallJob:
    return CallJob(t, call(cid, t.name, **args), args, None, None)


def _result(cid: str, name: str, value: str) -> ToolResultPart:
    return ToolResultPart(tool_call_id=cid, tool_name=name, result=value)


def test_outcomes_become_results_and_suspensions_in_call_order() -> None:
    clock = ManualClock(start_ms=1_000)
    jobs = [_job(lookup, "a", city="Oslo"), _job(weather, "b", city="Rome"), _job(lookup, "c", city="Bern")]
    outcomes = [
        CallOutcome(_result("a", "lookup", "Oslo")),
        CallOutcome(_result("b", "weather", "suspended"), SuspendSignal("which day?", {"days": (1, 2)})),
        CallOutcome(_result("c", "lookup", "unused"), SleepSignal(seconds=1.5, reason=None)),
    ]
    results, suspends = settle_outcomes(jobs, outcomes, clock)
    assert [(cid, part.result) for cid, part in results.items()] == [("a", "Oslo"), ("b", "suspended")]
    assert [(p.kind, p.tool_call_id, p.reason, p.payload, p.wake_at) for p in suspends] == [
        ("suspend", "b", "which day?", {"days": [1, 2]}, None),  # the payload made JSON
        ("timer", "c", "sleeping until 1970-01-01T00:00:02.500Z", None, 2_500),
    ]


def test_pending_keeps_approvals_first_and_is_left_alone_when_nothing_is_new() -> None:
    def p(kind: Any, cid: str) -> PendingCall:
        return PendingCall(kind=kind, tool_call_id=cid, tool_name="t")

    pending = [p("approval", "a"), p("suspend", "b")]
    assert queue_pending(pending, [], []) is pending
    queued = queue_pending(pending, [p("approval", "c")], [p("timer", "d")])
    assert [x.tool_call_id for x in queued] == ["a", "c", "b", "d"]


def test_a_suspension_on_an_approval_shows_the_call_and_each_has_a_fresh_token() -> None:
    first = PendingCall(kind="approval", tool_call_id="a", tool_name="pay", args={"amount": 5}, reason="why")
    on = suspension(first)
    assert (on.kind, on.reason, on.tool_call_id, on.payload) == (
        "approval",
        "why",
        "a",
        {"tool_name": "pay", "args": {"amount": 5}, "tool_call_id": "a"},
    )
    assert suspension(first).token != on.token
    timer = PendingCall(kind="timer", tool_call_id="b", tool_name="nap", payload=None, wake_at=9)
    assert (suspension(timer).payload, suspension(timer).wake_at) == (None, 9)
