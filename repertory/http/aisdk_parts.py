"""One turn's session events as the parts of the Vercel AI SDK's UI message stream (``ai`` 7, stream v1).

``useChat`` builds one assistant message per response out of these parts (the ``ai`` package's
``processUIMessageStream``); a turn is one response here, so the message's id is the turn's run
id, the same in every stream of the turn: the POST that started it, the POST that answered its
approval (which continues the same run) and a resumed GET. What each event becomes:

- ``start`` (``messageId``: the run id), then ``data-repertory-run`` (id: the run id) with the
  run's status, updated in place as the run goes on (``running``, ``suspended``, ``done``, ...).
- A model request is a step: ``start-step`` before its first part, ``finish-step`` once its tools
  have answered (or it made no calls). Text and reasoning deltas are ``text-start`` /
  ``text-delta`` / ``text-end`` and ``reasoning-*`` parts whose id is the delta's ``message_id``
  (the history entry the reply becomes). The checkpoint that stores the reply closes them; a reply
  no delta carried (a model that does not stream, deltas that were live-only before this reader
  came) arrives whole from the checkpoint, so every reader ends with the stored text.
- A call is ``tool-input-start`` + ``tool-input-available`` (an argument text that is not JSON:
  ``tool-input-error``), its result ``tool-output-available`` or ``tool-output-error``, a
  rejected call ``tool-output-denied``.
- A call waiting for a human is ``tool-approval-request`` (``approvalId`` is the tool call id;
  the resume token never leaves the server); every approval of the step is asked at once, so
  ``useChat`` can send the answers together. The decision, when the stream sees it, is
  ``tool-approval-response`` (so a replay rebuilds the answered state) and
  ``data-repertory-approval`` (id: the tool call id) says who decided.
- ``reply.retracted`` (a reply a crash, cancel or error abandoned) is ``reset-step``: ``useChat``
  drops every part of the current step, which holds exactly the abandoned reply (a step's parts
  are only ever the one model request's), and the reply asked again streams into the same step.
  A transient ``data-repertory-retracted`` names the dropped message ids.
- A ``suspend()`` waiting for a value is ``data-repertory-suspended`` (id: the tool call id) and
  leaves the call without output (``addToolOutput`` answers it) until the value comes; a
  guardrail's refusal ``data-repertory-guardrail``; a checkpoint a transient
  ``data-repertory-checkpoint`` (what is durable so far); a compaction a transient
  ``data-repertory-compacted``.
- The end: ``finish`` with ``finishReason`` ``stop`` (done), ``tool-calls`` (waiting for an
  approval or a value), ``error`` after an ``error`` part (failed), or ``abort`` (cancelled).
"""

from __future__ import annotations

import collections
from typing import Any

from repertory.core.history import MessageHistory
from repertory.core.messages import ModelMessage, ReasoningPart
from repertory.core.store import TreeStore
from repertory.core.tree import SessionEvent, TurnStatus
from repertory.http.convert import result_text

__all__ = ["Chunk", "UIStreamParts"]

Chunk = dict[str, Any]

_FINISH: dict[str, str] = {"done": "stop", "suspended": "tool-calls", "error": "error"}


