"""``repertory.evals.__all__``, pinned and sorted: a name joins or leaves it only with this list."""

from __future__ import annotations

import repertory.evals

PINNED = [
    "CaseInput",
    "CaseMeta",
    "EvalCase",
    "EvalDataset",
    "EvalReport",
    "Latency",
    "ModelJudge",
    "NOT_RECORDED",
    "RecordedCall",
    "ReplayTool",
    "ReplyContains",
    "ReplyEquals",
    "SessionSelect",
    "TokensAndCost",
    "ToolMode",
    "ToolTrajectory",
    "TurnOutcome",
    "Verdict",
    "call_key",
    "connect",
    "dataset_from_sessions",
    "find_fork",
    "load_dataset",
    "refresh_evals",
    "run_eval",
    "score_recorded",
    "variant_agent",
    "variant_name",
    "write_results",
]


def test_the_public_names_are_pinned_and_sorted() -> None:
    assert repertory.evals.__all__ == PINNED == sorted(PINNED)
    assert all(hasattr(repertory.evals, name) for name in PINNED)
