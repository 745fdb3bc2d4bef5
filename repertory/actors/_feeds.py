"""Client side of the event streams: one feed (one Ray streaming generator) per host, shared by every reader.

Each ``events()`` reader and each ``on_progress`` listener of this client is a subscription on the
feed of the host that runs its session; the feed's one stream delivers batches for all of them and
the feed dispatches by subscription id. After a host failure the feed opens a new channel and
resubscribes every reader from the last seq it delivered (live-only deltas in the gap are lost;
stored events never are). The feed cancels its stream when the client closes, which ends the host's
generator and drops its subscriptions. A barrier (``flush``) waits until the listeners of a session
have been called with everything the host published before it: ``handle.run()`` returns only
after its listeners saw the turn end, as on the local backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError

from repertory.actors._channels import BARRIER, KEEPALIVE_SECONDS, RESULT
from repertory.core.ids import new_id
from repertory.core.tree import SessionEvent

__all__ = ["ChannelLost", "Feed", "Subscription"]

_DEAD = (RayActorError, ActorDiedError, ActorUnavailableError, ConnectionError)
_log = logging.getLogger("repertory.events")
_FLUSH_SECONDS = 10.0


class ChannelLost(ConnectionError):
    """The channel a turn's result was to arrive on went away; the caller reads the result another way."""


@dataclass
class Subscription:
    """One reader or listener of one session; ``last`` is the newest seq delivered to it."""

    session_id: str
    last: int
    listener: Callable[[SessionEvent], None] | None = None
    queue: asyncio.Queue[SessionEvent] = field(default_factory=asyncio.Queue)
    sub_id: str = field(default_factory=new_id)
    closed: bool = False

    def deliver(self, event: SessionEvent) -> None:
        if self.closed:
            return
        if event.seq is not None:
            if event.seq <= self.last:
                return  # already delivered before a resubscription
            self.last = event.seq
        if self.listener is None:
            self.queue.put_nowait(event)
            return
        try:
            self.listener(event)
        except Exception:
            _log.exception("on_progress listener failed")


class Feed:
    """The client's channel to one host: opened on first use, reopened after a host failure."""

    def __init__(self, handle: Any, key: str, reconnect_delay: float = 0.1) -> None:
        self.handle = handle
        self.key = key
        self._subs: dict[str, Subscription] = {}
        self._barriers: dict[str, asyncio.Future[None]] = {}
        self._results: dict[str, asyncio.Future[Any]] = {}
        self._client_id = ""
        self._connected = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._delay = reconnect_delay

    def listeners_of(self, session_id: str) -> bool:
        """Whether a listener of this session is on the feed (then a turn's end waits for a flush)."""
        return any(s.listener is not None and s.session_id == session_id and not s.closed for s in self._subs.values())

    async def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._pump())
        await self._connected.wait()

    async def channel(self) -> str:
        """The id of the open channel (opening it first if needed)."""
        await self._start()
        return self._client_id

    def expect(self, submission_id: str) -> asyncio.Future[Any]:
        """A future for the result the host will push for ``submission_id`` (``ChannelLost`` if the channel goes)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._results[submission_id] = future
        return future

    def forget(self, submission_id: str) -> None:
        """Stop waiting for a result (its caller reads it another way)."""
        self._results.pop(submission_id, None)

    async def subscribe(self, sub: Subscription) -> None:
        """Put the subscription on the host's channel (stored events after ``sub.last``, then live)."""
        await self._start()
        self._subs[sub.sub_id] = sub
        try:
            while True:
                await self._connected.wait()
                client_id = self._client_id
                try:
                    await self.handle.subscribe.remote(client_id, sub.sub_id, sub.session_id, sub.last)
                    return
                except _DEAD:
                    if client_id == self._client_id and self._connected.is_set():
                        raise  # the host failed the call itself, not a channel the pump is replacing
        except BaseException:
            self._subs.pop(sub.sub_id, None)
            raise

    async def unsubscribe(self, sub: Subscription) -> None:
        """Stop delivering to ``sub``; the host drops it before this returns (best effort if the host is down)."""
        if self._subs.pop(sub.sub_id, None) is None or not self._connected.is_set():
            return
        with contextlib.suppress(*_DEAD):
            await self.handle.unsubscribe.remote(self._client_id, sub.sub_id)

    async def flush(self, session_id: str) -> None:
        """Wait until this session's listeners got everything the host published before now."""
        if not self.listeners_of(session_id) or not self._connected.is_set():
            return
        barrier_id = new_id()
        done = self._barriers[barrier_id] = asyncio.get_running_loop().create_future()
        try:
            await self.handle.barrier.remote(self._client_id, barrier_id)
            await asyncio.wait_for(done, _FLUSH_SECONDS)
        except (*_DEAD, TimeoutError):
            return  # a host failure is not the caller's error; the resubscribed listeners catch up
        finally:
            self._barriers.pop(barrier_id, None)

    async def _keepalive(self, client_id: str) -> None:
        # A failed beat (host down, channel ended) needs nothing here: the stream fails or ends too.
        with contextlib.suppress(Exception):
            while True:
                await asyncio.sleep(KEEPALIVE_SECONDS)
                await self.handle.keepalive.remote(client_id)

    async def _pump(self) -> None:
        while True:
            self._client_id = client_id = new_id()
            stream = self.handle.client_stream.options(num_returns="streaming").remote(client_id)
            beat = asyncio.get_running_loop().create_task(self._keepalive(client_id))
            try:
                for known in list(self._subs.values()):
                    await self.handle.subscribe.remote(client_id, known.sub_id, known.session_id, known.last)
                self._connected.set()
                async for ref in stream:
                    for sub_id, key, event in await ref:
                        if sub_id == RESULT:
                            result = self._results.pop(key, None)
                            if result is not None and not result.done():
                                result.set_result(event)
                        elif sub_id == BARRIER:
                            barrier = self._barriers.get(key)
                            if barrier is not None and not barrier.done():
                                barrier.set_result(None)
                        elif event is not None and (reader := self._subs.get(sub_id)) is not None:
                            reader.deliver(event)
                self._reconnecting()  # the host ended a channel it thought silent: open a new one
            except Exception as exc:
                if not isinstance(exc, _DEAD):  # anything else Ray raises: log it, and still reconnect
                    _log.warning("event channel to a host failed (%r); opening a new one", exc)
                self._reconnecting()
                await asyncio.sleep(self._delay)
            finally:
                beat.cancel()
                with contextlib.suppress(Exception):
                    ray.cancel(stream)

    def _reconnecting(self) -> None:
        self._connected.clear()
        for barrier in self._barriers.values():
            if not barrier.done():
                barrier.set_result(None)  # its channel is gone; the resubscribed listeners catch up
        results, self._results = self._results, {}
        for result in results.values():
            if not result.done():
                result.set_exception(ChannelLost("the event channel to the host was lost"))

    async def close(self) -> None:
        """Cancel the stream (the host then drops this client's subscriptions)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        self._reconnecting()
        self._subs.clear()
