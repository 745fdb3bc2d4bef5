"""A turn as an MCP tool call sees it: started through the session tree, read back as an outcome.

An agent's tool call is one turn of one session: a new session owned by the caller, or the one
``session_id`` names (which the caller must own, and which must be that agent's). ``start_turn``
queues it and returns once it is durable (``SessionHandle.send``); ``turn_outcome`` reads where it
stands, waiting until it rests when asked: still running, waiting for a human (the elicitations
that answer it, ``repertory.http.mcp_input``), done with its final text, cancelled, or failed. The
synchronous ``tools/call`` and the tasks extension's ``tasks/get`` both read a turn through it, so
a task and a call say the same thing about the same turn.

A turn whose model delegated (``agent_tool``) waits for its child; when the child waits for a
human, so does the turn: its ``needs_input`` asks the child's questions, and ``asks`` names the
child's session and run, where the answers go.

A wait is only a wait: a caller that goes away (a dropped connection cancels the handler) leaves
the turn running, durable, readable as the session's resource and answerable later.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Literal

import mcp_types as t
from pydantic import BaseModel, ConfigDict, Field

from repertory.core.result import reply_text
from repertory.core.state import RunState
from repertory.core.tree import SessionEvent, SessionRecord, TurnRecord
from repertory.errors import RepertoryError
from repertory.http.auth import Caller
from repertory.http.errors import HttpError
from repertory.http.gateway import Gateway
from repertory.http.mcp_input import input_requests
from repertory.http.views import nested_wait, until_rest

__all__ = [
    "AgentCall",
    "McpCallError",
    "StartedTurn",
    "TurnOutcome",
    "TurnState",
    "own_session",
    "send",
    "start_turn",
    "tool_result",
    "turn_outcome",
]

TurnState = Literal["running", "needs_input", "done", "cancelled", "error"]
"""Where a turn stands for MCP: still working, waiting for an answer, or at one of its three ends."""


class AgentCall(BaseModel):
    """The arguments of an agent's tool: the task to hand it, and the session to continue (a new one when absent)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    task: str = Field(min_length=1, description="What to ask the agent: one message, one turn.")
    session_id: str | None = Field(
        default=None,
        description="Continue this session (one of yours, of this agent); a new session when absent.",
    )


class McpCallError(RepertoryError):
    """A call the MCP server refuses with an error *result* (the model reads it), not a protocol error."""


@dataclass(frozen=True)
class StartedTurn:
    """A queued, durable turn: the session it runs in and its submission id (a task's id)."""

    session_id: str
    submission_id: str


@dataclass(frozen=True)
class TurnOutcome:
    """What a turn is at the moment it was read.

    ``result`` is the tool result for the three ends (an error result for ``cancelled`` and
    ``error``); ``input_requests`` are the elicitations that answer a ``needs_input`` turn, keyed
    as ``repertory.http.mcp_input`` keys them, and ``asks`` the ``(session_id, run_id)`` whose
    questions they are: the turn's own, or a delegated descendant's. ``turn`` is the stored row
    it was read from.
    """

    state: TurnState
    session_id: str
    submission_id: str
    run_id: str
    result: t.CallToolResult | None = None
    input_requests: dict[str, t.ElicitRequest] = field(default_factory=dict)
    turn: TurnRecord | None = None
    asks: tuple[str, str] | None = None

    def request_state(self) -> str:
        """The MRTR ``requestState`` plaintext naming this turn (the SDK seals it before it leaves)."""
        return json.dumps({"session": self.session_id, "submission": self.submission_id})


def tool_result(session_id: str, text: str, *, is_error: bool = False) -> t.CallToolResult:
    """A tool result carrying ``text`` as content and ``{"session_id", "text"}`` as structured content."""
    return t.CallToolResult(
        content=[t.TextContent(type="text", text=text)],
        structured_content={"session_id": session_id, "text": text},
        is_error=is_error,
    )


async def start_turn(gw: Gateway, caller: Caller, agent: str, args: AgentCall) -> StartedTurn:
    """Queue ``args.task`` as a turn of ``agent``: in a new session the caller owns, or in ``args.session_id``.

    ``McpCallError`` when the session is not one the caller may see (the same sentence as one
    that does not exist) or belongs to another agent.
    """
    if args.session_id is None:
        record = await gw.create_thread(caller, thread_id=None, metadata=None, if_exists=None, agent=agent)
    else:
        record = await own_session(gw, caller, args.session_id)
        if record.agent != agent:
            raise McpCallError(
                f"session {args.session_id!r} is a session of {record.agent!r}, not {agent!r}; "
                f"call {record.agent!r} (or session_send) to continue it"
            )
    return await send(gw, caller, record.session_id, args.task)


