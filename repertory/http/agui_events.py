"""One turn's session events as AG-UI events (``ag-ui-protocol``'s own models).

- ``text.delta`` and ``reasoning.delta``: ``TEXT_MESSAGE_START/CONTENT/END`` under the delta's
  ``message_id`` (the id the finished message has in the history), and ``REASONING_START``,
  ``REASONING_MESSAGE_START/CONTENT/END``, ``REASONING_END`` under ``<message_id>.reasoning``.
- ``tool.call``: ``TOOL_CALL_START/ARGS/END`` at once (the client sees a call while its tool
  runs); a call of a delegating tool (``agent_tool``) also opens ``SUBAGENT_STARTED``, whose
  ``subagentRunId`` is the child session's id.
- ``checkpoint`` (of this turn's run): what the commit added, from the history graph alone: the
  rest of a message whose text was not (all) streamed, calls not announced yet, and one
  ``TOOL_CALL_RESULT`` per result (a delegated call's result closes its subagent with
  ``SUBAGENT_FINISHED`` or ``SUBAGENT_ERROR``). A model request is a step: ``STEP_STARTED``
  with its first output, ``STEP_FINISHED`` at the checkpoint that answers its calls (or rests).
- ``reply.retracted``: the partial reply will never be completed; its message is closed and a
  ``MESSAGES_SNAPSHOT`` of the stored conversation replaces what the client holds, so no client
  keeps text the history lacks.
- ``approval.requested``, ``approval.decided``, ``guardrail.tripped``, ``context.compacted``,
  ``notification``: ``CUSTOM`` events named ``repertory.<type>`` with the event's data.

The turn's end (``ending``) closes whatever is open, sends a ``MESSAGES_SNAPSHOT`` of the stored
conversation (so the client holds the thread's own ids, and the next input's new part is exact),
then ``RUN_FINISHED``: success (with ``pendingToolCallIds`` for calls of tools the client runs),
``cancelled``, or ``interrupt`` with one ``Interrupt`` per pending approval or suspension, of this
run or of a delegated child waiting for a human (its ``subagentRunId`` set); or ``RUN_ERROR``.
An interrupt's id is the id of the tool call it holds; resume tokens never leave the server.

Every event is derived from the durable log and the immutable history, so a replay yields the
events the live stream had; ``reopen`` gives the openers a client that reconnects mid-message
needs before the rest (``TEXT_MESSAGE_START`` of a message it has part of: the client appends).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    Message,
    MessagesSnapshotEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuccessOutcome,
    SubagentFinishedSuspendedOutcome,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from repertory.core.history import MessageHistory
from repertory.core.messages import ModelMessage, ReasoningPart
from repertory.core.state import PendingCall
from repertory.core.store import TreeStore
from repertory.core.tree import SessionEvent
from repertory.http.agui_messages import agui_messages, reasoning_id, tool_message_ids
from repertory.http.convert import result_text
from repertory.http.views import nested_wait
from repertory.runtime import Agent

__all__ = ["CUSTOM_EVENTS", "AguiTranslator", "Ending", "interrupts_of"]

CUSTOM_EVENTS = frozenset(
    {"approval.requested", "approval.decided", "guardrail.tripped", "context.compacted", "notification"}
)
"""Session events a UI may want that AG-UI has no event for: sent as ``CUSTOM`` ``repertory.<type>``."""


def _approval_schema(call: PendingCall, agent: Agent | None) -> dict[str, Any]:
    """The JSON schema of a resume payload answering an approval (``RunAgentInput.resume[].payload``)."""
    tool = agent.tools.get(call.tool_name) if agent is not None else None
    args: dict[str, Any] = tool.spec().parameters if tool is not None else {"type": "object"}
    return {
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "args": {**args, "description": "replaces the call's arguments (approved only)"},
            "reason": {"type": "string", "description": "why it was rejected, for the model to read"},
        },
        "required": ["approved"],
    }


def interrupts_of(
    pending: list[PendingCall], agent: Agent | None, client_tools: frozenset[str], subagent: str | None = None
) -> tuple[list[Interrupt], list[str]]:
    """One ``Interrupt`` per pending approval or suspension, and the pending calls of tools the client runs."""
    interrupts: list[Interrupt] = []
    client_calls: list[str] = []
    for call in pending:
        if call.kind == "suspend" and call.tool_name in client_tools and subagent is None:
            client_calls.append(call.tool_call_id)
            continue
        meta: dict[str, Any] = {"tool_name": call.tool_name, "args": call.args}
        if call.kind == "approval":
            interrupts.append(
                Interrupt(
                    id=call.tool_call_id,
                    reason="tool_approval",
                    message=call.reason or f"tool {call.tool_name!r} requires approval",
                    tool_call_id=call.tool_call_id,
                    response_schema=_approval_schema(call, agent),
                    metadata=meta,
                    subagent_run_id=subagent,
                )
            )
            continue
        if call.payload is not None:
            meta["payload"] = call.payload
        interrupts.append(
            Interrupt(
                id=call.tool_call_id,
                reason=call.kind if call.kind == "timer" else (call.reason or "input"),
                message=call.reason,
                metadata=meta,
                subagent_run_id=subagent,
            )
        )
    return interrupts, client_calls


@dataclass(frozen=True)
class Ending:
    """How the turn rests, as the route read it: the turn's status and, for a failure outside the log, the error."""

    status: str
    error_type: str | None = None
    error_message: str | None = None


