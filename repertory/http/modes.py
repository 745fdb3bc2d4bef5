"""Session events of one run, as the stream parts LangGraph's ``stream_mode`` asks for.

- ``values``: the thread's values after every checkpoint (messages, and ``__interrupt__`` when
  the checkpoint suspended the run).
- ``updates``: what each checkpoint added, by node: ``{"model": {"messages": [...]}}`` for the
  assistant's messages, ``{"tools": {...}}`` for tool results, ``{"__interrupt__": [...]}``.
- ``messages-tuple`` (LangGraph's ``messages`` event with ``[chunk, metadata]``): text and
  reasoning deltas as ``AIMessageChunk`` pieces while the model writes, then every message the
  checkpoint added, in full.
- ``messages``: the older ``messages/metadata``, ``messages/partial`` and ``messages/complete``.
- ``custom``: what a LangGraph graph writes with its stream writer. A repertory tool has no such
  writer, so the mode is accepted and carries nothing: repertory's own events (``turn.started``,
  ``tool.call``, ``checkpoint``, ...) are not graph output, and a LangGraph client would read them
  as such (agent-chat-ui hands every custom event to its UI-message reducer). They have their own
  route, ``GET /threads/{thread_id}/events`` (``repertory.http.events``).

Everything but the deltas is derived from the durable event log and the immutable history
graph alone (a checkpoint event names its revision and the one before it), so a replay after a
dropped connection yields exactly the parts the live stream had.
"""

from __future__ import annotations

from typing import Any

from repertory.core.history import MessageHistory
from repertory.core.messages import ModelMessage
from repertory.core.state import PendingCall
from repertory.core.store import TreeStore
from repertory.core.tree import SessionEvent
from repertory.http.convert import chunk_dict, lineage, message_dicts
from repertory.http.views import approval_request, interrupts_of, values_view
from repertory.runtime import Agent

__all__ = ["Part", "StreamConverter"]

Dict = dict[str, Any]
Part = tuple[str, Any]
_DELTAS = ("text.delta", "reasoning.delta")


