"""The log-normal model the concurrency and limits benchmarks share: one tool call, then a reply, each after a delay."""

from __future__ import annotations

import asyncio
import math
import random
from typing import Any

from repertory import Agent, tool
from repertory.core.messages import ModelMessage
from repertory.core.model import ToolSpec
from repertory.testing import ScriptedModel

__all__ = ["AGENT", "SIGMA", "STEPS_PER_TURN", "LogNormalScript", "agents", "lookup"]

AGENT = "assistant"
SIGMA = 0.5
"""The spread of the model's delay (a log-normal's sigma): a slow tail, as real models have."""
STEPS_PER_TURN = 2
"""A turn is two model steps: the tool call, then the reply."""


@tool
async def lookup(q: str) -> str:
    """Look something up (instant: the model's delay is the only wait)."""
    return f"facts about {q}"


class LogNormalScript:
    """A ``ScriptedModel`` step function: one tool call, then a reply, each after a log-normal delay."""

    def __init__(self, median_s: float, sigma: float = SIGMA) -> None:
        self.median_s = median_s
        self.sigma = sigma

    def delay(self, prompt: str, step: int) -> float:
        """Seconds the model takes for ``step`` of the turn ``prompt`` (the same in every process)."""
        return random.Random(f"{prompt}|{step}").lognormvariate(math.log(self.median_s), self.sigma)

    async def __call__(self, messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        step, prompt = 0, ""
        for message in reversed(messages):
            if message.role == "user":
                prompt = message.text
                break
            step += message.role == "assistant"
        await asyncio.sleep(self.delay(prompt, step))
        usage = {"input_tokens": 50, "output_tokens": 10}
        if step == 0:
            return {"tool": "lookup", "args": {"q": prompt}, "usage": usage}
        return {"text": "ok", "usage": usage}


def agents(script: LogNormalScript) -> dict[str, Agent]:
    """The one agent the workload runs: ``lookup`` called once a turn, each step after ``script``'s delay."""
    return {AGENT: Agent(name=AGENT, model=ScriptedModel(script), tools=[lookup], max_steps=STEPS_PER_TURN)}
