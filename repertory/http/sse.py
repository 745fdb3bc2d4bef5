"""Server-sent events for a run: framing, resumable ids, and the loop that follows a run to rest.

Event ids are ``<seq>-<n>``: the n-th part derived from the session event with that ``seq``
(live deltas continue the numbering of the last durable event before them; ``metadata`` is
``<start>-0``). A client that reconnects with ``Last-Event-ID: s-n`` gets the parts of event
``s`` after the n-th and everything after that, rebuilt from the durable log, so nothing durable
is lost or repeated, the stored text deltas included. An agent that keeps its deltas live-only
(``delta_window=None``) sends them without a seq: after a reconnect their text arrives in the
complete message of the next checkpoint.

A stream ends (``end``) when its run is at rest: done, failed, cancelled, or waiting for a human.
"""

from __future__ import annotations

import asyncio
import collections
import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.responses import StreamingResponse

from repertory.core.store import TreeStore
from repertory.core.tree import SessionEvent
from repertory.http.errors import HttpError
from repertory.http.modes import StreamConverter
from repertory.tree.handle import SessionHandle

__all__ = ["EventFeed", "SlotStream", "frame", "parse_last_event_id", "run_events"]

HEARTBEAT_S = 15.0
_LAST_ID = re.compile(r"^(\d{1,18})-(\d{1,9})$")


class SlotStream(StreamingResponse):
    """A server-sent events response that gives its stream slot back however it ends (even unstarted).

    Every stream of every protocol holds one of its key's slots (``StreamSlots``); ``release``
    gives it back. ``media_type`` and ``headers`` are the protocol's; ``Cache-Control: no-store``
    and ``X-Accel-Buffering: no`` (no proxy buffering) unless it says otherwise.
    """

    def __init__(
        self,
        body: AsyncIterator[bytes],
        release: Callable[[], None],
        headers: dict[str, str] | None = None,
        media_type: str = "text/event-stream",
    ) -> None:
        merged = {"cache-control": "no-store", "x-accel-buffering": "no"}
        merged.update((k.lower(), v) for k, v in (headers or {}).items())
        super().__init__(body, media_type=media_type, headers=merged)
        self._release = release

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Stream, then give the slot back."""
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


def frame(event: str, data: Any, event_id: str | None = None) -> bytes:
    """One SSE message (compact JSON keeps the data on one line)."""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    head = f"event: {event}\ndata: {body}\n"
    return (head + (f"id: {event_id}\n" if event_id is not None else "") + "\n").encode()


def parse_last_event_id(value: str | None) -> tuple[int, int] | None:
    """``Last-Event-ID`` as ``(seq, n)``; 422 if it is not an id this server sent."""
    if value is None or value == "":
        return None
    match = _LAST_ID.match(value.strip())
    if match is None:
        raise HttpError(f"Last-Event-ID {value!r} is not an event id of this server ('<seq>-<n>')", status=422)
    return int(match[1]), int(match[2])


class EventFeed:
    """A session's events after a seq: stored ones, then live ones, with no gap and no repeat.

    The progress listener is registered before the stored events are read, so an event committed
    in between arrives twice and is dropped the second time by its seq. Seqs are gap-free, so a
    live event that skips ahead means the listener missed some (a remote host's listener starts
    a moment late): they are read back from the store. ``catch_up`` does the same for a tail
    that no later event would reveal.
    """

    def __init__(self, handle: SessionHandle, store: TreeStore, after_seq: int) -> None:
        self._handle = handle
        self._store = store
        self.last_seq = after_seq
        self._backlog: collections.deque[SessionEvent] = collections.deque()
        self._queue: asyncio.Queue[SessionEvent] = asyncio.Queue()
        self._dispose: Callable[[], None] | None = None

    async def open(self) -> EventFeed:
        """Start listening, then read what is already stored."""
        self._dispose = self._handle.on_progress(self._queue.put_nowait).dispose
        self._backlog.extend(await self._store.load_events(self._handle.id, self.last_seq))
        return self

    def close(self) -> None:
        """Stop listening (idempotent)."""
        if self._dispose is not None:
            self._dispose()
            self._dispose = None

    async def catch_up(self) -> None:
        """Read the stored tail now: events the listener queued keep their place, the store follows."""
        while not self._queue.empty():
            self._backlog.append(self._queue.get_nowait())
        self._backlog.extend(await self._store.load_events(self._handle.id, self.last_seq))

    async def get(self) -> SessionEvent:
        """The next new event."""
        while True:
            event = self._backlog.popleft() if self._backlog else await self._queue.get()
            if event.seq is None:
                return event
            if event.seq <= self.last_seq:
                continue
            if event.seq > self.last_seq + 1:
                # Seqs have no gaps: the listener missed these, and the store has them.
                stored = await self._store.load_events(self._handle.id, self.last_seq)
                missing = [e for e in stored if e.seq is not None and e.seq < event.seq]
                if missing:
                    self._backlog.extendleft(reversed([*missing, event]))
                    continue
            self.last_seq = event.seq
            return event


async def run_events(
    feed: EventFeed,
    converter: StreamConverter,
    *,
    submission_id: str,
    rest: Callable[[], Any],
    final_seq: Callable[[], Any],
    failure: Callable[[], BaseException | None],
    resume_from: tuple[int, int] | None,
    run_id: str,
) -> AsyncIterator[bytes]:
    """The SSE bytes of one run, from the feed's position until the run is at rest.

    ``rest()`` waits until the run rests; ``final_seq()`` is then the last seq it can have written;
    ``failure()`` names a failure outside the event log (decisions that could not be applied).
    """
    group, n = feed.last_seq, 0
    if resume_from is None:
        yield frame("metadata", {"run_id": run_id, "attempt": 1}, f"{group}-0")
    resting: asyncio.Task[Any] = asyncio.ensure_future(rest())
    getting: asyncio.Task[SessionEvent] | None = None
    last: int | None = None
    rest_error: BaseException | None = None
    try:
        while last is None or feed.last_seq < last:
            if getting is None:
                getting = asyncio.ensure_future(feed.get())
            waiting: set[asyncio.Future[Any]] = {getting} if last is not None else {getting, resting}
            done, _ = await asyncio.wait(waiting, timeout=HEARTBEAT_S, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                yield b": heartbeat\n\n"
                continue
            if last is None and resting.done():
                rest_error = None if resting.cancelled() else resting.exception()
                last = await final_seq()
                # Everything up to ``last`` is stored: read the rest from there, not from a listener.
                await feed.catch_up()
                if not getting.done():
                    getting.cancel()
                    getting = None
                    continue
            if not getting.done():
                continue
            event, getting = getting.result(), None
            if event.seq is not None:
                group, n = event.seq, 0
            if event.submission_id != submission_id:
                continue
            for name, data in await converter.convert(event):
                n += 1
                if resume_from is not None and group == resume_from[0] and n <= resume_from[1]:
                    continue  # the client had this part before it reconnected
                yield frame(name, data, f"{group}-{n}")
        error = failure() or rest_error
        if error is not None:
            n += 1
            yield frame("error", {"error": type(error).__name__, "message": str(error)}, f"{group}-{n}")
        yield frame("end", None, f"{group}-{n + 1}")
    finally:
        # Not awaited: this may run inside a cancellation, which awaiting here could swallow.
        for task in (getting, resting):
            if task is not None and not task.done():
                task.cancel()
        feed.close()
