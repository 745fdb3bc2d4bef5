"""What the session benchmark's parts share: the model that stamps its requests, the agent, the runtime."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from typing import Any

from benchmarks.sessions.report import DURABILITY
from repertory import Agent
from repertory.core.messages import ModelMessage
from repertory.core.model import ModelEvent, ModelResponse, ModelSettings, ToolSpec
from repertory.runtime.host import LocalHost
from repertory.testing import ScriptedModel
from repertory.tree.runtime import Runtime

__all__ = ["AGENT", "StampedModel", "local_host", "reply", "runtime"]

AGENT = "assistant"


def reply(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """Every request gets the same short final reply, so the script never runs out."""
    return {"text": "ok", "usage": {"input_tokens": 8, "output_tokens": 1}}


class StampedModel(ScriptedModel):
    """``ScriptedModel`` that records when each request starts and when its reply is ready.

    A request is named by its last message (the turn's prompt, unique per turn in part 4).
    """

    def __init__(self, delay: float) -> None:
        super().__init__(reply, delay=delay)
        self.started: dict[str, float] = {}
        self.replied: dict[str, float] = {}

    async def request(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        """The scripted reply, stamped at the start and when the response is ready."""
        key = messages[-1].text
        self.started[key] = time.perf_counter()
        async for event in super().request(messages, tools, settings):
            if isinstance(event, ModelResponse):
                self.replied[key] = time.perf_counter()
            yield event


async def runtime(
    folder: str, name: str, model: ScriptedModel, durability: str = DURABILITY, idle_timeout: float = 3600.0
) -> Runtime:
    """A local runtime on a fresh SQLite file in ``folder``, serving one agent on ``model``."""
    path = os.path.join(folder, name)
    agent = Agent(name=AGENT, model=model, instructions="Answer in one word.")
    return await Runtime.start(
        store=f"sqlite:///{path}?durability={durability}", agents={AGENT: agent}, idle_timeout=idle_timeout
    )


def local_host(rt: Runtime) -> LocalHost:
    """The runtime's in-process host (this benchmark runs the local backend only)."""
    host = rt.host
    assert isinstance(host, LocalHost)
    return host
