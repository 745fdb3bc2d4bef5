"""Decisions on a suspended run: one typed union that pickles (Ray sends it to hosts) and round-trips JSON."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from pydantic import ValidationError

from repertory.core.decisions import Approve, Decision, Reject, Resume, parse_decision

CASES: list[Decision] = [
    Approve(token="t1"),
    Approve(token="t2", approval={"by": "carol", "level": 2}, args={"amount": 7, "to": ["a", "b"]}),
    Reject(token="t3"),
    Reject(token="t4", reason="not in this sprint"),
    Resume(token="t5", value="yes"),
    Resume(token="t6", value={"answer": [1, 2, {"deep": None}]}),
]


@pytest.mark.parametrize("decision", CASES, ids=lambda d: f"{d.kind}-{d.token}")
def test_a_decision_survives_pickle_and_json_as_the_same_kind(decision: Decision) -> None:
    unpickled = pickle.loads(pickle.dumps(decision))
    assert type(unpickled) is type(decision) and unpickled == decision
    parsed = parse_decision(decision.model_dump(mode="json"))
    assert type(parsed) is type(decision) and parsed == decision


def test_defaults_are_the_handles_defaults() -> None:
    assert Reject(token="t").reason == "not approved"
    approve = Approve(token="t")
    assert (approve.approval, approve.args) == (None, None)
    assert Resume(token="t").value is None


@pytest.mark.parametrize(
    "data",
    [
        {"kind": "veto", "token": "t"},  # no such kind
        {"kind": "approve"},  # no token
        {"kind": "reject", "token": "t", "value": 1},  # a field of another kind
        {"token": "t", "reason": "x"},  # no discriminator
    ],
)
def test_a_malformed_decision_is_refused(data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        parse_decision(data)


def test_decisions_are_immutable() -> None:
    decision = Reject(token="t")
    with pytest.raises(ValidationError):
        decision.reason = "changed"  # type: ignore[misc]
