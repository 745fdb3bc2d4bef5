"""Agents importable by path (``tests.ray.agents:clerk``): what a Ray host imports by itself."""

from __future__ import annotations

import os
from typing import Any

from repertory import Agent
from repertory.core.messages import ModelMessage
from repertory.testing import ScriptedModel


def _step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
    return {"text": f"{os.getpid()}:{messages[-1].text}"}


clerk = Agent(name="clerk", model=ScriptedModel(_step))