class AguiTranslator:
    """Turns one turn's session events into AG-UI events; keeps what is open so it can close or reopen it."""

    def __init__(
        self,
        store: TreeStore,
        agents: Mapping[str, Agent],
        agent: Agent | None,
        *,
        thread_id: str,
        run_id: str,
        client_tools: frozenset[str],
        client_messages: Sequence[Message] = (),
        steps_done: int = 0,
    ) -> None:
        self.store = store
        self.agents = agents
        self.agent = agent
        self.thread_id = thread_id
        self.run_id = run_id
        self.client_tools = client_tools
        self.client_messages = client_messages
        self.revision: str | None = None  # the last checkpoint's revision this stream saw
        self._steps_done = steps_done
        self._step: str | None = None
        self._step_calls: set[str] = set()
        self._text: str | None = None
        self._reasoning: str | None = None
        self._sent: dict[str, str] = {}  # message id (text or reasoning) -> what the client has
        self._message: str | None = None  # the message id this step's deltas named
        self._calls: set[str] = set()
        self._answered: set[str] = set()
        self._subagents: dict[str, str] = {}  # tool call id -> child session id, while open
        self._names: dict[str, str] = {}  # tool call id -> the child's agent
        self._client_calls: set[str] = set()  # calls of tools the client runs
        self._suspend: dict[str, Any] | None = None
        self._history: MessageHistory | None = None

    # -- openers and closers ------------------------------------------------------------------------

    def _open_step(self, index: int) -> list[BaseEvent]:
        if self._step is not None:
            return []
        self._step = f"step {index}"
        self._step_calls = set()
        return [StepStartedEvent(step_name=self._step)]

    def _close_step(self) -> list[BaseEvent]:
        if self._step is None:
            return []
        name, self._step = self._step, None
        return [StepFinishedEvent(step_name=name)]

    def _close_text(self) -> list[BaseEvent]:
        if self._text is None:
            return []
        ident, self._text = self._text, None
        return [TextMessageEndEvent(message_id=ident)]

    def _close_reasoning(self) -> list[BaseEvent]:
        if self._reasoning is None:
            return []
        ident, self._reasoning = self._reasoning, None
        return [ReasoningMessageEndEvent(message_id=ident), ReasoningEndEvent(message_id=ident)]

    def _text_events(self, ident: str, text: str, *, keep_open: bool) -> list[BaseEvent]:
        """``text`` appended to text message ``ident`` (opened if needed), closed unless ``keep_open``."""
        out: list[BaseEvent] = []
        if self._text != ident:
            out += self._close_text() + self._close_reasoning()
            out.append(TextMessageStartEvent(message_id=ident, role="assistant"))
            self._text = ident
        if text:
            out.append(TextMessageContentEvent(message_id=ident, delta=text))
            self._sent[ident] = self._sent.get(ident, "") + text
        if not keep_open:
            out += self._close_text()
        return out

    def _reasoning_events(self, ident: str, text: str, *, keep_open: bool) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if self._reasoning != ident:
            out += self._close_text() + self._close_reasoning()
            out += [ReasoningStartEvent(message_id=ident), ReasoningMessageStartEvent(message_id=ident)]
            self._reasoning = ident
        if text:
            out.append(ReasoningMessageContentEvent(message_id=ident, delta=text))
            self._sent[ident] = self._sent.get(ident, "") + text
        if not keep_open:
            out += self._close_reasoning()
        return out

    def reopen(self) -> list[BaseEvent]:
        """The openers of what is open now: what a client reconnecting here needs before the events that follow."""
        out: list[BaseEvent] = []
        if self._step is not None:
            out.append(StepStartedEvent(step_name=self._step))
        for call_id, child in self._subagents.items():
            out.append(
                SubagentStartedEvent(subagent_run_id=child, name=self._child_name(call_id), parent_tool_call_id=call_id)
            )
        if self._reasoning is not None:
            out += [
                ReasoningStartEvent(message_id=self._reasoning),
                ReasoningMessageStartEvent(message_id=self._reasoning),
            ]
        if self._text is not None:
            out.append(TextMessageStartEvent(message_id=self._text, role="assistant"))
        return out

    def _close_all(self, suspended: dict[str, list[str]] | None = None) -> list[BaseEvent]:
        out = self._close_text() + self._close_reasoning() + self._close_step()
        for child in list(self._subagents.values()):
            if suspended is not None:
                ids = suspended.get(child)
                outcome: Any = SubagentFinishedSuspendedOutcome(interrupt_ids=ids or None)
            else:
                outcome = SubagentFinishedSuccessOutcome()
            out.append(SubagentFinishedEvent(subagent_run_id=child, outcome=outcome))
        self._subagents.clear()
        return out

    # -- helpers ------------------------------------------------------------------------------------

    def _child_name(self, call_id: str) -> str:
        return self._names.get(call_id, "subagent")

    def _delegating(self, tool_name: str) -> str | None:
        tool = self.agent.tools.get(tool_name) if self.agent is not None else None
        return None if tool is None else tool.delegates_to

    async def _load(self, revision: str) -> MessageHistory | None:
        if self._history is None or self._history.revision_id != revision:
            self._history = await self.store.load_history(revision)
        return self._history

    async def snapshot(self, revision: str | None) -> MessagesSnapshotEvent:
        """The conversation at ``revision`` (the thread's head when ``None``), under the ids the client knows."""
        if revision is None:
            thread = await self.store.load_thread(self.thread_id)
            revision = None if thread is None else thread.history_revision_id
        history = await self._load(revision) if revision is not None else None
        messages = agui_messages(history, self.client_messages)
        return MessagesSnapshotEvent(messages=messages)

    async def opening(self) -> MessagesSnapshotEvent:
        """For a client that holds nothing (a reload): the conversation up to the turn's own input, before its events.

        Without it, the turn's messages would come first and the input after them (a snapshot's
        messages that a client lacks go at the end).
        """
        run = await self.store.load_run(self.run_id)
        if run is None or run.history_revision_id is None or run.input_depth is None:
            return await self.snapshot(None)
        history = await self._load(run.history_revision_id)
        upto = next(
            (rev.id for rev in (history.lineage() if history else []) if rev.depth == run.input_depth + 1), None
        )
        return await self.snapshot(upto or run.history_revision_id)

    async def _client_pending(self, revision: str) -> frozenset[str]:
        """Calls of tools the client runs that the run waits on at this checkpoint (their notes are not shown)."""
        if not self.client_tools:
            return frozenset()
        run = await self.store.load_run(self.run_id)
        if run is not None and run.status == "suspended" and run.history_revision_id == revision:
            return frozenset(
                p.tool_call_id for p in run.pending if p.kind == "suspend" and p.tool_name in self.client_tools
            )
        # A replay of a suspension the run has since moved past: its event names the first call it waited on.
        data = self._suspend or {}
        ident = data.get("tool_call_id")
        waits = data.get("kind") == "suspend" and isinstance(ident, str) and ident in self._client_calls
        return frozenset({ident}) if waits and isinstance(ident, str) else frozenset()

    # -- events -------------------------------------------------------------------------------------

    async def translate(self, event: SessionEvent) -> list[BaseEvent]:
        """The AG-UI events one session event of the turn yields, in order."""
        kind, data = event.type, event.data
        if kind in ("text.delta", "reasoning.delta"):
            text = str(data.get("text", ""))
            ident = data.get("message_id")
            if not isinstance(ident, str):  # a delta from before deltas named their message
                ident = self._message or f"{self.run_id}:{self._steps_done + 1}"
            self._message = ident
            out = self._open_step(self._steps_done + 1)
            if kind == "text.delta":
                return out + self._text_events(ident, text, keep_open=True)
            return out + self._reasoning_events(reasoning_id(ident), text, keep_open=True)
        if kind == "tool.call":
            return await self._tool_call(data)
        if kind == "checkpoint" and data.get("run_id") == self.run_id:
            return await self._checkpoint(data)
        if kind == "run.suspended":
            self._suspend = dict(data)
        elif kind == "reply.retracted":
            retracted = {str(i) for i in data.get("message_ids") or ()}
            out = []
            if self._text is not None and (not retracted or self._text in retracted):
                out += self._close_text()
            if self._reasoning is not None:
                out += self._close_reasoning()
            for ident in retracted:
                self._sent.pop(ident, None)
                self._sent.pop(reasoning_id(ident), None)
            self._message = None
            return [*out, await self.snapshot(self.revision)]
        elif kind in CUSTOM_EVENTS:
            return [CustomEvent(name=f"repertory.{kind}", value=data)]
        return []

    async def _tool_call(self, data: dict[str, Any]) -> list[BaseEvent]:
        call_id, name = str(data.get("tool_call_id")), str(data.get("tool_name"))
        if call_id in self._calls or self._message is None:
            # Without text before it the call's message id is unknown here: the checkpoint that
            # commits the message announces it under that id (a client files a call under its message).
            return []
        out = self._close_text() + self._close_reasoning() + self._open_step(self._steps_done + 1)
        return out + await self._announce(call_id, name, data.get("args") or {}, self._message)

    async def _announce(self, call_id: str, name: str, args: Any, parent: str) -> list[BaseEvent]:
        self._calls.add(call_id)
        self._step_calls.add(call_id)
        if name in self.client_tools:
            self._client_calls.add(call_id)
        out: list[BaseEvent] = [
            ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name, parent_message_id=parent),
            ToolCallArgsEvent(tool_call_id=call_id, delta=json.dumps(args)),
            ToolCallEndEvent(tool_call_id=call_id),
        ]
        child_agent = self._delegating(name)
        if child_agent is not None:
            run = await self.store.load_run(self.run_id)
            found = next((d for d in (run.delegations if run else ()) if d.tool_call_id == call_id), None)
            if found is not None:
                self._subagents[call_id] = found.session_id
                self._names[call_id] = child_agent
                out.append(
                    SubagentStartedEvent(
                        subagent_run_id=found.session_id,
                        name=child_agent,
                        parent_tool_call_id=call_id,
                        parent_message_id=parent,
                    )
                )
        return out

    async def _assistant(self, entry_id: str, message: ModelMessage) -> list[BaseEvent]:
        """What the client lacks of a committed assistant message: the rest of its text, its calls."""
        out: list[BaseEvent] = []
        reasoning = "".join(p.text for p in message.parts if isinstance(p, ReasoningPart))
        rid = reasoning_id(entry_id)
        open_r = self._reasoning if self._reasoning is not None else rid
        rest = _rest(reasoning, self._sent.get(open_r))
        if rest or self._reasoning is not None:
            out += self._reasoning_events(open_r, rest, keep_open=False)
        text = message.text
        # An open message is this one's stream, whatever id it was opened under.
        open_t = self._text if self._text is not None else entry_id
        rest = _rest(text, self._sent.get(open_t))
        if rest or self._text is not None:
            out += self._text_events(open_t, rest, keep_open=False)
        for call in message.tool_calls:
            if call.tool_call_id not in self._calls:
                out += await self._announce(call.tool_call_id, call.tool_name, call.args, entry_id)
        self._message = None
        return out

    def _results(self, entry_id: str, message: ModelMessage, hidden: frozenset[str]) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        results = message.tool_results
        for ident, part in zip(tool_message_ids(entry_id, len(results)), results, strict=True):
            self._answered.add(part.tool_call_id)
            if part.tool_call_id in hidden:
                continue
            content = result_text(part.result)
            out.append(
                ToolCallResultEvent(message_id=ident, tool_call_id=part.tool_call_id, content=content, role="tool")
            )
            child = self._subagents.pop(part.tool_call_id, None)
            if child is not None:
                if part.is_error:
                    out.append(SubagentErrorEvent(subagent_run_id=child, message=content))
                else:
                    out.append(SubagentFinishedEvent(subagent_run_id=child, result=part.result))
        return out

    async def _checkpoint(self, data: dict[str, Any]) -> list[BaseEvent]:
        revision, base = data.get("history_revision_id"), data.get("base_revision_id")
        step = int(data.get("step_index", self._steps_done))
        if not isinstance(revision, str):
            return []
        history = await self._load(revision)
        self.revision = revision
        if history is None or data.get("compacted"):
            self._steps_done = step
            return []
        status = data.get("status")
        hidden = await self._client_pending(revision) if status == "suspended" else frozenset()
        out: list[BaseEvent] = []
        for rev in reversed(history.walk_back(base if isinstance(base, str) else None)):
            entry = history.entry(rev.entry_id)
            if entry is None:
                continue
            if entry.message.role == "assistant" and not entry.message.boundary:
                out += self._open_step(step) + await self._assistant(entry.id, entry.message)
            elif entry.message.role == "tool":
                out += self._results(entry.id, entry.message, hidden)
        self._steps_done = step
        if status != "running" or self._step_calls <= self._answered:
            out += self._close_text() + self._close_reasoning() + self._close_step()
        return out

    # -- the end ------------------------------------------------------------------------------------

    async def ending(self, ending: Ending) -> list[BaseEvent]:
        """Close what is open, snapshot the conversation, and finish the run as it rests."""
        run = await self.store.load_run(self.run_id)
        revision = run.history_revision_id if run is not None else self.revision
        if ending.error_message is not None or ending.status == "error":
            message = ending.error_message
            code = ending.error_type
            if message is None and run is not None and run.error is not None:
                message, code = run.error.message, run.error.type
            closing = self._close_all()
            return [
                *closing,
                await self.snapshot(revision),
                RunErrorEvent(message=message or "the run failed", code=code),
            ]
        if ending.status == "cancelled":
            closing = self._close_all()
            outcome: Any = RunFinishedCancelledOutcome()
            return [*closing, await self.snapshot(revision), self._finished(outcome)]
        interrupts: list[Interrupt] = []
        client_calls: list[str] = []
        suspended: dict[str, list[str]] | None = None
        if run is not None and run.status == "suspended":
            interrupts, client_calls = interrupts_of(run.pending, self.agent, self.client_tools)
        elif ending.status == "running":
            nested = await nested_wait(self.store, self.thread_id)
            if nested is not None:
                child_run, child = nested
                child_agent = self.agents.get(child.agent)
                interrupts, _ = interrupts_of(child_run.pending, child_agent, frozenset(), subagent=child.session_id)
                suspended = {child.session_id: [i.id for i in interrupts]}
        closing = self._close_all(suspended)
        snap = await self.snapshot(revision)
        if interrupts:
            outcome = RunFinishedInterruptOutcome(interrupts=interrupts)
        else:
            outcome = RunFinishedSuccessOutcome(pending_tool_call_ids=client_calls or None)
        return [*closing, snap, self._finished(outcome)]

    def _finished(self, outcome: Any) -> RunFinishedEvent:
        return RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome)


def _rest(full: str, sent: str | None) -> str:
    """What of ``full`` a client that has ``sent`` lacks (all of it when ``sent`` is not its beginning)."""
    if not sent:
        return full
    return full[len(sent) :] if full.startswith(sent) else ""
