"""A session's history as a person reads it: who said what, each tool call with its result and approval.

The history graph stores one message per revision; a reader wants a conversation. Each tool call
is shown where the assistant made it, with its arguments, the result that answered it (an error
marked as one), and the approval it needed: requested, approved (with edited arguments, by
whom), rejected (with the reason) or still waiting. Tool messages whose every result found its
call are not shown again; a result whose call is not on the page (a fork's prefix cut short)
stands alone. Reasoning is folded. A system message with an origin is a notification.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from repertory.core.history import MessageHistory
from repertory.core.messages import ModelMessage, Origin, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from repertory.core.state import ApprovalRecord, PendingCall, RunState, SuspendKind
from repertory.core.tree import TurnRecord
from repertory.http.convert import lineage

__all__ = [
    "accepted_input",
    "ApprovalView",
    "CallView",
    "ItemKind",
    "MessageView",
    "ResultView",
    "conversation",
    "origin_label",
    "pretty",
]

ItemKind = Literal["user", "assistant", "system", "notification", "tool"]


def pretty(value: Any) -> str:
    """JSON for people: indented, non-ASCII kept, anything unusual as its string."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str, sort_keys=True)


def origin_label(origin: Origin | None) -> str:
    """``user alice``, ``system``, ``session 4f2a…``: who a message came from."""
    if origin is None:
        return ""
    return origin.kind if origin.id is None else f"{origin.kind} {origin.id}"


def _decider(record: ApprovalRecord) -> str | None:
    """Who decided: the record's ``decided_by`` (``user:alice`` shown as ``user alice``).

    A record decided before the host stamped it names its decider only in the payload the UI and
    the HTTP API recorded (``{"principal": {...}}``), which is read then.
    """
    if record.decided_by is not None:
        return record.decided_by.replace(":", " ", 1)
    approval = record.approval
    if isinstance(approval, dict):
        who = approval.get("principal")
        if isinstance(who, dict):
            kind, ident = who.get("kind"), who.get("id")
            return f"{kind} {ident}" if ident else str(kind) if kind else None
    return None


@dataclass
class ApprovalView:
    """What happened to a call that needed approval."""

    state: Literal["waiting", "approved", "rejected", "cancelled"]
    requested_at: int
    decided_at: int | None = None
    by: str | None = None
    reason: str | None = None
    edited: bool = False
    ran_with: str | None = None  # the edited arguments the tool ran with

    @classmethod
    def of(cls, record: ApprovalRecord) -> ApprovalView:
        """The view of a durable approval record."""
        return cls(
            state="waiting" if record.decision is None else record.decision,
            requested_at=record.requested_at,
            decided_at=record.decided_at,
            by=_decider(record),
            reason=record.reason,
            edited=record.args_replaced,
            ran_with=pretty(record.args) if record.args_replaced else None,
        )


@dataclass
class ResultView:
    """A tool's result; ``is_error`` marks a failure (an exception, a rejection, an unknown outcome)."""

    tool_call_id: str
    tool_name: str
    text: str
    is_error: bool


@dataclass
class CallView:
    """One tool call: arguments, result, approval, and whether it still waits for a human."""

    tool_call_id: str
    tool_name: str
    args: str
    result: ResultView | None = None
    approval: ApprovalView | None = None
    waiting: SuspendKind | None = None


@dataclass
class MessageView:
    """One message as shown: its kind, origin, text, folded reasoning and tool calls."""

    entry_id: str
    revision_id: str
    kind: ItemKind
    origin: str
    created_at: int
    text: str
    title: str | None = None  # a notification's title (its first line)
    reasoning: list[str] = field(default_factory=list)
    calls: list[CallView] = field(default_factory=list)
    results: list[ResultView] = field(default_factory=list)  # results whose call is not shown
    model: str | None = None
    boundary: bool = False
    pending: bool = False  # a running turn's input, not yet in the history (``accepted_input``)

    @property
    def open(self) -> bool:
        """Whether this message may still change on the page: a call without its result, or waiting."""
        return self.pending or any(
            c.result is None or c.waiting is not None or (c.approval is not None and c.approval.state == "waiting")
            for c in self.calls
        )


