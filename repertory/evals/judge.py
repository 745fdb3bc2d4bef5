"""``ModelJudge``: an LLM judge on any repertory ``Model``, scoring a reply against a rubric.

pydantic-evals' ``LLMJudge`` takes a pydantic-ai model; this one takes what repertory runs (an
adapter of ``repertory.models``, a ``FallbackModel``, a scripted model in tests). It asks once for
a JSON verdict ``{"reason", "pass", "score"}`` (with ``output_schema`` set, so a model that
supports structured output is held to it) and returns the score and the pass as two results with
the reason. A reply that is not such a verdict is the evaluator's failure, which pydantic-evals
records in the report (``evaluator_failures``) instead of a score.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_evals.evaluators import EvaluationReason, Evaluator, EvaluatorContext, EvaluatorOutput

from repertory.core.messages import ModelMessage
from repertory.core.model import Model, ModelResponse, ModelSettings
from repertory.evals.records import TurnOutcome

__all__ = ["ModelJudge", "Verdict"]

_SYSTEM = (
    "You grade the reply of an AI assistant against a rubric. Answer with one JSON object and nothing else: "
    '{"reason": "<one or two sentences>", "pass": <true or false>, "score": <a number from 0 to 1>}.'
)


class Verdict(BaseModel):
    """What the judge answers: why, whether the reply passes, and a score from 0 to 1."""

    model_config = ConfigDict(populate_by_name=True)
    reason: str
    passed: bool = Field(alias="pass")
    score: float = Field(ge=0.0, le=1.0)


def _section(tag: str, value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return f"<{tag}>\n{text}\n</{tag}>"


@dataclass(repr=False)
class ModelJudge(Evaluator[object, TurnOutcome, object]):
    """Judge the reply with ``model`` against ``rubric``; results ``<name>_score`` and ``<name>_pass``.

    ``include_input`` shows the judge the user's message (the case's input), ``include_expected``
    the recorded reply. The name is ``evaluation_name``, else ``ModelJudge``. Saved with a dataset,
    the model is written as its name only: a judge is given its model in code, not loaded from a file.
    """

    rubric: str
    model: Model
    include_input: bool = True
    include_expected: bool = False
    evaluation_name: str | None = field(default=None)

    def prompt(self, ctx: EvaluatorContext[object, TurnOutcome, object]) -> str:
        """The user message the judge reads: the rubric, then what it grades."""
        parts = [_section("rubric", self.rubric)]
        if self.include_input:
            inputs = ctx.inputs
            parts.append(_section("input", getattr(inputs, "message", inputs)))
        parts.append(
            _section("reply", ctx.output.text if ctx.output.text is not None else f"(no reply: {ctx.output.status})")
        )
        if self.include_expected and ctx.expected_output is not None:
            parts.append(_section("expected_reply", ctx.expected_output.text or ""))
        return "\n\n".join(parts)

    async def evaluate(self, ctx: EvaluatorContext[object, TurnOutcome, object]) -> EvaluatorOutput:
        """One request to the judge; its verdict as a score and an assertion, each with the reason."""
        messages = [ModelMessage.system(_SYSTEM), ModelMessage.user(self.prompt(ctx))]
        settings = ModelSettings(output_schema=Verdict.model_json_schema(by_alias=True))
        reply: ModelMessage | None = None
        async for event in self.model.request(messages, [], settings):
            if isinstance(event, ModelResponse):
                reply = event.message
        if reply is None:
            raise ValueError("the judge model ended without a response")
        try:
            verdict = Verdict.model_validate_json(reply.text)
        except ValidationError as exc:
            raise ValueError(f"the judge did not answer with a verdict: {reply.text[:200]!r} ({exc})") from None
        name = self.evaluation_name or self.get_serialization_name()
        return {
            f"{name}_score": EvaluationReason(value=verdict.score, reason=verdict.reason),
            f"{name}_pass": EvaluationReason(value=verdict.passed, reason=verdict.reason),
        }

    def build_serialization_arguments(self) -> dict[str, Any]:
        """The arguments as saved: the model by its name (``model`` attribute, else its class)."""
        arguments = super().build_serialization_arguments()
        arguments["model"] = str(getattr(self.model, "model", type(self.model).__name__))
        return arguments
