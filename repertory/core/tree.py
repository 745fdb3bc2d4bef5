"""Records of the session tree: sessions, their lineage, turns and events.

A session owns exactly one thread (its thread id is its session id). Sessions relate two ways:
``spawned`` children start with no history, ``forked`` children share the parent's history up to
``forked_at_revision_id``. A turn is one message put into a session; it is durable from the moment
``send()`` returns and runs exactly once. Events are the session's durable log, numbered by a
gap-free per-session ``seq``; text and reasoning deltas are live-only and carry no seq.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from repertory.core.ids import Id, now_ms
from repertory.core.messages import ModelMessage
from repertory.core.state import ErrorInfo

__all__ = [
    "EventType",
    "Lineage",
    "LineageKind",
    "SessionEvent",
    "SessionMetadata",
    "SessionRecord",
    "SessionStatus",
    "TurnKind",
    "TurnRecord",
    "TurnStatus",
    "OPEN_TURN_STATUSES",
    "Placement",
]

LineageKind = Literal["root", "spawned", "forked"]
Placement = Literal["shared", "dedicated"]
SessionStatus = Literal["idle", "running", "suspended", "error"]
TurnKind = Literal["message", "notification"]
TurnStatus = Literal["queued", "running", "suspended", "done", "error", "cancelled"]
OPEN_TURN_STATUSES: tuple[TurnStatus, ...] = ("queued", "running")
EventType = Literal[
    "turn.started",
    "text.delta",
    "reasoning.delta",
    "tool.call",
    "tool.result",
    "approval.requested",
    "run.suspended",
    "checkpoint",
    "context.compacted",
    "turn.completed",
    "notification",
    "error",
]


class Lineage(BaseModel):
    """How a session came to exist: a root, spawned by a parent, or forked from one."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: LineageKind = "root"
    parent_id: Id | None = None
    forked_at_revision_id: Id | None = None


class SessionRecord(BaseModel):
    """The stored row of one session: configuration and its place in the tree."""

    model_config = ConfigDict(extra="forbid")
    session_id: Id
    agent: str
    lineage: Lineage = Field(default_factory=Lineage)
    root_id: Id
    title: str | None = None
    model: str | None = None
    cwd: str | None = None
    # Where the session runs on the Ray backend: spread over shared hosts, or a host of its own.
    placement: Placement = "shared"
    # Free-form JSON set at creation (the HTTP server keeps a thread's metadata here); fixed
    # afterwards like the lineage: ``update_session`` does not rewrite it.
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    created_at: int = Field(default_factory=now_ms)
    updated_at: int = Field(default_factory=now_ms)


class SessionMetadata(BaseModel):
    """What ``handle.metadata()`` returns: title, model, live status, cwd and times."""

    title: str | None
    model: str | None
    status: SessionStatus
    cwd: str | None
    created_at: int
    updated_at: int


class TurnRecord(BaseModel):
    """One durable submission: the message, its place in the session's queue, and how it ended.

    ``output_type`` names the pydantic model a ``run(prompt, output=M)`` asked for
    (``module:qualname``), so the validation loop survives a restart when the class is importable.
    """

    model_config = ConfigDict(extra="forbid")
    submission_id: Id
    session_id: Id
    seq: int = 0
    kind: TurnKind = "message"
    message: ModelMessage
    status: TurnStatus = "queued"
    run_id: Id
    output_type: str | None = None
    error: ErrorInfo | None = None
    created_at: int = Field(default_factory=now_ms)
    updated_at: int = Field(default_factory=now_ms)


class SessionEvent(BaseModel):
    """One event of a session's stream; ``seq`` is gap-free per session (``None`` for live deltas)."""

    model_config = ConfigDict(extra="forbid")
    session_id: Id
    seq: int | None = None
    submission_id: str | None = None
    type: str
    data: dict[str, Any] = Field(default_factory=dict)
    at: int = Field(default_factory=now_ms)
