"""``ToolSpec``: a tool as a model sees it, whoever runs it.

Its own module below both the model protocol (which sends specs with every request) and the run's
checkpoint (which keeps the specs of tools a client runs itself, ``RunState.client_tools``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ToolSpec"]


class ToolSpec(BaseModel):
    """A tool as the model sees it: name, description and a JSON schema of its arguments."""

    model_config = ConfigDict(frozen=True)
    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
