"""The eval results as Parquet beside the export: ``eval_runs`` (one row per case) and ``eval_scores``.

Each eval writes one file per table, ``<out>/eval_runs/<eval>.parquet`` and
``<out>/eval_scores/<eval>.parquet`` (the name percent-quoted), replaced whole when the eval is
written again: a resumed eval rewrites its rows, never duplicates them. Rows link the source
session and turn to the fork the variant ran in (``fork_session_id``), whose rows the export
holds like any session's. ``repertory.evals.connect`` reads both tables in DuckDB.

``eval_scores`` holds every result of the report: assertions (``kind='assertion'``, ``value`` 1 or
0), scores (``'score'``, the number) and labels (``'label'``, ``label`` the text, ``value`` NULL).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from pydantic_evals.evaluators import EvaluationResult
from pydantic_evals.reporting import EvaluationReport

from repertory.core.ids import new_id, now_ms
from repertory.evals.records import CaseInput, CaseMeta, TurnOutcome

__all__ = ["EVAL_RUNS", "EVAL_SCORES", "eval_file", "score_rows", "write_results"]

_S, _I, _F, _B = pa.string(), pa.int64(), pa.float64(), pa.bool_()

EVAL_RUNS = pa.schema(
    [
        ("eval", _S), ("dataset", _S), ("case_name", _S), ("source_session_id", _S), ("source_turn_id", _S),
        ("revision_id", _S), ("message", _S), ("fork_session_id", _S), ("fork_run_id", _S), ("status", _S),
        ("text", _S), ("expected_status", _S), ("expected_text", _S), ("tool_calls", _S),
        ("expected_tool_calls", _S), ("input_tokens", _I), ("output_tokens", _I), ("total_tokens", _I),
        ("requests", _I), ("cost", _F), ("latency_ms", _I), ("expected_latency_ms", _I), ("model", _S),
        ("failed", _B), ("error", _S), ("written_at", _I),
    ]
)  # fmt: skip
"""One row per case of an eval: where it ran, what it did and what the recorded turn did."""

EVAL_SCORES = pa.schema(
    [
        ("eval", _S), ("case_name", _S), ("source_session_id", _S), ("source_turn_id", _S),
        ("fork_session_id", _S), ("name", _S), ("kind", _S), ("value", _F), ("label", _S), ("reason", _S),
        ("evaluator", _S),
    ]
)  # fmt: skip
"""One row per evaluation result of a case."""

Report = EvaluationReport[CaseInput, TurnOutcome, CaseMeta]


def eval_file(out_dir: str | os.PathLike[str], table: str, eval_name: str) -> Path:
    """Where the eval ``eval_name`` keeps its rows of ``table`` under ``out_dir``."""
    return Path(out_dir) / table / f"{quote(eval_name, safe='')}.parquet"


def _calls(outcome: TurnOutcome | None) -> str | None:
    return None if outcome is None else json.dumps([c.model_dump(mode="json") for c in outcome.tool_calls])


def _result_rows(kind: str, results: dict[str, EvaluationResult[Any]]) -> list[dict[str, Any]]:
    rows = []
    for name, result in results.items():
        value = result.value
        rows.append(
            {
                "name": name,
                "kind": kind,
                "value": None if isinstance(value, str) else float(value),
                "label": value if isinstance(value, str) else None,
                "reason": result.reason,
                "evaluator": result.source.name,
            }
        )
    return rows


def score_rows(report: Report) -> list[dict[str, Any]]:
    """The ``eval_scores`` rows of a report, case by case: assertions, then scores, then labels."""
    rows: list[dict[str, Any]] = []
    for case in report.cases:
        link = {
            "eval": report.name,
            "case_name": case.name,
            "source_session_id": case.inputs.session_id,
            "source_turn_id": case.inputs.turn_id,
            "fork_session_id": case.output.session_id,
        }
        for kind, results in (("assertion", case.assertions), ("score", case.scores), ("label", case.labels)):
            rows.extend({**link, **row} for row in _result_rows(kind, results))
    return rows


def _run_rows(report: Report, dataset: str) -> list[dict[str, Any]]:
    at = now_ms()
    rows: list[dict[str, Any]] = []
    for case in report.cases:
        out, expected = case.output, case.expected_output
        rows.append(
            {
                "eval": report.name,
                "dataset": dataset,
                "case_name": case.name,
                "source_session_id": case.inputs.session_id,
                "source_turn_id": case.inputs.turn_id,
                "revision_id": case.inputs.revision_id,
                "message": case.inputs.message,
                "fork_session_id": out.session_id,
                "fork_run_id": out.run_id,
                "status": out.status,
                "text": out.text,
                "expected_status": None if expected is None else expected.status,
                "expected_text": None if expected is None else expected.text,
                "tool_calls": _calls(out),
                "expected_tool_calls": _calls(expected),
                "input_tokens": out.usage.input_tokens,
                "output_tokens": out.usage.output_tokens,
                "total_tokens": out.usage.total_tokens,
                "requests": out.usage.requests,
                "cost": out.cost,
                "latency_ms": out.latency_ms,
                "expected_latency_ms": None if expected is None else expected.latency_ms,
                "model": out.model,
                "failed": False,
                "error": None,
                "written_at": at,
            }
        )
    for failure in report.failures:
        expected = failure.expected_output
        rows.append(
            {
                "eval": report.name,
                "dataset": dataset,
                "case_name": failure.name,
                "source_session_id": failure.inputs.session_id,
                "source_turn_id": failure.inputs.turn_id,
                "revision_id": failure.inputs.revision_id,
                "message": failure.inputs.message,
                "expected_status": None if expected is None else expected.status,
                "expected_text": None if expected is None else expected.text,
                "expected_tool_calls": _calls(expected),
                "expected_latency_ms": None if expected is None else expected.latency_ms,
                "failed": True,
                "error": failure.error_message,
                "written_at": at,
            }
        )
    return rows


def _write(path: Path, schema: pa.Schema, rows: list[dict[str, Any]]) -> None:
    """Write ``rows`` to ``path`` whole: a temporary file renamed over it, so a reader never sees half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows, schema=schema)
    partial = path.with_name(f".{path.name}.{new_id()}.tmp")
    pq.write_table(table, partial)
    os.replace(partial, path)


def write_results(report: Report, out_dir: str | os.PathLike[str], *, dataset: str) -> tuple[Path, Path]:
    """Write the report's ``eval_runs`` and ``eval_scores`` rows under ``out_dir``; returns the two files."""
    runs = eval_file(out_dir, "eval_runs", report.name)
    scores = eval_file(out_dir, "eval_scores", report.name)
    _write(runs, EVAL_RUNS, _run_rows(report, dataset))
    _write(scores, EVAL_SCORES, score_rows(report))
    return runs, scores
