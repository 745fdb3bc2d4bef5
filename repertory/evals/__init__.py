"""Evals from stored sessions: datasets of real conversations, variants replayed without side effects, scores.

    dataset = await dataset_from_sessions(rt.store, SessionSelect(agent="support"), agents=rt.agents)
    dataset.to_file("support.yaml")                      # pydantic-evals' own format; load_dataset reads it
    report = await run_eval(rt, dataset, name="v2", model=other_model, evaluators=[ToolTrajectory()],
                            out_dir="analytics/")
    report.print()                                        # pydantic-evals' report
    connect("analytics/").sql("SELECT * FROM compare_variants('recorded', 'v2')").show()

A case is one user turn of a stored session; ``run_eval`` forks the session just before it
(through the session tree: O(1), lineage ``forked``, tagged ``eval``) and runs a variant of the
agent there, its tools answered from the recording (``tools="replay"``), so nothing the original
did is done again. Needs the ``evals`` extra (pydantic-evals, and the analytics extra for the
Parquet results).
"""

from repertory._extras import require

require("repertory.evals", "evals")

from repertory.evals.dataset import EvalCase, EvalDataset, dataset_from_sessions, load_dataset  # noqa: E402
from repertory.evals.evaluators import (  # noqa: E402
    Latency,
    ReplyContains,
    ReplyEquals,
    TokensAndCost,
    ToolTrajectory,
)
from repertory.evals.forks import find_fork  # noqa: E402
from repertory.evals.judge import ModelJudge, Verdict  # noqa: E402
from repertory.evals.records import CaseInput, CaseMeta, RecordedCall, TurnOutcome, call_key  # noqa: E402
from repertory.evals.replay import NOT_RECORDED, ReplayTool  # noqa: E402
from repertory.evals.run import EvalReport, run_eval, score_recorded  # noqa: E402
from repertory.evals.select import SessionSelect  # noqa: E402
from repertory.evals.tables import write_results  # noqa: E402
from repertory.evals.variant import ToolMode, variant_agent, variant_name  # noqa: E402
from repertory.evals.views import connect, refresh_evals  # noqa: E402

__all__ = [
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
