"""Host side of the event streams: one channel per client connection, carrying every session it reads.

A Ray streaming generator per session does not scale (1,000 open streams took 260 ms to reach),
so a client opens one stream per host (``SessionHost.client_stream``) and multiplexes: it
subscribes sessions onto its channel (``subscribe``), the host pushes each subscription's events
into the channel tagged with the subscription id, and the stream yields them in batches.

Subscriptions are ``LocalHost.listen`` listeners, attached synchronously when the subscribe call
starts: a subscription "from now" (``after_seq=-1``) sees every event the session emits after the
call began, and a later call from the same client (Ray runs one caller's calls to an actor in
order) cannot emit an event before it. A replay (``after_seq >= 0``) buffers live events while it
reads the stored ones, then drops the live ones it already sent. A barrier marker pushed through
the channel lets a client wait until everything published before it has been delivered.

Ray does not stop an actor's generator when the process reading it dies (measured: it ran on,
heartbeats or not), so liveness is ours: a client touches its channel at least every
``KEEPALIVE_SECONDS`` and the host ends channels silent for ``SILENCE_SECONDS`` (``reap``). A live
client whose stream ended that way just opens a new channel.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from repertory.core.tree import SessionEvent
from repertory.runtime.host import LocalHost

__all__ = ["BARRIER", "BATCH_MAX", "RESULT", "Channels", "Item"]

BATCH_MAX = 256
BARRIER = "__barrier__"
"""The subscription id of a barrier item: its event is ``None`` and its session id is the barrier's id."""
RESULT = "__result__"
"""The subscription id of a turn's result: ``(RESULT, submission id, RunResult or the error it raised)``."""

Item = tuple[str, str, Any]
"""``(subscription id, session id, event)``; a barrier is ``(BARRIER, barrier id, None)``, a result
``(RESULT, submission id, RunResult | BaseException)``."""

KEEPALIVE_SECONDS = 2.0
SILENCE_SECONDS = 10.0


@dataclass
class _Subscription:
    session_id: str
    push: Callable[[Item], None]
    sub_id: str
    last: int = -1
    buffer: list[SessionEvent] | None = None
    remove: Callable[[], None] = lambda: None

    def on_event(self, event: SessionEvent) -> None:
        if self.buffer is not None:
            self.buffer.append(event)
        elif event.seq is None or event.seq > self.last:
            if event.seq is not None:
                self.last = event.seq
            self.push((self.sub_id, self.session_id, event))


@dataclass
class _Channel:
    items: list[Item] = field(default_factory=list)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    subs: dict[str, _Subscription] = field(default_factory=dict)
    streaming: bool = False
    closed: bool = False
    seen: float = field(default_factory=time.monotonic)

    def push(self, item: Item) -> None:
        self.items.append(item)
        self.ready.set()

    def close(self) -> None:
        self.closed = True
        self.ready.set()  # a stream waiting for items wakes up and ends
        for sub in self.subs.values():
            sub.remove()
        self.subs.clear()


class Channels:
    """Every client channel of one host, keyed by the client's connection id."""

    def __init__(self) -> None:
        self._channels: dict[str, _Channel] = {}
        self._closed: set[str] = set()

    @property
    def open_streams(self) -> int:
        """Channels whose stream is being read now."""
        return sum(1 for c in self._channels.values() if c.streaming)

    @property
    def subscriptions(self) -> int:
        """Live subscriptions over every channel."""
        return sum(len(c.subs) for c in self._channels.values())

    def _channel(self, client_id: str) -> _Channel:
        if client_id in self._closed:
            raise ConnectionError(f"event channel {client_id!r} is closed; open a new one")
        channel = self._channels.get(client_id)
        if channel is None:
            channel = self._channels[client_id] = _Channel()
        channel.seen = time.monotonic()
        return channel

    def keepalive(self, client_id: str) -> None:
        """The client is alive (a closed channel raises, so the client opens a new one)."""
        self._channel(client_id)

    def reap(self, silence: float = SILENCE_SECONDS) -> int:
        """End the channels whose client has not been heard from for ``silence`` seconds."""
        cutoff = time.monotonic() - silence
        gone = [client_id for client_id, channel in self._channels.items() if channel.seen < cutoff]
        for client_id in gone:
            self._drop(client_id)
        return len(gone)

    def _drop(self, client_id: str) -> None:
        channel = self._channels.pop(client_id, None)
        if channel is not None:
            channel.close()
        self._closed.add(client_id)
        if len(self._closed) > 10_000:
            self._closed.clear()

    async def subscribe(self, host: LocalHost, client_id: str, sub_id: str, session_id: str, after_seq: int) -> None:
        """Put a session's events on the client's channel: stored ones after ``after_seq``, then live.

        ``after_seq=-1`` is "from now" (no replay, and the session is not activated for it).
        """
        channel = self._channel(client_id)
        self.unsubscribe(client_id, sub_id)  # a client retrying after a reconnect race: one subscription
        sub = _Subscription(session_id, channel.push, sub_id, last=after_seq)
        if after_seq >= 0:
            sub.buffer = []
        sub.remove = host.listen(session_id, sub.on_event)  # synchronous: nothing emitted after now is missed
        channel.subs[sub_id] = sub
        if after_seq < 0:
            return
        try:
            await host.actor(session_id)  # a watched session stays resident, as with the local backend
            for event in await host.store.load_events(session_id, after_seq):
                sub.last = event.seq or sub.last
                channel.push((sub_id, session_id, event))
        except BaseException:
            self.unsubscribe(client_id, sub_id)
            raise
        buffered, sub.buffer = sub.buffer or [], None
        for event in buffered:
            sub.on_event(event)

    def unsubscribe(self, client_id: str, sub_id: str) -> None:
        """Stop one subscription (idempotent)."""
        channel = self._channels.get(client_id)
        if channel is None:
            return
        sub = channel.subs.pop(sub_id, None)
        if sub is not None:
            sub.remove()

    def result(self, client_id: str, submission_id: str, outcome: Any) -> bool:
        """Deliver a turn's result (or error) to the client that ran it; ``False`` if its channel is gone.

        It goes behind the turn's events on the channel, so a client's listeners have seen the
        turn end before its ``run()`` returns.
        """
        channel = self._channels.get(client_id)
        if channel is None or channel.closed:
            return False
        channel.push((RESULT, submission_id, outcome))
        return True

    def barrier(self, client_id: str, barrier_id: str) -> None:
        """Push a marker: once the client reads it, it has read everything pushed before."""
        self._channel(client_id).push((BARRIER, barrier_id, None))

    async def stream(self, client_id: str) -> AsyncIterator[list[Item]]:
        """The channel's items in batches, until the client cancels; then every subscription goes."""
        channel = self._channel(client_id)
        channel.streaming = True
        try:
            while not channel.closed:
                await channel.ready.wait()
                channel.ready.clear()
                while channel.items and not channel.closed:
                    batch, channel.items = channel.items[:BATCH_MAX], channel.items[BATCH_MAX:]
                    yield batch
        finally:
            self._drop(client_id)
