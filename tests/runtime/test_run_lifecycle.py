"""A run's lifecycle: ``RunState``'s transition methods, checked against ``RUN_TRANSITIONS``.

The table says where each status may go; every other move raises ``IllegalTransition`` before
anything changes, and each move clears what its target status does not allow.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import get_args

import pytest
from pydantic import BaseModel

from repertory import Agent, RunResult, RunState, Session
from repertory.core.state import (
    RUN_TRANSITIONS,
    ApprovalRecord,
    ErrorInfo,
    PendingCall,
    RunStatus,
    SuspendReason,
)
from repertory.errors import IllegalTransition, RepertoryError
from repertory.runtime.results import stored_result
from repertory.storage import InMemorySessionStore
from repertory.testing import ScriptedModel

STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)

# Every move the engine makes, read from where it makes it.
LEGAL: set[tuple[RunStatus, RunStatus]] = {
    ("running", "running"),  # a drive starts or re-drives a run
    ("running", "suspended"),
    ("running", "done"),
    ("running", "error"),
    ("running", "cancelled"),
    ("suspended", "running"),  # a decision
    ("suspended", "cancelled"),  # cancelled, or superseded by a new run
    ("suspended", "error"),  # a failure in or right after the suspension's commit
    ("error", "running"),  # recover()
    ("error", "cancelled"),
}

MOVES: dict[RunStatus, Callable[[RunState], None]] = {
    "running": lambda run: run.to_running(),
    "suspended": lambda run: run.to_suspended(SuspendReason(token="t2", kind="suspend")),
    "done": lambda run: run.to_done("the reply"),
    "error": lambda run: run.to_error(ErrorInfo(message="it broke", type="ValueError")),
    "cancelled": lambda run: run.to_cancelled("the run was cancelled", 7),
}


def run_in(status: RunStatus) -> RunState:
    """A run in ``status`` with what that status carries, and an open approval."""
    run = RunState(
        run_id="r1",
        thread_id="t1",
        status=status,
        approvals=[ApprovalRecord(tool_call_id="c1", tool_name="pay", requested_at=1)],
        pending=[PendingCall(kind="approval", tool_call_id="c1", tool_name="pay")],
    )
    if status == "suspended":
        run.suspended_on = SuspendReason(token="t1", kind="approval", tool_call_id="c1")
    if status == "error":
        run.error = ErrorInfo(message="earlier failure")
    if status == "done":
        run.result, run.pending, run.approvals = "done before", [], []
    return run


def test_the_table_is_the_engines_moves_and_done_and_cancelled_are_final() -> None:
    table = {(a, b) for a, targets in RUN_TRANSITIONS.items() for b in targets}
    assert table == LEGAL
    assert set(RUN_TRANSITIONS) == set(STATUSES)
    assert RUN_TRANSITIONS["done"] == RUN_TRANSITIONS["cancelled"] == frozenset()


@pytest.mark.parametrize("source", STATUSES)
@pytest.mark.parametrize("target", STATUSES)
def test_an_illegal_move_raises_where_it_is_tried_and_changes_nothing(source: RunStatus, target: RunStatus) -> None:
    run = run_in(source)
    before = run.model_dump()
    if (source, target) in LEGAL:
        MOVES[target](run)
        assert run.status == target
        return
    with pytest.raises(IllegalTransition) as raised:
        MOVES[target](run)
    assert raised.value.details == {"run_id": "r1", "status": source, "target": target}
    assert run.model_dump() == before


def test_each_move_clears_what_its_status_does_not_allow() -> None:
    suspended = run_in("suspended")
    suspended.to_running()
    assert (suspended.suspended_on, suspended.error, len(suspended.pending)) == (None, None, 1)

    failed = run_in("error")
    failed.to_running()
    assert failed.error is None

    waiting = run_in("running")
    waiting.to_suspended(SuspendReason(token="t9", kind="timer", wake_at=5))
    assert waiting.suspended_on is not None and waiting.suspended_on.token == "t9"

    broken = run_in("suspended")
    broken.to_error(ErrorInfo(message="the timer could not be armed"))
    assert (broken.suspended_on, broken.error.message if broken.error else None) == (
        None,
        "the timer could not be armed",
    )

    finished = run_in("running")
    finished.to_done("hello")
    assert (finished.result, finished.suspended_on, finished.error) == ("hello", None, None)


def test_a_cancel_kills_the_token_empties_pending_and_decides_open_approvals() -> None:
    run = run_in("suspended")
    run.approvals.append(
        ApprovalRecord(tool_call_id="c0", tool_name="pay", requested_at=1, decision="approved", decided_at=2)
    )
    run.to_cancelled("superseded by a new run", 42)
    assert (run.status, run.suspended_on, run.pending) == ("cancelled", None, [])
    decided = {a.tool_call_id: (a.decision, a.decided_at, a.reason) for a in run.approvals}
    assert decided == {"c1": ("cancelled", 42, "superseded by a new run"), "c0": ("approved", 2, None)}
    # A failed run keeps the account of its failure when it is cancelled.
    failed = run_in("error")
    failed.to_cancelled("the run was cancelled", 3)
    assert failed.error is not None and failed.error.message == "earlier failure"


def test_the_error_is_a_repertory_error_that_pickles_with_its_details() -> None:
    run = run_in("done")
    with pytest.raises(IllegalTransition) as raised:
        run.to_running()
    copy = pickle.loads(pickle.dumps(raised.value))
    assert isinstance(copy, RepertoryError)
    assert (copy.message, copy.details) == (raised.value.message, raised.value.details)
    assert "'done' to 'running'" in str(copy)


async def test_a_failure_after_the_final_commit_leaves_the_run_done_and_reports_itself() -> None:
    """What hears the final checkpoint fails: the run stays ``done``; the caller hears that failure."""
    store = InMemorySessionStore()
    heard: list[str] = []

    def on_checkpoint(state: RunState) -> None:
        heard.append(state.status)
        if state.status == "done":
            raise LookupError("the listener broke")

    sess = Session(
        store=store, agent=Agent(name="a", model=ScriptedModel([{"text": "hi"}])), on_checkpoint=on_checkpoint
    )
    with pytest.raises(LookupError, match="the listener broke"):
        await sess.start("hello")
    assert sess.state is not None
    stored = await store.load_run(sess.state.run_id)
    assert stored is not None and (stored.status, stored.result, stored.error) == ("done", "hi", None)
    assert heard == ["running", "done"]


@pytest.mark.parametrize("status", STATUSES)
def test_a_result_carries_the_reply_only_once_the_run_is_done(status: RunStatus) -> None:
    run = run_in(status)
    run.result = "the reply" if status == "done" else None
    result = RunResult.of(run, output="parsed")
    assert (result.run_id, result.status, result.state, result.output) == ("r1", status, run, "parsed")
    assert result.text == ("the reply" if status == "done" else None)


class Answer(BaseModel):
    value: int


def test_a_stored_result_validates_its_reply_into_the_output_type_again() -> None:
    run = run_in("done")
    run.result = '```json\n{"value": 4}\n```'
    assert stored_result(run, Answer).output == Answer(value=4)
    assert stored_result(run, None).output is None
    assert stored_result(run_in("suspended"), Answer).output is None
