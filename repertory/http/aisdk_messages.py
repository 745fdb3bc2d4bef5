"""What ``useChat`` sends (its ``DefaultChatTransport`` body) and the stored conversation as its ``UIMessage`` list.

The transport POSTs ``{"id", "messages", "trigger", "messageId", ...}`` with every message of the
chat; the server keeps the conversation, so only the last message counts: a user message is the
turn's input (text parts only), an assistant message carries the answers to the run's open
questions: tool parts in state ``approval-responded`` (``approval: {"id", "approved", "reason"}``,
what ``addToolApprovalResponse`` leaves) and, for a ``suspend()`` waiting for a value, the call's
part in state ``output-available`` (what ``addToolOutput`` leaves). ``ChatAnswers`` reads them;
``approval_decisions`` turns them into the decisions ``repertory.http.hitl`` applies, one per
waiting approval in the order the run asks them, each through the run's single-use token.

``ui_messages`` is the stored conversation as ``useChat``'s initial messages: a user message per
human message (id: its history entry), and one assistant message per turn's response, whose id is
the turn's run id, the id every stream of that turn gives its message (``aisdk_parts``), so a
resumed stream replaces that message instead of adding a second one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from repertory.core.history import HistoryEntry, HistoryRevision, MessageHistory
from repertory.core.messages import ModelMessage, ReasoningPart
from repertory.core.state import RunState
from repertory.core.store import TreeStore
from repertory.http.convert import lineage, result_text
from repertory.http.errors import HttpError
from repertory.http.gateway import NEW_THREAD_ID

__all__ = ["ChatAnswers", "ChatRequest", "UIMessageIn", "approval_decisions", "ui_messages", "user_text"]

Dict = dict[str, Any]


class UIMessageIn(BaseModel):
    """One ``UIMessage`` of the request: only the fields the server reads are checked."""

    model_config = ConfigDict(extra="ignore")
    id: str = Field(default="", max_length=256)
    role: Literal["system", "user", "assistant"]
    parts: list[dict[str, JsonValue]] = Field(default_factory=list, max_length=10_000)


class ChatRequest(BaseModel):
    """``DefaultChatTransport``'s request body; ``id`` is the session id (made on first use)."""

    model_config = ConfigDict(extra="ignore")
    id: str = Field(pattern=f"^{NEW_THREAD_ID.pattern}$", description="the chat's id: the repertory session id")
    messages: list[UIMessageIn] = Field(min_length=1, max_length=100_000)
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    messageId: str | None = Field(default=None, max_length=256)


def user_text(request: ChatRequest) -> str:
    """The text of the last message, a user message of text parts; 422 naming the part that is not."""
    at = len(request.messages) - 1
    message = request.messages[at]
    texts: list[str] = []
    for i, part in enumerate(message.parts):
        kind = part.get("type")
        text = part.get("text")
        if kind == "text" and isinstance(text, str):
            texts.append(text)
        elif kind != "step-start" and not (isinstance(kind, str) and kind.startswith("data-")):
            raise HttpError(f"messages.{at}.parts.{i}: repertory takes text parts only, not {kind!r}", status=422)
    text = "".join(texts)
    if not text.strip():
        raise HttpError(f"messages.{at}.parts: the message has no text", status=422)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise HttpError(f"messages.{at}.parts: the text is not valid Unicode", status=422) from None
    return text


@dataclass(frozen=True)
class ChatAnswers:
    """What the last (assistant) message answers: approvals by approval id, and tool outputs by call id."""

    approvals: dict[str, tuple[bool, str | None]] = field(default_factory=dict)
    outputs: dict[str, JsonValue] = field(default_factory=dict)

    @classmethod
    def of(cls, request: ChatRequest) -> ChatAnswers:
        """Read the answers; 422 naming the part when one is malformed."""
        at = len(request.messages) - 1
        approvals: dict[str, tuple[bool, str | None]] = {}
        outputs: dict[str, JsonValue] = {}
        for i, part in enumerate(request.messages[at].parts):
            kind, state = part.get("type"), part.get("state")
            if not isinstance(kind, str) or not (kind.startswith("tool-") or kind == "dynamic-tool"):
                continue
            where = f"messages.{at}.parts.{i}"
            if state == "approval-responded":
                approval = part.get("approval")
                if not isinstance(approval, dict) or not isinstance(approval.get("id"), str):
                    raise HttpError(f"{where}.approval: an answered approval needs its id", status=422)
                approved = approval.get("approved")
                if not isinstance(approved, bool):
                    raise HttpError(f"{where}.approval.approved: true or false", status=422)
                reason = approval.get("reason")
                approvals[str(approval["id"])] = (approved, reason if isinstance(reason, str) and reason else None)
            elif state == "output-available" and isinstance(part.get("toolCallId"), str):
                outputs[str(part["toolCallId"])] = part.get("output")
        return cls(approvals, outputs)


