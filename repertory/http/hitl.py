"""Human in the loop over HTTP: a ``command.resume`` becomes approve, reject or resume calls.

A suspended run waits for one of two things. A tool that called ``suspend()`` gets the resume
value as it is. Approvals are answered the way langchain's ``HumanInTheLoopMiddleware`` (and so
agent-chat-ui) answers them, ``{"decisions": [{"type": "approve" | "edit" | "reject", ...}]}``,
one decision per pending approval of the step, in order; ``edit`` is an approval whose
``edited_action.args`` replace the call's arguments (the engine validates and runs the tool with
them). The older agent-inbox list (``[{"type": "accept" | "edit" | "response" | "ignore",
"args": ...}]``) is understood too. Every edit is validated before the first decision is applied,
so a bad edit leaves the run exactly as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import JsonValue

from repertory.core.result import RunResult
from repertory.core.state import PendingCall, RunState
from repertory.core.store import TreeStore
from repertory.errors import ToolError
from repertory.http.errors import HttpError
from repertory.runtime import Agent
from repertory.tree.handle import SessionHandle

__all__ = ["Decision", "apply_decisions", "parse_resume"]

DecisionKind = Literal["approve", "reject", "resume"]


@dataclass(frozen=True)
class Decision:
    """One answer to one pending call, bound to that call's id."""

    kind: DecisionKind
    tool_call_id: str | None
    approval: JsonValue = None
    args: dict[str, Any] | None = None
    reason: str = "not approved"
    value: JsonValue = None


def _bad(message: str) -> HttpError:
    return HttpError(message, status=422)


def _items(resume: JsonValue) -> list[dict[str, Any]]:
    if isinstance(resume, dict) and "decisions" in resume:
        items = resume["decisions"]
    elif isinstance(resume, dict) and "type" in resume:
        items = [resume]
    else:
        items = resume
    if not isinstance(items, list) or not items or not all(isinstance(i, dict) for i in items):
        raise _bad('an approval is resumed with {"decisions": [{"type": "approve" | "edit" | "reject", ...}]}')
    return [i for i in items if isinstance(i, dict)]


def _edited_args(item: dict[str, Any], call: PendingCall) -> dict[str, Any]:
    if item.get("type") == "edit" and "edited_action" in item:
        action = item["edited_action"]
    else:  # the agent-inbox spelling: {"type": "edit", "args": {"action": name, "args": {...}}}
        action = item.get("args")
    if not isinstance(action, dict):
        raise _bad("an edit decision needs edited_action: {'name': ..., 'args': {...}}")
    name = action.get("name", action.get("action", call.tool_name))
    if name != call.tool_name:
        raise _bad(f"an edit may change the arguments of {call.tool_name!r}, not call another tool ({name!r})")
    args = action.get("args", action.get("arguments"))
    if not isinstance(args, dict):
        raise _bad("edited_action.args must be an object of arguments")
    return args


def _decision(item: dict[str, Any], call: PendingCall, agent: Agent, by: dict[str, Any]) -> Decision:
    kind = item.get("type")
    approval = {"type": kind, "principal": by}
    if kind in ("approve", "accept"):
        return Decision("approve", call.tool_call_id, approval=approval)
    if kind == "edit":
        args = _edited_args(item, call)
        tool = agent.tools.get(call.tool_name)
        if tool is not None:
            try:
                tool.validate(args)
            except ToolError as exc:
                raise _bad(f"edited arguments for {call.tool_name!r} do not validate: {exc}") from None
        return Decision("approve", call.tool_call_id, approval=approval, args=args)
    if kind in ("reject", "response", "ignore"):
        message = item.get("message", item.get("args"))
        reason = (
            message
            if isinstance(message, str) and message
            else (f"User rejected the tool call for `{call.tool_name}` with id {call.tool_call_id}")
        )
        return Decision("reject", call.tool_call_id, reason=reason)
    raise _bad(f"unknown decision type {kind!r} (approve, edit or reject)")


def parse_resume(resume: JsonValue, run: RunState, agent: Agent, by: dict[str, Any]) -> list[Decision]:
    """The decisions a resume value makes for the run's pending calls; 422 if it does not fit them."""
    on = run.suspended_on
    if run.status != "suspended" or on is None:
        raise HttpError("the thread has no interrupt waiting for command.resume", status=409)
    if on.kind in ("suspend", "timer"):  # a timer's token: a resume wakes it early
        return [Decision("resume", on.tool_call_id, value=resume)]
    calls = [p for p in run.pending if p.kind == "approval"]
    items = _items(resume)
    if len(items) > len(calls):
        raise _bad(f"{len(items)} decisions for {len(calls)} pending approval(s)")
    return [_decision(item, call, agent, by) for item, call in zip(items, calls, strict=False)]


async def apply_decisions(handle: SessionHandle, store: TreeStore, run_id: str, decisions: list[Decision]) -> RunResult:
    """Apply decisions in order, each with the run's live token; returns the last result.

    The token is read from the store for each decision (the server holds the store, so it may see
    tokens; clients never do). A decision whose call is no longer the live one means another
    request decided it first: 409.
    """
    result: RunResult | None = None
    for decision in decisions:
        run = await store.load_run(run_id)
        on = run.suspended_on if run is not None else None
        if run is None or run.status != "suspended" or on is None or on.tool_call_id != decision.tool_call_id:
            if result is not None:
                return result  # the run moved on (it ended or failed) before every decision was needed
            raise HttpError("the interrupt was already answered", status=409)
        if decision.kind == "approve":
            result = await handle.approve(on.token, decision.approval, decision.args)
        elif decision.kind == "reject":
            result = await handle.reject(on.token, decision.reason)
        else:
            result = await handle.resume(on.token, decision.value)
    assert result is not None
    return result