async def send(gw: Gateway, caller: Caller, session_id: str, text: str) -> StartedTurn:
    """Queue ``text`` as a turn of a session the caller was already checked to see; returns once it is durable."""
    handle = await gw.runtime.session(session_id, caller.principal)
    turn = await handle.send(text)
    return StartedTurn(session_id, turn.submission_id)


async def own_session(gw: Gateway, caller: Caller, session_id: str) -> SessionRecord:
    """The caller's session ``session_id``; ``McpCallError``, one sentence, when it is missing or another owner's."""
    try:
        return await gw.record(session_id, caller)
    except HttpError:
        raise McpCallError(f"no session {session_id!r}") from None


async def turn_outcome(
    gw: Gateway, caller: Caller, session_id: str, submission_id: str, *, wait: bool, checked: bool = False
) -> TurnOutcome:
    """Where the turn stands; with ``wait``, once it rests (done, failed, cancelled, or waiting for a human).

    A turn asleep on a durable timer is ``running`` (nothing a human answers); with ``wait`` the
    read goes on until the timer has fired and the turn rests again. ``McpCallError`` when the
    caller may not see the session or the turn is not one of its (``checked``: the caller just
    was, a read saved on every call).
    """
    if not checked:
        await own_session(gw, caller, session_id)
    handle = await gw.runtime.session(session_id, caller.principal)
    turn_handle = handle.get_turn(submission_id)
    while True:
        if wait:
            await until_rest(gw.store, session_id, turn_handle.wait())
        turn = await gw.store.load_turn(submission_id)
        if turn is None or turn.session_id != session_id:
            raise McpCallError(f"no turn {submission_id!r} in session {session_id!r}")
        run = await gw.store.load_run(turn.run_id)
        outcome = _outcome(gw, turn, run)
        if outcome.state == "running" and turn.status == "running":
            outcome = await _delegated_wait(gw, outcome)
        if not wait or outcome.state != "running":
            return outcome
        # Resting but running (asleep on a timer): wait for its next event. The mark comes before a
        # second read, so a change between the two reads is either seen there or an event after it.
        mark = await gw.store.last_event_seq(session_id)
        again = await gw.store.load_turn(submission_id)
        if again is not None and (again.status, again.updated_at) == (turn.status, turn.updated_at):
            await _next_event(handle.events(mark), submission_id)


async def _delegated_wait(gw: Gateway, outcome: TurnOutcome) -> TurnOutcome:
    """A running turn whose delegated descendant waits for a human: ``needs_input`` with that child's questions."""
    nested = await nested_wait(gw.store, outcome.session_id)
    if nested is None:
        return outcome
    run, child = nested
    requests = input_requests(run, gw.agents.get(child.agent or run.agent or ""))
    if not requests:
        return outcome
    return replace(outcome, state="needs_input", input_requests=requests, asks=(child.session_id, run.run_id))


def _outcome(gw: Gateway, turn: TurnRecord, run: RunState | None) -> TurnOutcome:
    """The outcome of a stored turn and its run (``None`` while the run has not started)."""
    ids = (turn.session_id, turn.submission_id, turn.run_id)
    if turn.status == "done":
        text = (reply_text(run) if run is not None else None) or ""
        return TurnOutcome("done", *ids, result=tool_result(turn.session_id, text), turn=turn)
    if turn.status == "cancelled":
        text = f"the turn was cancelled (session {turn.session_id})"
        return TurnOutcome("cancelled", *ids, result=tool_result(turn.session_id, text, is_error=True), turn=turn)
    if turn.status == "error":
        why = turn.error.message if turn.error is not None else "unknown error"
        text = f"the turn failed: {why}"
        return TurnOutcome("error", *ids, result=tool_result(turn.session_id, text, is_error=True), turn=turn)
    if turn.status == "suspended" and run is not None and run.status == "suspended":
        requests = input_requests(run, gw.agents.get(run.agent or ""))
        if requests:
            return TurnOutcome(
                "needs_input", *ids, input_requests=requests, turn=turn, asks=(turn.session_id, turn.run_id)
            )
    return TurnOutcome("running", *ids, turn=turn)


async def _next_event(events: AsyncIterator[SessionEvent], submission_id: str) -> None:
    """Return at the turn's next event (a timer woke it, it went on, it ended), closing the stream."""
    try:
        async for event in events:
            if event.submission_id == submission_id:
                return
    finally:
        if isinstance(events, AsyncGenerator):
            await events.aclose()
