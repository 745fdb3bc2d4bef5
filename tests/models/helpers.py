"""Small helpers shared by the model adapter tests."""

from __future__ import annotations

from typing import Any

from repertory import ModelMessage, ModelResponse, ModelSettings, ReasoningDelta, TextDelta, ToolSpec
from repertory.core.model import Model, ModelEvent

WAIT = 10.0

LOOKUP = ToolSpec(
    name="lookup",
    description="Look something up.",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)


async def collect(
    model: Model,
    messages: list[ModelMessage] | None = None,
    tools: list[ToolSpec] | None = None,
    settings: ModelSettings | None = None,
) -> tuple[list[ModelEvent], ModelResponse]:
    """Run one request to the end: every event it yielded, and the final response (exactly one, last)."""
    msgs = messages if messages is not None else [ModelMessage.user("hi")]
    events = [e async for e in model.request(msgs, tools or [], settings or ModelSettings())]
    responses = [e for e in events if isinstance(e, ModelResponse)]
    assert len(responses) == 1 and events[-1] is responses[0], events
    return events[:-1], responses[0]


def deltas(events: list[ModelEvent]) -> list[tuple[str, str]]:
    """The deltas as (kind, text) pairs, in order."""
    out: list[tuple[str, str]] = []
    for e in events:
        if isinstance(e, TextDelta):
            out.append(("text", e.text))
        elif isinstance(e, ReasoningDelta):
            out.append(("reasoning", e.text))
    return out


def wire_roles(body: dict[str, Any]) -> list[str]:
    """The roles of the messages a request sent."""
    return [m["role"] for m in body["messages"]]