class UIStreamParts:
    """Turns one run's session events into UI message stream chunks, in order; one instance per stream.

    ``live_deltas`` says whether deltas without a seq (an agent whose deltas are live-only) may be
    used: a stream that followed the turn from its start saw them all, a resumed one may have
    missed the first ones and takes the text from the checkpoint instead.
    """

    def __init__(self, store: TreeStore, *, session_id: str, run_id: str, live_deltas: bool) -> None:
        self.store = store
        self.session_id = session_id
        self.run_id = run_id
        self.live_deltas = live_deltas
        self._step_open = False
        self._open: dict[tuple[str, str], str] = {}  # (kind, message id) -> open part id
        self._said: set[tuple[str, str]] = set()  # (kind, message id) streamed in this step
        self._part_ids: collections.Counter[tuple[str, str]] = collections.Counter()
        self._inputs: set[str] = set()
        self._outputs: set[str] = set()
        self._asked: set[str] = set()
        self._denied: set[str] = set()
        self._waiting: list[str] = []  # calls whose ``suspend()`` waits for a value, oldest first
        self._history: MessageHistory | None = None

    # -- the frame ----------------------------------------------------------------------------------

    def begin(self) -> list[Chunk]:
        """The stream's first parts: the message's start and the run's status."""
        return [{"type": "start", "messageId": self.run_id}, self._run_status("running")]

    def end(self, status: TurnStatus | None, error: str | None) -> list[Chunk]:
        """The last parts once the run is at rest: the open step closed, then ``finish``, ``error`` or ``abort``."""
        out = self._close_step()
        if error is not None and status != "error":
            status = "error"
        out.append(self._run_status(status or "running"))
        if status == "cancelled":
            out.append({"type": "abort", "reason": "the run was cancelled"})
            return out
        if status == "error":
            out.append({"type": "error", "errorText": error or "the run failed"})
        out.append({"type": "finish", "finishReason": _FINISH.get(status or "", "other")})
        return out

    # -- events -------------------------------------------------------------------------------------

    async def convert(self, event: SessionEvent) -> list[Chunk]:
        """The chunks one event of this run yields (none for what a UI message has no place for)."""
        kind, data = event.type, event.data
        if kind in ("text.delta", "reasoning.delta"):
            return self._delta(event)
        if data.get("run_id", self.run_id) != self.run_id:
            return []  # another run's checkpoint or decision (a delegated child's rides its own session)
        if kind == "checkpoint":
            return await self._checkpoint(data)
        if kind == "approval.requested":
            return self._ask(str(data.get("tool_call_id")), data.get("payload"), data.get("reason"))
        if kind == "run.suspended":
            return await self._suspended(data)
        if kind == "approval.decided":
            return self._decided(data)
        if kind == "reply.retracted":
            return self._retracted(data)
        if kind == "guardrail.tripped":
            info = {"stage": data.get("stage"), "guardrail": data.get("guardrail"), "message": data.get("message")}
            return [{"type": "data-repertory-guardrail", "data": info}]
        if kind == "context.compacted":
            return [{"type": "data-repertory-compacted", "data": dict(data), "transient": True}]
        return []

    # -- helpers ------------------------------------------------------------------------------------

    def _run_status(self, status: str) -> Chunk:
        data = {"sessionId": self.session_id, "runId": self.run_id, "status": status}
        return {"type": "data-repertory-run", "id": self.run_id, "data": data}

    def _open_step(self) -> list[Chunk]:
        if self._step_open:
            return []
        self._step_open = True
        return [{"type": "start-step"}]

    def _close_parts(self, message_id: str | None = None) -> list[Chunk]:
        out: list[Chunk] = []
        for key, part_id in list(self._open.items()):
            if message_id is None or key[1] == message_id:
                out.append({"type": f"{key[0]}-end", "id": part_id})
                del self._open[key]
        return out

    def _close_step(self) -> list[Chunk]:
        if not self._step_open:
            return []
        out = self._close_parts()
        out.append({"type": "finish-step"})
        self._step_open = False
        self._said.clear()
        return out

    def _start_part(self, kind: str, message_id: str) -> list[Chunk]:
        """Open a ``text`` or ``reasoning`` part of a message, closing the other kind's open part first."""
        key = (kind, message_id)
        if key in self._open:
            return []
        other = ("reasoning" if kind == "text" else "text", message_id)
        out: list[Chunk] = []
        if other in self._open:
            out.append({"type": f"{other[0]}-end", "id": self._open.pop(other)})
        n = self._part_ids[key]
        self._part_ids[key] += 1
        part_id = message_id if n == 0 else f"{message_id}-{n}"
        self._open[key] = part_id
        out.append({"type": f"{kind}-start", "id": part_id})
        return out

    def _delta(self, event: SessionEvent) -> list[Chunk]:
        data = event.data
        message_id, text = data.get("message_id"), data.get("text")
        if event.seq is None and not self.live_deltas:
            return []  # a live-only delta of a reply this stream may have joined late: the checkpoint says it whole
        if data.get("run_id", self.run_id) != self.run_id or not isinstance(message_id, str):
            return []
        if not isinstance(text, str) or not text:
            return []
        kind = "text" if event.type == "text.delta" else "reasoning"
        out = self._open_step()
        out += self._start_part(kind, message_id)
        out.append({"type": f"{kind}-delta", "id": self._open[(kind, message_id)], "delta": text})
        self._said.add((kind, message_id))
        return out

    def _whole(self, kind: str, message_id: str, text: str) -> list[Chunk]:
        """A part the deltas did not carry, said at once from the stored message."""
        if (kind, message_id) in self._said or not text:
            return []
        out = self._start_part(kind, message_id)
        part_id = self._open.pop((kind, message_id))
        return [*out, {"type": f"{kind}-delta", "id": part_id, "delta": text}, {"type": f"{kind}-end", "id": part_id}]

    def _tool_input(self, tool_call_id: str, tool_name: str, args: Any, invalid: str | None = None) -> list[Chunk]:
        if tool_call_id in self._inputs:
            return []
        self._inputs.add(tool_call_id)
        out = self._open_step()
        out.append({"type": "tool-input-start", "toolCallId": tool_call_id, "toolName": tool_name})
        chunk: Chunk = {
            "type": "tool-input-available",
            "toolCallId": tool_call_id,
            "toolName": tool_name,
            "input": args,
        }
        if invalid is not None:
            chunk.update(type="tool-input-error", input=invalid, errorText=f"the arguments are not JSON: {invalid}")
        out.append(chunk)
        return out

    def _assistant(self, entry_id: str, message: ModelMessage) -> list[Chunk]:
        out = self._open_step()
        reasoning = "".join(p.text for p in message.parts if isinstance(p, ReasoningPart) and not p.redacted)
        out += self._close_parts(entry_id)
        out += self._whole("reasoning", entry_id, reasoning)
        out += self._whole("text", entry_id, message.text)
        for call in message.tool_calls:
            out += self._tool_input(call.tool_call_id, call.tool_name, call.args, call.invalid_args)
        return out

    def _results(self, message: ModelMessage) -> list[Chunk]:
        out: list[Chunk] = []
        for result in message.tool_results:
            call_id = result.tool_call_id
            if call_id in self._outputs or call_id in self._waiting:
                continue  # a waiting call's stored result is a placeholder: its output is the value it gets
            self._outputs.add(call_id)
            if call_id in self._denied:
                out.append({"type": "tool-output-denied", "toolCallId": call_id})
            elif result.is_error:
                out.append(
                    {"type": "tool-output-error", "toolCallId": call_id, "errorText": result_text(result.result)}
                )
            else:
                out.append({"type": "tool-output-available", "toolCallId": call_id, "output": result.result})
        return out

    async def _checkpoint(self, data: dict[str, Any]) -> list[Chunk]:
        revision, base = data.get("history_revision_id"), data.get("base_revision_id")
        if not isinstance(revision, str):
            return []
        if self._history is None or self._history.revision_id != revision:
            self._history = await self.store.load_history(revision)
        history = self._history
        if history is None:
            return []
        out: list[Chunk] = []
        last: ModelMessage | None = None
        # A compaction's checkpoint re-points at messages already said, after its summary: nothing new.
        walked = [] if data.get("compacted") else history.walk_back(base if isinstance(base, str) else None)
        for rev in reversed(walked):
            entry = history.entry(rev.entry_id)
            if entry is None or entry.message.boundary:
                continue
            message = last = entry.message
            if message.role == "assistant":
                out += self._assistant(entry.id, message)
            elif message.role == "tool":
                out += self._results(message)
            elif message.role == "user" and self._waiting:
                # A resumed ``suspend()``: its value arrives as a message, and is the call's output.
                call_id = self._waiting.pop(0)
                self._outputs.add(call_id)
                out.append({"type": "tool-output-available", "toolCallId": call_id, "output": message.text})
        # A step goes on while its calls wait for their results (a call committed before it runs).
        if last is not None and not (last.role == "assistant" and last.tool_calls):
            out += self._close_step()
        step = data.get("step_index")
        info = {"revisionId": revision, "step": step, "status": data.get("status")}
        out.append({"type": "data-repertory-checkpoint", "data": info, "transient": True})
        return out

    def _ask(self, tool_call_id: str, payload: Any, reason: Any) -> list[Chunk]:
        if tool_call_id in self._asked:
            return []
        self._asked.add(tool_call_id)
        asked = payload if isinstance(payload, dict) else {}
        out = self._tool_input(tool_call_id, str(asked.get("tool_name", "")), asked.get("args", {}))
        chunk: Chunk = {"type": "tool-approval-request", "approvalId": tool_call_id, "toolCallId": tool_call_id}
        if isinstance(reason, str) and reason:
            chunk["reason"] = reason
        out.append(chunk)
        return out

    async def _suspended(self, data: dict[str, Any]) -> list[Chunk]:
        call_id = str(data.get("tool_call_id"))
        if data.get("kind") != "approval":
            if call_id not in self._waiting and call_id not in self._outputs:
                self._waiting.append(call_id)
            info = {k: data.get(k) for k in ("kind", "reason", "payload", "wake_at")}
            return [{"type": "data-repertory-suspended", "id": call_id, "data": {"toolCallId": call_id, **info}}]
        # Every approval of the step at once (the engine asks them one at a time), while the run still waits.
        run = await self.store.load_run(self.run_id)
        on = None if run is None else run.suspended_on
        if run is None or run.status != "suspended" or on is None or on.tool_call_id != call_id:
            return []
        out: list[Chunk] = []
        for pending in run.pending:
            if pending.kind == "approval":
                payload = {"tool_name": pending.tool_name, "args": pending.args}
                out += self._ask(pending.tool_call_id, payload, pending.reason)
        return out

    def _decided(self, data: dict[str, Any]) -> list[Chunk]:
        call_id = str(data.get("tool_call_id"))
        decision = data.get("decision")
        approved = decision == "approved"
        if not approved:
            self._denied.add(call_id)
        out: list[Chunk] = []
        reason = data.get("reason")
        if call_id in self._asked:  # the part has an approval to answer (a replay, or this stream asked)
            response: Chunk = {"type": "tool-approval-response", "approvalId": call_id, "approved": approved}
            if isinstance(reason, str) and reason:
                response["reason"] = reason
            out.append(response)
        info = {"toolCallId": call_id, "decision": decision, "decidedBy": data.get("decided_by"), "reason": reason}
        out.append({"type": "data-repertory-approval", "id": call_id, "data": info})
        return out

    def _retracted(self, data: dict[str, Any]) -> list[Chunk]:
        ids = [i for i in data.get("message_ids") or () if isinstance(i, str)]
        shown = [i for i in ids if any(key[1] == i for key in (*self._said, *self._open))]
        out: list[Chunk] = []
        if shown and self._step_open:
            # The step holds only the abandoned reply: drop it; the step stays open for the reply asked again.
            out.append({"type": "reset-step"})
            self._open.clear()
            self._said = {key for key in self._said if key[1] not in ids}
        out.append({"type": "data-repertory-retracted", "data": {"messageIds": ids}, "transient": True})
        return out
