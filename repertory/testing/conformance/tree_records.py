"""Builders of the tree suites' records: sessions, turns and events with readable defaults.

Public so a store's own tests can build the same rows the shipped suites use.
"""

from __future__ import annotations

from typing import Any

from repertory.core.messages import ModelMessage
from repertory.core.tree import Lineage, LineageKind, SessionEvent, SessionRecord, TurnRecord

__all__ = ["event", "events", "session_record", "turn_record"]


def session_record(
    session_id: str,
    *,
    parent: str | None = None,
    kind: LineageKind = "root",
    root: str | None = None,
    forked_at: str | None = None,
    created_at: int = 1_000,
    **fields: Any,
) -> SessionRecord:
    """A session row; a child's ``root_id`` defaults to its parent's id."""
    return SessionRecord(
        session_id=session_id,
        agent=fields.pop("agent", "assistant"),
        lineage=Lineage(kind=kind, parent_id=parent, forked_at_revision_id=forked_at),
        root_id=root or parent or session_id,
        created_at=created_at,
        updated_at=fields.pop("updated_at", created_at),
        **fields,
    )


def turn_record(session_id: str, submission_id: str, text: str = "hello", **fields: Any) -> TurnRecord:
    """A queued turn carrying a user message; its ``run_id`` defaults to ``run-<submission_id>``."""
    return TurnRecord(
        submission_id=submission_id,
        session_id=session_id,
        message=ModelMessage.user(text),
        run_id=fields.pop("run_id", f"run-{submission_id}"),
        **fields,
    )


def event(session_id: str, seq: int | None, kind: str = "tool.call", **data: Any) -> SessionEvent:
    """An event whose data and time derive from its seq, so two builds of the same seq are equal."""
    return SessionEvent(
        session_id=session_id,
        seq=seq,
        submission_id=f"sub-{session_id}",
        type=kind,
        data={"n": seq, **data},
        at=10_000 + (seq or 0),
    )


def events(session_id: str, *seqs: int) -> list[SessionEvent]:
    """``event(session_id, seq)`` for each seq."""
    return [event(session_id, seq) for seq in seqs]
