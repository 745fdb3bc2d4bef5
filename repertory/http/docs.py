"""Response shapes for ``/openapi.json``: what each route answers, for people and generated clients.

The routes build their JSON in ``views`` (plain dicts, no second validation pass on the way out);
these models only describe it. They allow extra fields, as LangGraph's own schema does.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, JsonValue

__all__ = ["ERRORS", "SSE", "AssistantOut", "RunOut", "ThreadOut", "ThreadStateOut", "ValuesOut", "responses"]


class _Out(BaseModel):
    model_config = ConfigDict(extra="allow")


class ErrorOut(BaseModel):
    """Every refusal: a status code and one sentence."""

    detail: str


class InterruptOut(_Out):
    """A pending approval (``{"action_requests", "review_configs"}``) or a ``suspend()`` payload."""

    value: JsonValue
    id: str


class ValuesOut(_Out):
    """Thread values: LangChain message dicts, plus ``__interrupt__`` while a human is awaited."""

    messages: list[dict[str, JsonValue]]


class ThreadOut(_Out):
    """A thread (a session)."""

    thread_id: str
    created_at: str
    updated_at: str
    metadata: dict[str, JsonValue]
    status: Literal["idle", "busy", "interrupted", "error"]
    values: ValuesOut
    interrupts: dict[str, list[InterruptOut]]


class CheckpointOut(_Out):
    """A checkpoint: a history revision of the thread."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str | None


class ThreadStateOut(_Out):
    """The thread at one checkpoint."""

    values: ValuesOut
    next: list[str]
    tasks: list[dict[str, JsonValue]]
    checkpoint: CheckpointOut
    parent_checkpoint: CheckpointOut | None
    metadata: dict[str, JsonValue]
    created_at: str | None
    interrupts: list[InterruptOut]


class RunOut(_Out):
    """A run (a turn's run)."""

    run_id: str
    thread_id: str
    assistant_id: str
    created_at: str
    updated_at: str
    status: Literal["pending", "running", "error", "success", "timeout", "interrupted"]
    metadata: dict[str, JsonValue]
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"]


class AssistantOut(_Out):
    """An assistant (an agent)."""

    assistant_id: str
    graph_id: str
    name: str
    version: int
    metadata: dict[str, JsonValue]


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut, "description": description}
    for status, description in (
        (401, "No API key"),
        (403, "Unknown API key"),
        (404, "No such thread, run or assistant"),
        (409, "Conflicts with the thread's state (busy, no interrupt, another assistant, not the head)"),
        (413, "Body too large"),
        (422, "Invalid request, with every problem spelled out"),
    )
}

SSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-sent events: metadata, then the requested modes' parts, error, end. "
        "Ids are '<seq>-<n>'; send the last one as Last-Event-ID to resume.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
    429: {"model": ErrorOut, "description": "Too many open streams for this key"},
    **ERRORS,
}


def responses(model: Any) -> dict[int | str, dict[str, Any]]:
    """A 200 of ``model`` plus the documented errors."""
    return {200: {"model": model}, **ERRORS}