def accepted_input(turn: TurnRecord) -> MessageView:
    """A running turn's input, shown before its run's first commit puts it in the history.

    A turn's input is durable in its turn row from ``send()`` on, and reaches the thread's history
    with the run's first checkpoint (one transaction fewer a turn); until then the page shows it
    from the row, and the live stream drops it when that checkpoint's messages arrive.
    """
    view = _view("", f"pending-{turn.submission_id}", turn.created_at, turn.message)
    view.pending = True
    return view


def _kind(message: ModelMessage) -> ItemKind:
    if message.role == "system" and message.origin is not None:
        return "notification"
    return message.role


def _result(part: ToolResultPart) -> ResultView:
    return ResultView(part.tool_call_id, part.tool_name, pretty(part.result), part.is_error)


def _view(revision_id: str, entry_id: str, created_at: int, message: ModelMessage) -> MessageView:
    kind = _kind(message)
    text = "".join(p.text for p in message.parts if isinstance(p, TextPart))
    title = None
    if kind == "notification":
        title, _, body = text.partition("\n\n")
        text = body
    return MessageView(
        entry_id=entry_id,
        revision_id=revision_id,
        kind=kind,
        origin=origin_label(message.origin),
        created_at=created_at,
        text=text,
        title=title,
        reasoning=[p.text for p in message.parts if isinstance(p, ReasoningPart)],
        calls=[
            CallView(p.tool_call_id, p.tool_name, pretty(p.args)) for p in message.parts if isinstance(p, ToolCallPart)
        ],
        model=getattr(message, "model", None),
        boundary=bool(getattr(message, "boundary", False)),
    )


def conversation(
    history: MessageHistory | None,
    runs: list[RunState],
    *,
    since_revision: str | None = None,
    after: str | None = None,
) -> list[MessageView]:
    """The messages of ``history``'s lineage (after ``since_revision`` or ``after``, if given), calls paired up.

    ``runs`` supply approval records and what the latest run still waits for. With
    ``since_revision`` (a live update: what one checkpoint added) results whose call came earlier
    stand alone. With ``after`` (the page holds every message up to that revision, settled) the
    results of calls up to it are left out, since the page shows them with their calls: the page
    replaces what it shows after that revision with this, and nothing before it is sent again.
    """
    if history is None:
        return []
    approvals = {a.tool_call_id: a for run in reversed(runs) for a in run.approvals}
    waiting: dict[str, PendingCall] = {}
    latest = runs[0] if runs else None
    if latest is not None and latest.status == "suspended":
        waiting = {p.tool_call_id: p for p in latest.pending}
    pairs = lineage(history)
    settled: set[str] = set()  # calls at or before ``after``: their results are on the page already
    cut = since_revision or after
    if cut is not None:
        ids = [rev.id for rev, _ in pairs]
        if cut in ids:
            at = ids.index(cut) + 1
            if after is not None:
                settled = {p.tool_call_id for _, entry in pairs[:at] for p in entry.message.tool_calls}
            pairs = pairs[at:]
    views: list[MessageView] = []
    calls: dict[str, CallView] = {}
    for rev, entry in pairs:
        view = _view(rev.id, entry.id, entry.created_at, entry.message)
        for call in view.calls:
            record = approvals.get(call.tool_call_id)
            call.approval = ApprovalView.of(record) if record is not None else None
            pending = waiting.get(call.tool_call_id)
            call.waiting = pending.kind if pending is not None else None
            calls[call.tool_call_id] = call
        for part in entry.message.tool_results:
            owner = calls.get(part.tool_call_id)
            if owner is not None:
                owner.result = _result(part)
            elif part.tool_call_id not in settled:
                view.results.append(_result(part))
        if view.kind == "tool" and not view.results and not view.text:
            continue  # every result is shown with its call
        views.append(view)
    return views