class StreamConverter:
    """Turns one run's session events into ``(event, data)`` stream parts for the requested modes."""

    def __init__(
        self, store: TreeStore, agent: Agent | None, *, thread_id: str, run_id: str, modes: tuple[str, ...]
    ) -> None:
        self.store = store
        self.agent = agent
        self.thread_id = thread_id
        self.run_id = run_id
        self.modes = frozenset(modes)
        self.step = 0
        self._history: MessageHistory | None = None
        self._streamed: dict[str, str] = {}  # chunk id -> text so far
        self._suspend: Dict | None = None  # the last run.suspended event's data
        self._converted: dict[str, list[Dict]] = {}

    # -- helpers ------------------------------------------------------------------------------------

    def _meta(self, node: str) -> Dict:
        return {
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "langgraph_node": node,
            "langgraph_step": self.step,
            "langgraph_checkpoint_ns": "",
            "assistant_id": self.agent.name if self.agent else None,
        }

    def _dicts(self, entry_id: str, message: ModelMessage) -> list[Dict]:
        """A stored message as LangChain dicts, converted once per stream (entries never change)."""
        dicts = self._converted.get(entry_id)
        if dicts is None:
            dicts = self._converted[entry_id] = message_dicts(entry_id, message)
        return dicts

    async def _load(self, revision: str) -> MessageHistory | None:
        if self._history is None or self._history.revision_id != revision:
            self._history = await self.store.load_history(revision)
        return self._history

    async def _interrupts(self, revision: str | None) -> list[Dict]:
        """The interrupt a suspending checkpoint raised: live from the run, else from its event."""
        run = await self.store.load_run(self.run_id)
        if run is not None and run.status == "suspended" and run.history_revision_id == revision:
            return interrupts_of(run, self.agent)
        data = self._suspend or {}
        ident = data.get("tool_call_id") or self.run_id
        payload = data.get("payload")
        if data.get("kind") == "approval" and isinstance(payload, dict):
            call = PendingCall(
                kind="approval",
                tool_call_id=str(payload.get("tool_call_id", ident)),
                tool_name=str(payload.get("tool_name", "")),
                args=dict(payload.get("args") or {}),
                reason=data.get("reason"),
            )
            return [{"value": approval_request([call], self.agent), "id": ident}]
        return [{"value": payload if payload is not None else data.get("reason"), "id": ident}]

    def _delta(self, event: SessionEvent) -> list[Part]:
        text = str(event.data.get("text", ""))
        chunk_id = f"{self.run_id}:{self.step + 1}"
        reasoning = event.type == "reasoning.delta"
        parts: list[Part] = []
        if "messages-tuple" in self.modes:
            parts.append(("messages", [chunk_dict(chunk_id, text, reasoning=reasoning), self._meta("model")]))
        if "messages" in self.modes and not reasoning:
            if chunk_id not in self._streamed:
                parts.append(("messages/metadata", {chunk_id: {"metadata": self._meta("model")}}))
            so_far = self._streamed.get(chunk_id, "") + text
            parts.append(("messages/partial", [chunk_dict(chunk_id, so_far)]))
        self._streamed.setdefault(chunk_id, "")
        self._streamed[chunk_id] += "" if reasoning else text
        return parts

    def _message_parts(self, added: list[tuple[str, Dict]]) -> list[Part]:
        """Every message a checkpoint added, in full, whether or not its text was streamed.

        The same parts whether live or replayed (so event ids line up after a reconnect); the
        deltas streamed before are extra parts. The old ``messages`` mode closes a
        streamed message under its chunk id, as its partials used.
        """
        parts: list[Part] = []
        chunk_id = f"{self.run_id}:{self.step}"
        for role, message in added:
            if role not in ("ai", "tool"):
                continue
            node = "tools" if role == "tool" else "model"
            if "messages-tuple" in self.modes:
                parts.append(("messages", [message, self._meta(node)]))
            if "messages" in self.modes:
                shown = {**message, "id": chunk_id} if role == "ai" and chunk_id in self._streamed else message
                parts.append(("messages/metadata", {shown["id"]: {"metadata": self._meta(node)}}))
                parts.append(("messages/complete", [shown]))
        self._streamed.pop(chunk_id, None)
        return parts

    # -- events -------------------------------------------------------------------------------------

    async def _checkpoint(self, event: SessionEvent) -> list[Part]:
        data = event.data
        self.step = int(data.get("step_index", self.step))
        revision, base = data.get("history_revision_id"), data.get("base_revision_id")
        if not isinstance(revision, str):
            return []  # an event written before checkpoints named their revision: nothing to rebuild
        history = await self._load(revision)
        if history is None:
            return []
        added: list[tuple[str, Dict]] = []
        # A compaction's checkpoint re-points at messages already said, after its summary: nothing new.
        walked = [] if data.get("compacted") else history.walk_back(base if isinstance(base, str) else None)
        for rev in reversed(walked):
            entry = history.entry(rev.entry_id)
            if entry is not None:
                added.extend((m["type"], m) for m in self._dicts(entry.id, entry.message))
        suspended = data.get("status") == "suspended"
        interrupts = await self._interrupts(revision) if suspended else []
        parts = self._message_parts(added) if self.modes & {"messages", "messages-tuple"} else []
        if "updates" in self.modes:
            for node, kind in (("model", "ai"), ("tools", "tool")):
                chosen = [m for role, m in added if role == kind]
                if chosen:
                    parts.append(("updates", {node: {"messages": chosen}}))
            if interrupts:
                parts.append(("updates", {"__interrupt__": interrupts}))
        if "values" in self.modes:
            messages = [m for _, entry in lineage(history) for m in self._dicts(entry.id, entry.message)]
            parts.append(("values", values_view(messages, interrupts)))
        return parts

    async def _completed(self, event: SessionEvent) -> list[Part]:
        parts: list[Part] = []
        if "values" in self.modes and event.data.get("status") == "cancelled":
            # A cancel commits error results for open calls without a checkpoint event, so the
            # final values come from the run itself (every other ending had its checkpoint).
            run = await self.store.load_run(self.run_id)
            revision = run.history_revision_id if run is not None else None
            history = await self._load(revision) if revision is not None else None
            if history is not None:
                messages = [m for _, e in lineage(history) for m in message_dicts(e.id, e.message)]
                parts.append(("values", values_view(messages, [])))
        if event.data.get("status") == "error":
            error = event.data.get("error") or {}
            parts.append(("error", {"error": error.get("type") or "Error", "message": error.get("message") or ""}))
        return parts

    async def convert(self, event: SessionEvent) -> list[Part]:
        """The parts one event of this run yields, in order."""
        parts: list[Part] = []
        if event.type in _DELTAS:
            parts = self._delta(event)
        elif event.type == "run.suspended":
            self._suspend = dict(event.data)
        elif event.type == "checkpoint" and event.data.get("run_id") == self.run_id:
            parts = await self._checkpoint(event)
        elif event.type == "turn.completed":
            parts = await self._completed(event)
        return parts
