"""Decisions return what they decided: an approval record, what they say in the thread, the calls approved.

Each decision reads the run's live suspension and leaves the run as it was (the drive applies the
``Decided``), so a decision that fails (arguments that do not validate) changes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from repertory.core.messages import Origin
from repertory.core.state import ApprovalRecord, PendingCall, RunState
from repertory.errors import ToolError
from repertory.runtime._decisions import approve, reject, resume, wake_timer
from repertory.runtime.tools import Tool, tool
from repertory.testing import ManualClock


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay."""
    return str(amount)


TOOLS: dict[str, Tool] = {"pay": pay}


def waiting(kind: Any = "approval", wake_at: int | None = None) -> RunState:
    """A run whose live suspension is call ``c1`` (an approval with its open record, or a suspend/timer)."""
    approvals = [ApprovalRecord(tool_call_id="c1", tool_name="pay", args={"amount": 5}, requested_at=1)]
    return RunState(
        run_id="r1",
        thread_id="t1",
        status="suspended",
        pending=[PendingCall(kind=kind, tool_call_id="c1", tool_name="pay", args={"amount": 5}, wake_at=wake_at)],
        approvals=approvals if kind == "approval" else [],
    )


def test_an_approval_with_edited_arguments_decides_a_new_record_and_leaves_the_run_alone() -> None:
    run = waiting()
    before = run.model_dump()
    decided = approve({"by": "ada"}, {"amount": 7})(run, TOOLS)
    assert run.model_dump() == before
    assert decided.record is not None and decided.approved == ("c1",)
    record = decided.record
    assert (record.decision, record.args, record.args_replaced, record.approval) == (
        "approved",
        {"amount": 7},
        True,
        {"by": "ada"},
    )
    assert record.decided_at is not None and (decided.message, decided.results) == (None, ())


def test_arguments_that_do_not_validate_fail_the_approval_before_anything_is_decided() -> None:
    run = waiting()
    before = run.model_dump()
    with pytest.raises(ToolError, match="invalid arguments for tool 'pay'"):
        approve(None, {"amount": "lots"})(run, TOOLS)
    assert run.model_dump() == before


def test_a_rejection_decides_the_record_with_its_reason_and_approves_nothing() -> None:
    decided = reject("too much")(waiting(), TOOLS)
    assert decided.record is not None and decided.approved == ()
    assert (decided.record.decision, decided.record.reason, decided.record.args) == (
        "rejected",
        "too much",
        {"amount": 5},
    )


def test_a_resume_says_its_value_as_a_user_message_from_its_origin() -> None:
    origin = Origin(kind="user", id="ada")
    decided = resume({"day": "monday"}, origin, ManualClock())(waiting("suspend"), TOOLS)
    assert decided.message is not None and (decided.record, decided.results, decided.approved) == (None, (), ())
    assert (decided.message.role, decided.message.text, decided.message.origin) == ("user", '{"day": "monday"}', origin)


def test_a_timer_woken_on_time_or_early_answers_its_call_with_when() -> None:
    (on_time,) = wake_timer(60_000, False)(waiting("timer", wake_at=60_000), TOOLS).results
    assert (on_time.tool_call_id, on_time.result, on_time.is_error) == (
        "c1",
        "woke at 1970-01-01T00:01:00.000Z (it was set for 1970-01-01T00:01:00.000Z)",
        False,
    )
    early = resume("now please", None, ManualClock(start_ms=1_000))(waiting("timer", wake_at=60_000), TOOLS)
    assert early.message is None
    assert [r.result for r in early.results] == [
        "woken early at 1970-01-01T00:00:01.000Z by a resume (it was set for 1970-01-01T00:01:00.000Z): now please"
    ]
