"""``Agent``: a model, instructions and tools; the configuration a session drives."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from repertory.core.model import Model, ModelSettings, ToolSpec
from repertory.runtime.guardrails import Guardrail
from repertory.runtime.tools import Tool, tool

__all__ = ["Agent"]


class Agent:
    """What a session runs: ``model`` answers, ``tools`` act, ``instructions`` lead every request.

    ``max_steps`` bounds the model requests of one run (the next one raises
    ``StepBudgetExceeded``). ``output_type`` validates every final reply into that pydantic model,
    sending validation errors back to the model at most twice before ``OutputValidationError``.
    Instructions are sent with each request and never written into the history. ``model`` may
    be a ``"provider:model"`` string such as ``"openai:gpt-4o-mini"`` (see ``repertory.models.infer_model``).
    ``input_guardrails`` check a run's input before its first model request, ``output_guardrails``
    its final reply: callables ``(ctx, text) -> str | None``, sync or async, where a string ends
    the run ``error`` with ``GuardrailTripped`` (see ``repertory.runtime.guardrails``).
    """

    def __init__(
        self,
        *,
        name: str,
        model: Model | str,
        instructions: str | None = None,
        tools: Sequence[Tool | Any] = (),
        max_steps: int = 100,
        output_type: type[BaseModel] | None = None,
        settings: ModelSettings | None = None,
        input_guardrails: Sequence[Guardrail] = (),
        output_guardrails: Sequence[Guardrail] = (),
    ) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.name = name
        if isinstance(model, str):
            # Imported here so the engine never loads a model SDK unless a model string asks for one.
            from repertory.models import infer_model

            model = infer_model(model)
        self.model: Model = model
        self.instructions = instructions
        self.max_steps = max_steps
        self.output_type = output_type
        self.settings = settings or ModelSettings()
        for guardrail in (*input_guardrails, *output_guardrails):
            if not callable(guardrail):
                raise TypeError(f"agent {name!r}: a guardrail is a callable (ctx, text) -> str | None: {guardrail!r}")
        self.input_guardrails: tuple[Guardrail, ...] = tuple(input_guardrails)
        self.output_guardrails: tuple[Guardrail, ...] = tuple(output_guardrails)
        self.tools: dict[str, Tool] = {}
        for t in tools:
            t = t if isinstance(t, Tool) else tool(t)
            if t.name in self.tools:
                raise ValueError(f"agent {name!r} has two tools named {t.name!r}")
            self.tools[t.name] = t
        self._specs = [t.spec() for t in self.tools.values()]

    @property
    def tool_specs(self) -> list[ToolSpec]:
        """The tools as the model sees them (computed once)."""
        return self._specs

    def with_tools(self, extra: Sequence[Tool]) -> tuple[dict[str, Tool], list[ToolSpec]]:
        """The tools and specs of one run: the agent's plus ``extra`` (those its memory contributes).

        A name in both is a ``ValueError``: the model must never be unsure which tool it called.
        """
        if not extra:
            return self.tools, self._specs
        tools = dict(self.tools)
        for t in extra:
            if t.name in tools:
                raise ValueError(f"agent {self.name!r} already has a tool named {t.name!r}, which its memory adds")
            tools[t.name] = t
        return tools, self._specs + [t.spec() for t in extra]

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, tools={list(self.tools)})"
