"""The event bus of one session: a durable, gap-free log plus live delivery.

The step loop emits events into the bus (the ``Outbox`` protocol). An event is buffered and
numbered only when the next checkpoint commits it (``take`` -> ``commit_session(events=...)`` ->
``committed``), so the stored log and the checkpoints never disagree and a failed commit leaves no
hole in the numbering (``restore``). A reply's deltas, gathered by ``repertory.runtime.deltas``,
are written between checkpoints (``flush``); an agent without a delta window ``publish``es them
live only, never stored. The actor's own events ride its writes too: ``turn.started`` (and ``notification``)
the turn's acceptance, ``turn.completed`` the final checkpoint; only a turn that waited in the
queue, or ended with no commit to carry its end, writes them through ``append`` on their own.

Readers subscribe to a queue (``events(after_seq)``: stored events first, then live ones) or add a
listener (``on_progress``). Resume tokens never enter an event.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from repertory.core.ids import now_ms
from repertory.core.store import TreeStore
from repertory.core.tree import SessionEvent
from repertory.core.trusted import trusted
from repertory.runtime.deltas import abandoned_replies

__all__ = ["EventBus", "Outbox"]

_log = logging.getLogger("repertory.events")


class Outbox(Protocol):
    """Where the step loop puts events; see the module docstring for the commit handshake."""

    def emit(self, type: str, data: dict[str, Any]) -> None:
        """Buffer an event for the next commit (or ``flush``)."""

    def publish(self, type: str, data: dict[str, Any]) -> None:
        """Hand a live-only event (no seq, never stored) to whoever reads now."""

    async def flush(self) -> None:
        """Write what is buffered now, outside a checkpoint (a reply's deltas)."""

    async def abandoned(self, run_id: str) -> dict[str, dict[str, Any] | None]:
        """The replies of ``run_id`` streamed into the log after its last checkpoint (``abandoned_replies``)."""

    def take(self) -> Sequence[SessionEvent]:
        """Number the buffered events for the commit about to happen and hand them over."""

    def committed(self, events: Sequence[SessionEvent]) -> None:
        """The commit carrying ``events`` landed: publish them."""

    def restore(self, events: Sequence[SessionEvent]) -> None:
        """The commit failed: put the events back, unnumbered, ahead of anything newer."""


class EventBus:
    """One session's outbox, subscriber queues and progress listeners."""

    def __init__(
        self,
        session_id: str,
        last_seq: int | None,
        listeners: list[Callable[[SessionEvent], None]] | None = None,
        *,
        store: TreeStore | None = None,
    ) -> None:
        self.session_id = session_id
        self._store = store  # where ``flush`` writes; commits bring their own
        # ``None`` until ``load_seq``: a session activated only to be read (its status, its
        # events) never needs its log position, so activation does not pay for reading it.
        self.last_seq = last_seq
        self.submission_id: str | None = None
        self._buffer: list[tuple[str, dict[str, Any], str | None, int]] = []
        self._queues: set[asyncio.Queue[SessionEvent]] | None = None  # made by the first subscriber
        # The host owns this list, so a listener added before the actor is active is already here.
        self._listeners: list[Callable[[SessionEvent], None]] = listeners if listeners is not None else []

    @property
    def watched(self) -> bool:
        """True while anyone reads this bus (the session must then stay in memory)."""
        return bool(self._queues or self._listeners)

    async def load_seq(self, store: TreeStore) -> None:
        """Read the log position from the store, once, before the first event is numbered."""
        if self.last_seq is None:
            seq = await store.last_event_seq(self.session_id)
            if self.last_seq is None:  # a concurrent first load may have finished first: keep it
                self.last_seq = seq

    # -- the outbox ---------------------------------------------------------------------------------

    def emit(self, type: str, data: dict[str, Any]) -> None:
        """Buffer an event; it is numbered and published when the commit (or ``flush``) carrying it lands."""
        self._buffer.append((type, data, self.submission_id, now_ms()))

    def publish(self, type: str, data: dict[str, Any]) -> None:
        """Publish a live-only event now, without a seq: only current readers ever see it."""
        if self.watched:
            self._publish(
                trusted(
                    SessionEvent,
                    session_id=self.session_id,
                    seq=None,
                    submission_id=self.submission_id,
                    type=type,
                    data=data,
                    at=now_ms(),
                )
            )

    def take(self) -> Sequence[SessionEvent]:
        """Number the buffer from ``last_seq + 1`` for the commit about to happen (``()`` when it is empty)."""
        if not self._buffer:
            return ()
        if self.last_seq is None:
            raise RuntimeError("the event log position was not loaded (EventBus.load_seq) before a commit")
        # The engine's own events (their data is ``dict[str, Any]``, nothing to check): built, not validated.
        sid, last = self.session_id, self.last_seq
        events = [
            trusted(SessionEvent, session_id=sid, seq=last + i, submission_id=sub, type=t, data=d, at=at)
            for i, (t, d, sub, at) in enumerate(self._buffer, start=1)
        ]
        # Emptied in place: a list made anew per commit lived as long as the session, which the
        # collector promotes and scans again (issue 21).
        self._buffer.clear()
        return events

    def committed(self, events: Sequence[SessionEvent]) -> None:
        """Advance the log and publish what just became durable."""
        if not events:
            return
        self.last_seq = events[-1].seq or self.last_seq
        for event in events:
            self._publish(event)

    def restore(self, events: Sequence[SessionEvent]) -> None:
        """Put un-committed events back in front of the buffer, without their numbers."""
        self._buffer[:0] = [(e.type, e.data, e.submission_id, e.at) for e in events]

    def discard(self) -> None:
        """Forget the buffered events: a drive that failed on the store said them, and none landed.

        Its run is driven again from its last commit (``SessionActor``), which says again what it
        does; kept, they would go out with that drive's first write, a checkpoint that never was among them.
        """
        self._buffer.clear()

    async def stage(
        self, store: TreeStore, type: str, data: dict[str, Any], submission_id: str | None = None
    ) -> Sequence[SessionEvent]:
        """Number one event (after anything still buffered) for a write the caller makes itself.

        The caller writes them with its own change, in one transaction, then calls ``committed``
        (or ``restore`` when the write failed): how a turn's end and its ``turn.completed`` land together.
        """
        await self.load_seq(store)
        self._buffer.append((type, data, submission_id or self.submission_id, now_ms()))
        return self.take()

    async def flush(self) -> None:
        """Write everything buffered now, outside a checkpoint, and publish it once it landed."""
        store = self._bound()
        await self.load_seq(store)
        events = self.take()
        if not events:
            return
        try:
            await store.append_events(events)
        except BaseException:
            self.restore(events)
            raise
        self.committed(events)

    async def abandoned(self, run_id: str) -> dict[str, dict[str, Any] | None]:
        """The replies of ``run_id`` the log holds deltas of after its last checkpoint, with their call positions."""
        return await abandoned_replies(self._bound(), self.session_id, run_id)

    def _bound(self) -> TreeStore:
        if self._store is None:
            raise RuntimeError("this event bus was made without a store: it cannot write between checkpoints")
        return self._store

    async def append(
        self, store: TreeStore, type: str, data: dict[str, Any], submission_id: str | None = None
    ) -> SessionEvent:
        """Write one event (and anything still buffered) now, outside a checkpoint."""
        events = await self.stage(store, type, data, submission_id)
        try:
            await store.append_events(events)
        except BaseException:
            self.restore(events)
            raise
        self.committed(events)
        return events[-1]

    # -- readers ------------------------------------------------------------------------------------

    def _publish(self, event: SessionEvent) -> None:
        for queue in self._queues or ():
            queue.put_nowait(event)
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:
                # A listener's bug must never stop the session that feeds it.
                _log.exception("on_progress listener %r failed on %s event", listener, event.type)

    def subscribe(self) -> asyncio.Queue[SessionEvent]:
        """A queue receiving every event published from now on."""
        queue: asyncio.Queue[SessionEvent] = asyncio.Queue()
        if self._queues is None:
            self._queues = set()
        self._queues.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[SessionEvent]) -> None:
        """Stop feeding a queue."""
        if self._queues is not None:
            self._queues.discard(queue)