def approval_decisions(answers: ChatAnswers, run: RunState) -> list[Dict]:
    """The ``{"type": "approve" | "reject"}`` decisions for the run's waiting approvals, in the order it asks them.

    An answer to an approval that does not wait (decided already, by this client or another) is
    409 and nothing is applied: every approval is decided exactly once. Answers may cover the
    first approvals only; the run then asks the rest again.
    """
    waiting = [p.tool_call_id for p in run.pending if p.kind == "approval"]
    stale = sorted(set(answers.approvals) - set(waiting))
    if stale:
        raise HttpError(f"approval {stale[0]!r} is not waiting for an answer (it was already answered)", status=409)
    decisions: list[Dict] = []
    for call_id in waiting:
        if call_id not in answers.approvals:
            break
        approved, reason = answers.approvals[call_id]
        decisions.append({"type": "approve"} if approved else {"type": "reject", "message": reason or ""})
    if not decisions:
        first = waiting[0] if waiting else None
        raise HttpError(f"the chat waits for approval {first!r} first; answer it", status=409)
    return decisions


# -- the stored conversation ----------------------------------------------------------------------


async def ui_messages(store: TreeStore, session_id: str, history: MessageHistory | None) -> list[Dict]:
    """The conversation at the head as ``UIMessage`` dicts (see the module docstring)."""
    if history is None:
        return []
    runs: dict[str, RunState] = {}  # a run's last revision -> the run
    for turn in await store.list_turns(session_id):
        run = await store.load_run(turn.run_id)
        if run is not None and run.history_revision_id is not None:
            runs[run.history_revision_id] = run
    out: list[Dict] = []
    group: list[tuple[HistoryRevision, HistoryEntry]] = []
    asked: list[tuple[HistoryRevision, HistoryEntry]] = []  # the group's human message, if any

    def flush() -> None:
        if not group and not asked:
            return
        found = [runs[r.id] for r, _ in (*asked, *group) if r.id in runs]
        run = found[-1] if found else None
        if group:
            ident = run.run_id if run is not None else group[0][1].id
            out.append({"id": ident, "role": "assistant", "parts": _assistant_parts(group, run)})

    for rev, entry in lineage(history):
        message = entry.message
        if message.role == "user" and not message.boundary:
            flush()
            group, asked = [], [(rev, entry)]
            out.append({"id": entry.id, "role": "user", "parts": [{"type": "text", "text": message.text}]})
        elif message.role in ("assistant", "tool"):
            group.append((rev, entry))
    flush()
    return out


def _assistant_parts(group: list[tuple[HistoryRevision, HistoryEntry]], run: RunState | None) -> list[Dict]:
    """One response's parts: a step per assistant message, its calls with their results and approvals."""
    decided = {a.tool_call_id: a for a in (run.approvals if run is not None else []) if a.decision is not None}
    pending = run.pending if run is not None and run.status == "suspended" else []
    waiting = {p.tool_call_id: p.kind for p in pending}
    results = {r.tool_call_id: r for _, e in group for r in e.message.tool_results}
    parts: list[Dict] = []
    for _, entry in group:
        message: ModelMessage = entry.message
        if message.role != "assistant":
            continue
        parts.append({"type": "step-start"})
        reasoning = "".join(p.text for p in message.parts if isinstance(p, ReasoningPart) and not p.redacted)
        if reasoning:
            parts.append({"type": "reasoning", "text": reasoning, "state": "done"})
        if message.text:
            parts.append({"type": "text", "text": message.text, "state": "done"})
        for call in message.tool_calls:
            part: Dict = {"type": f"tool-{call.tool_name}", "toolCallId": call.tool_call_id, "input": call.args}
            record = decided.get(call.tool_call_id)
            if record is not None:
                approval: Dict = {"id": call.tool_call_id, "approved": record.decision == "approved"}
                if record.reason:
                    approval["reason"] = record.reason
                part["approval"] = approval
            result = results.get(call.tool_call_id)
            kind = waiting.get(call.tool_call_id)
            if kind == "approval":
                part.update(state="approval-requested", approval={"id": call.tool_call_id})
            elif result is None or kind is not None:  # a waiting suspend()'s stored result is a placeholder
                part["state"] = "input-available"
            elif record is not None and record.decision != "approved":
                part["state"] = "output-denied"
            elif result.is_error:
                part.update(state="output-error", errorText=result_text(result.result))
            else:
                part.update(state="output-available", output=result.result)
            parts.append(part)
    return parts
