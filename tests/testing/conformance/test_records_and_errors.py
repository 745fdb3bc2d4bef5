"""Store-independent parts of the storage contract: the error tree pickles, records refuse what no store can hold."""

from __future__ import annotations

import pickle

import pytest
from pydantic import ValidationError

import repertory.errors as errors_module
from repertory import CommitConflict, RepertoryError, RunState, StoreError, ThreadState
from repertory.errors import SuspendSignal


def test_an_id_with_a_nul_character_is_refused_before_any_store_sees_it() -> None:
    # PostgreSQL text cannot hold NUL, so no backend may accept such an id: the records refuse it.
    with pytest.raises(ValidationError, match="NUL"):
        RunState(run_id="x\x00y", thread_id="t")
    with pytest.raises(ValidationError, match="NUL"):
        ThreadState(thread_id="x\x00y")


FAULTS = [
    getattr(errors_module, name)
    for name in errors_module.__all__
    if issubclass(getattr(errors_module, name), RepertoryError)
]


def test_the_error_tree() -> None:
    # Everything but the control signals raised inside tools and MissingExtra (an ImportError about the install).
    apart = {name for name in errors_module.__all__ if getattr(errors_module, name) not in FAULTS}
    assert apart == {"SuspendSignal", "SleepSignal", "MissingExtra"}
    assert issubclass(CommitConflict, StoreError)
    assert not issubclass(SuspendSignal, RepertoryError)
    assert {cls.__name__ for cls in FAULTS} >= {
        "RepertoryError", "StoreError", "CommitConflict", "RunNotFound", "SessionNotFound",
        "InvalidResumeToken", "WrongSuspensionKind", "NotSuspended", "RunSuspended", "RunCancelled",
        "SessionBusy", "StepBudgetExceeded", "OutputValidationError", "ModelError", "ToolError", "GuardrailTripped",
    }  # fmt: skip


@pytest.mark.parametrize("cls", FAULTS, ids=lambda c: c.__name__)
def test_every_fault_pickles_with_its_details(cls: type[RepertoryError]) -> None:
    err = cls("something broke: ünïcödé", run_id="r-1", thread_id=None, attempts=3, payload={"k": [1, "x"]})
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is cls
    assert str(clone) == "something broke: ünïcödé" == clone.message
    assert clone.args == err.args
    assert clone.details == {"run_id": "r-1", "thread_id": None, "attempts": 3, "payload": {"k": [1, "x"]}}
    assert (clone.run_id, clone.thread_id, clone.attempts, clone.payload) == ("r-1", None, 3, {"k": [1, "x"]})  # type: ignore[attr-defined]
    bare = pickle.loads(pickle.dumps(cls()))
    assert type(bare) is cls and str(bare) == "" and bare.details == {}


def test_suspend_signal_pickles() -> None:
    signal = SuspendSignal("need approval", {"amount": 5, "to": ["bob"]})
    clone = pickle.loads(pickle.dumps(signal))
    assert type(clone) is SuspendSignal
    assert (clone.reason, clone.payload) == ("need approval", {"amount": 5, "to": ["bob"]})
    assert str(clone) == "need approval"
    bare = pickle.loads(pickle.dumps(SuspendSignal()))
    assert bare.reason is None and bare.payload is None
