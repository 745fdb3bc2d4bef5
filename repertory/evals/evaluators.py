"""Evaluators of a turn's outcome: pydantic-evals ``Evaluator``s over ``TurnOutcome``.

The reply checks are pydantic-evals' own ``Equals``, ``EqualsExpected`` and ``Contains``, applied
to the reply's text (an outcome is a record, the built-ins compare whole outputs). Its span-based
trajectory evaluators read pydantic-ai's OpenTelemetry spans, which a repertory run does not
make, so the trajectory is compared here from the stored calls. Latency, tokens and cost are
reported as scores. Any other pydantic-evals evaluator (yours too) runs beside these: it gets the
same context, whose ``output`` and ``expected_output`` are ``TurnOutcome``s.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from pydantic import JsonValue
from pydantic_evals.evaluators import (
    Contains,
    Equals,
    EqualsExpected,
    EvaluationReason,
    Evaluator,
    EvaluatorContext,
    EvaluatorOutput,
)

from repertory.evals.records import RecordedCall, TurnOutcome

__all__ = ["SAVED_EVALUATORS", "Latency", "ReplyContains", "ReplyEquals", "TokensAndCost", "ToolTrajectory"]

ArgsMatch = Literal["exact", "subset", "ignore"]


def _on_text(ctx: EvaluatorContext[object, TurnOutcome, object]) -> EvaluatorContext[object, object, object]:
    """The context with the reply's text as the output (and the recorded reply's as the expected one)."""
    expected = ctx.expected_output
    general: EvaluatorContext[object, object, object] = ctx
    return dataclasses.replace(
        general, output=ctx.output.text, expected_output=None if expected is None else expected.text
    )


@dataclass(repr=False)
class ReplyEquals(Evaluator[object, TurnOutcome, object]):
    """The reply's text equals ``value``, or without one the recorded reply's text (pydantic-evals' equality)."""

    value: str | None = None
    evaluation_name: str | None = field(default=None)

    def evaluate(self, ctx: EvaluatorContext[object, TurnOutcome, object]) -> EvaluatorOutput:
        """``Equals`` (or ``EqualsExpected``) on the text; nothing when there is no recorded reply to compare."""
        on_text = _on_text(ctx)
        if self.value is None:
            return EqualsExpected(evaluation_name=self.get_default_evaluation_name()).evaluate(on_text)
        return Equals(value=self.value).evaluate(on_text)

    def get_default_evaluation_name(self) -> str:
        """``evaluation_name``, else ``ReplyEquals``."""
        return self.evaluation_name or self.get_serialization_name()


@dataclass(repr=False)
class ReplyContains(Evaluator[object, TurnOutcome, object]):
    """The reply's text contains ``value`` (pydantic-evals' ``Contains``); a run with no reply fails it."""

    value: str
    case_sensitive: bool = True
    evaluation_name: str | None = field(default=None)

    def evaluate(self, ctx: EvaluatorContext[object, TurnOutcome, object]) -> EvaluationReason:
        """``Contains`` on the text, with its reason."""
        if ctx.output.text is None:
            return EvaluationReason(value=False, reason=f"the run ended {ctx.output.status} with no reply")
        return Contains(value=self.value, case_sensitive=self.case_sensitive).evaluate(_on_text(ctx))

    def get_default_evaluation_name(self) -> str:
        """``evaluation_name``, else ``ReplyContains``."""
        return self.evaluation_name or self.get_serialization_name()


def _args_differ(expected: dict[str, JsonValue], actual: dict[str, JsonValue], mode: ArgsMatch) -> str | None:
    """What differs between two calls' arguments under ``mode`` (``None``: they match)."""
    if mode == "ignore" or expected == actual:
        return None
    if mode == "subset":
        wrong = [k for k, v in expected.items() if k not in actual or actual[k] != v]
        return None if not wrong else f"arguments {wrong} differ"
    return f"arguments {expected} != {actual}"


@dataclass(repr=False)
class ToolTrajectory(Evaluator[object, TurnOutcome, object]):
    """The variant called the same tools in the same order as the recorded turn, with matching arguments.

    ``args``: ``"exact"`` (equal), ``"subset"`` (every recorded argument present and equal) or
    ``"ignore"``. The reason names the first difference. Nothing is said without a recorded turn.
    """

    args: ArgsMatch = "exact"
    evaluation_name: str | None = field(default=None)

    def evaluate(self, ctx: EvaluatorContext[object, TurnOutcome, object]) -> EvaluatorOutput:
        """An assertion with the first difference as its reason."""
        if ctx.expected_output is None:
            return {}
        expected: list[RecordedCall] = ctx.expected_output.tool_calls
        actual: list[RecordedCall] = ctx.output.tool_calls
        want, got = [c.tool_name for c in expected], [c.tool_name for c in actual]
        if want != got:
            return EvaluationReason(value=False, reason=f"tools {got} where the recorded turn called {want}")
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            differ = _args_differ(e.args, a.args, self.args)
            if differ is not None:
                return EvaluationReason(value=False, reason=f"call {i} ({e.tool_name}): {differ}")
        return EvaluationReason(value=True)

    def get_default_evaluation_name(self) -> str:
        """``evaluation_name``, else ``ToolTrajectory``."""
        return self.evaluation_name or self.get_serialization_name()


@dataclass(repr=False)
class Latency(Evaluator[object, TurnOutcome, object]):
    """The turn's latency in milliseconds as the score ``latency_ms``; with ``max_ms``, the assertion ``latency_ok``."""

    max_ms: int | None = None

    def evaluate(self, ctx: EvaluatorContext[object, TurnOutcome, object]) -> EvaluatorOutput:
        """Nothing for a turn whose latency is unknown."""
        latency = ctx.output.latency_ms
        if latency is None:
            return {}
        out: dict[str, bool | int | float | str | EvaluationReason] = {"latency_ms": float(latency)}
        if self.max_ms is not None:
            out["latency_ok"] = latency <= self.max_ms
        return out


@dataclass(repr=False)
class TokensAndCost(Evaluator[object, TurnOutcome, object]):
    """The turn's ``Usage`` as scores, and its ``cost`` where the model reported one.

    The scores are ``input_tokens``, ``output_tokens``, ``total_tokens`` and ``requests``; ``cost``
    is left out for a model that reported none (one without a price table).
    """

    def evaluate(self, ctx: EvaluatorContext[object, TurnOutcome, object]) -> EvaluatorOutput:
        """Four counts, and the cost where known."""
        usage = ctx.output.usage
        out: dict[str, bool | int | float | str | EvaluationReason] = {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
            "requests": usage.requests,
        }
        if ctx.output.cost is not None:
            out["cost"] = float(ctx.output.cost)
        return out


SAVED_EVALUATORS: tuple[type[Evaluator[object, TurnOutcome, object]], ...] = (
    Latency,
    ReplyContains,
    ReplyEquals,
    TokensAndCost,
    ToolTrajectory,
)
"""The evaluators of this module a saved dataset may name (``load_dataset`` knows them)."""
