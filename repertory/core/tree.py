"""Records of the session tree: sessions, their lineage, turns and events.

A session owns exactly one thread (its thread id is its session id). Sessions relate two ways:
``spawned`` children start with no history, ``forked`` children share the parent's history up to
``forked_at_revision_id``. A turn is one message put into a session; it is durable from the moment
``send()`` returns and runs exactly once. Events are the session's durable log, numbered by a
gap-free per-session ``seq``; text and reasoning deltas are live-only and carry no seq.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from repertory.core.ids import Id, new_id, now_ms
from repertory.core.messages import ModelMessage
from repertory.core.state import ErrorInfo
from repertory.core.toolspec import ToolSpec

__all__ = [
    "EventType",
    "IfBusy",
    "Lineage",
    "LineageKind",
    "NewSession",
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
TurnKind = Literal["message", "notification", "reply"]
"""A turn that sends a message, a notification, or (``reply``) none: the model answers the thread as it stands."""
IfBusy = Literal["enqueue", "reject", "interrupt"]
"""What a turn sent to a busy session does: wait behind the running one, be refused, or cancel it."""
TurnStatus = Literal["queued", "running", "suspended", "done", "error", "cancelled"]
OPEN_TURN_STATUSES: tuple[TurnStatus, ...] = ("queued", "running")
EventType = Literal[
    "turn.started",
    "text.delta",
    "reasoning.delta",
    "reply.retracted",
    "tool.call",
    "tool.result",
    "approval.requested",
    "run.suspended",
    "checkpoint",
    "context.compacted",
    "turn.completed",
    "notification",
    "error",
    "guardrail.tripped",
]


def _is_none(value: object) -> bool:
    return value is None


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
    # Free-form JSON set at creation (the HTTP server keeps a thread's metadata here).
    # ``update_session`` does not rewrite it (an actor's stale copy must not undo a change):
    # ``TreeStore.amend_session`` does, as ``SessionHandle.amend`` asks.
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    # Who the session belongs to (the HTTP server's key owner; ``None``: the operator's, no
    # tenant). Children and forks inherit it; it never changes.
    owner: str | None = None
    created_at: int = Field(default_factory=now_ms)
    updated_at: int = Field(default_factory=now_ms)


_ROOT = Lineage()


@dataclass(frozen=True)
class NewSession:
    """What creating a session asks of a backend: the row's fields but its times, and a fork's head.

    The id is the caller's (a fresh one unless given), so a creation retried after a lost reply
    can recognise its own first attempt (``made``) instead of creating a second session.
    ``root_id=None`` makes the session its own root; ``head`` is the revision a fork's thread
    starts at (``None``: an empty thread). A request, not a record: a frozen dataclass, validated
    when it becomes one (``record``), because bulk creations send it to Ray hosts by the thousand
    per call. Measured per item (build, pickle, unpickle): ~4 + 3 us here, against ~8 + 9 us for
    the dict of keyword arguments it replaced and ~12 + 18 us for a pydantic model.
    """

    agent: str
    session_id: str = field(default_factory=new_id)
    lineage: Lineage = _ROOT
    root_id: str | None = None
    head: str | None = None
    title: str | None = None
    model: str | None = None
    cwd: str | None = None
    placement: Placement = "shared"
    metadata: dict[str, JsonValue] = field(default_factory=dict)
    owner: str | None = None

    def record(self, at: int) -> SessionRecord:
        """The session row this creation writes, stamped ``at`` (epoch ms); validates every field."""
        return SessionRecord(
            session_id=self.session_id,
            agent=self.agent,
            lineage=self.lineage,
            root_id=self.root_id or self.session_id,
            title=self.title,
            model=self.model,
            cwd=self.cwd,
            placement=self.placement,
            metadata=dict(self.metadata),
            owner=self.owner,
            created_at=at,
            updated_at=at,
        )

    def made(self, record: SessionRecord) -> bool:
        """Whether ``record`` is the row this creation writes, whenever it was stamped."""
        mine = self.record(record.created_at)
        return record.model_dump(exclude={"updated_at"}) == mine.model_dump(exclude={"updated_at"})


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
    # The W3C ``traceparent`` of the span that sent the turn (``repertory.tracing``), so the turn's
    # span continues the sender's trace even when it runs after a restart. Left out of the JSON
    # while unset, so an untraced turn is stored exactly as before the field existed.
    traceparent: str | None = Field(default=None, exclude_if=_is_none)
    # Tools the sender runs itself (``RunState.client_tools``): given to the turn's run when it starts.
    client_tools: list[ToolSpec] = Field(default_factory=list, exclude_if=lambda v: not v)


class SessionEvent(BaseModel):
    """One event of a session's stream; ``seq`` is gap-free per session (``None`` for live deltas)."""

    model_config = ConfigDict(extra="forbid")
    session_id: Id
    seq: int | None = None
    submission_id: str | None = None
    type: str
    data: dict[str, Any] = Field(default_factory=dict)
    at: int = Field(default_factory=now_ms)
