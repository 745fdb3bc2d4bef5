"""AG-UI's answers to interrupts (``RunAgentInput.resume``, and tool messages for tools the client runs) as decisions.

An interrupt's id is the id of the tool call it holds. For an approval, ``status: "resolved"`` with
``payload: {"approved": true}`` approves (``"args": {...}`` replaces the arguments, validated by the
tool before anything is decided), ``{"approved": false, "reason": "..."}`` rejects, and
``status: "cancelled"`` rejects too. For a suspension (``suspend()``, or a durable timer woken
early) the payload is the value; ``cancelled`` ends the waiting turn. A tool message of the input
answers the call of a tool the client runs, its content being the value.

The decisions are the ones ``repertory.http.hitl`` applies for LangGraph's ``command.resume``:
each spends the run's single-use token for its call, in the order the run waits for them, so an
interrupt is decided exactly once; an answer to an interrupt that is not pending (a second resume
of it) is refused with 409 before anything is decided.
"""

from __future__ import annotations

from dataclasses import dataclass

from ag_ui.core import ResumeEntry
from pydantic import JsonValue

from repertory.core.state import PendingCall
from repertory.errors import ToolError
from repertory.http.errors import HttpError
from repertory.http.hitl import Decision
from repertory.runtime import Agent

__all__ = ["Answers", "decisions_for"]


@dataclass(frozen=True)
class Answers:
    """What an input answers: resume entries by interrupt id, and tool results by call id."""

    resume: dict[str, tuple[int, ResumeEntry]]
    tools: dict[str, JsonValue]

    def __bool__(self) -> bool:
        return bool(self.resume or self.tools)


def _bad(where: str, message: str) -> HttpError:
    return HttpError(f"{where}: {message}", status=422)


def _approval(
    call: PendingCall, entry: ResumeEntry, where: str, agent: Agent | None, by: dict[str, JsonValue]
) -> Decision:
    if entry.status == "cancelled":
        return Decision("reject", call.tool_call_id, reason=f"the user cancelled the call of {call.tool_name!r}")
    payload = entry.payload
    if not isinstance(payload, dict) or not isinstance(payload.get("approved"), bool):
        raise _bad(f"{where}.payload", 'an approval is answered with {"approved": true | false}')
    if not payload["approved"]:
        reason = payload.get("reason")
        text = reason if isinstance(reason, str) and reason else f"User rejected the tool call for `{call.tool_name}`"
        return Decision("reject", call.tool_call_id, reason=text)
    args = payload.get("args")
    if args is not None:
        if not isinstance(args, dict):
            raise _bad(f"{where}.payload.args", "the replacing arguments must be an object")
        tool = agent.tools.get(call.tool_name) if agent is not None else None
        if tool is not None:
            try:
                tool.validate(args)
            except ToolError as exc:
                raise _bad(f"{where}.payload.args", f"they do not validate for {call.tool_name!r}: {exc}") from None
    approval: dict[str, JsonValue] = {"type": "approve" if args is None else "edit", "principal": by, "via": "ag-ui"}
    return Decision("approve", call.tool_call_id, approval=approval, args=args)


def decisions_for(
    pending: list[PendingCall], answers: Answers, agent: Agent | None, by: dict[str, JsonValue]
) -> tuple[list[Decision], bool]:
    """The decisions ``answers`` make for a run's ``pending`` calls, and whether a cancelled suspension ends the turn.

    Refused (before anything is decided): an answer to a call the run does not wait for (409), an
    answer that skips a call waited for before it (the run decides them in order), a bad payload (422).
    """
    waiting = {p.tool_call_id for p in pending}
    for ident, (i, _) in answers.resume.items():
        if ident not in waiting:
            raise HttpError(
                f"resume[{i}].interruptId: interrupt {ident!r} is not pending on this thread "
                "(it was already answered, or never asked)",
                status=409,
            )
    for ident in answers.tools:
        if ident not in waiting:
            raise HttpError(
                f"messages: the tool message for call {ident!r} answers no call this thread waits for "
                "(it was already answered, or is not a tool the client runs)",
                status=409,
            )
    decisions: list[Decision] = []
    skipped: str | None = None
    for call in pending:
        entry = answers.resume.get(call.tool_call_id)
        answered = entry is not None or call.tool_call_id in answers.tools
        if not answered:
            skipped = skipped or call.tool_call_id
            continue
        if skipped is not None:
            raise _bad("resume", f"interrupt {skipped!r} comes first: the run decides its interrupts in order")
        if entry is None:
            if call.kind == "approval":
                raise _bad("messages", f"call {call.tool_call_id!r} waits for an approval, answered through resume")
            decisions.append(Decision("resume", call.tool_call_id, value=answers.tools[call.tool_call_id]))
            continue
        i, resume = entry
        where = f"resume[{i}]"
        if call.kind == "approval":
            decisions.append(_approval(call, resume, where, agent, by))
        elif resume.status == "cancelled":
            return decisions, True
        else:
            decisions.append(Decision("resume", call.tool_call_id, value=resume.payload))
    return decisions, False
