"""The session page's live feed: its events as server-sent events, resumable after a reconnect.

A page is rendered at the session's last event seq ``n`` and opens ``live?after=m``, where ``m``
is ``n`` or, while a reply is being written, the seq before its first delta (``reply_start``): a
page loaded mid-reply shows the partial text at once. Stored events carry ``id: <seq>``, so when
the connection drops the browser's ``EventSource`` reconnects with ``Last-Event-ID`` and the
stream goes on after the last event it had, read back from the store (``EventFeed``: nothing
lost, nothing repeated). Deltas are stored too (an agent's ``delta_window``); an agent that keeps
them live-only sends them without an id, and text lost in a reconnect arrives whole with the next
checkpoint.

What the page receives (each ``data`` one line of JSON):

- ``delta`` / ``reasoning``: ``{"text": ...}`` as the model writes;
- ``retract``: ``{}``, the reply being written will never be completed (the server died, the run
  was cancelled or failed mid-reply): the page drops its partial text;
- ``items``: ``{"html": ...}``, the messages a checkpoint added, rendered like the page renders
  them (the page skips those it already shows, by element id);
- ``status``: ``{"type": ..., "rest": bool}``; at rest (a turn completed, the run suspended) the
  page reloads its panel and what of the conversation may have changed: the messages from the
  first one still open (a call without its result, an approval waiting) on, so results sit with
  their calls again (``/conversation?after=<the last settled revision>``), never the whole;
- ``refused``: ``{"message": ...}``, the only event, when the viewer's key already holds its
  ``max_streams_per_key`` open streams (the API's and the UI's count together): the page says so
  and stops; the stream ends at once and asks a reconnecting client to wait a minute.

A comment line every ``HEARTBEAT_S`` keeps proxies from closing an idle stream.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi.responses import StreamingResponse

from repertory.core.log_tail import newest_first
from repertory.core.store import TreeStore
from repertory.core.tree import SessionEvent
from repertory.http.sse import EventFeed
from repertory.http.ui.conversation import conversation
from repertory.tree.handle import SessionHandle

__all__ = ["HEARTBEAT_S", "live_events", "refused", "reply_start", "resume_point"]

HEARTBEAT_S = 15.0
_REST = {"turn.completed", "run.suspended"}
_DELTAS = {"text.delta", "reasoning.delta"}
_REPLY_BOUNDS = {"checkpoint", "turn.started", "reply.retracted"}
_BACK_LIMIT = 4096  # events read back at most: a reply streamed longer shows from there on


_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


def refused(message: str) -> StreamingResponse:
    """The stream a viewer gets past its key's stream bound: one ``refused`` event, then the end."""

    async def once() -> AsyncIterator[bytes]:
        yield b"retry: 60000\n\n" + _frame("refused", {"message": message})

    return StreamingResponse(once(), media_type="text/event-stream", headers=_HEADERS)


def resume_point(last_event_id: str | None, after: int) -> int:
    """Where a stream starts: after the ``Last-Event-ID`` a reconnecting browser sends, else after ``after``."""
    if last_event_id is not None and last_event_id.strip().isdigit():
        return int(last_event_id.strip())
    return max(after, 0)


async def reply_start(store: TreeStore, session_id: str, last_seq: int) -> int:
    """Where a page's live feed starts: ``last_seq``, or before the deltas of the reply being written.

    Read back from the end of the log to the last checkpoint, turn start or retraction: the
    deltas after it are a reply the history does not hold yet, and replaying them shows its
    partial text on a page loaded mid-reply. Without such deltas the feed starts at ``last_seq``.
    """
    bound: int | None = None  # before the earliest delta seen so far
    async for event in newest_first(store, session_id, before=last_seq + 1, limit=_BACK_LIMIT):
        if event.type in _REPLY_BOUNDS:
            break
        if event.type in _DELTAS and event.seq is not None:
            bound = event.seq - 1
    return last_seq if bound is None else bound


def _frame(event: str, data: Any, seq: int | None = None) -> bytes:
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return (f"event: {event}\ndata: {body}\n" + (f"id: {seq}\n" if seq is not None else "") + "\n").encode()


async def live_events(
    handle: SessionHandle, store: TreeStore, after: int, render_items: Callable[[list[Any]], str]
) -> AsyncIterator[bytes]:
    """The page's event stream from ``after`` on, until the browser goes away."""
    feed = await EventFeed(handle, store, after).open()
    try:
        yield b"retry: 1000\n\n"
        while True:
            try:
                event = await asyncio.wait_for(feed.get(), timeout=HEARTBEAT_S)
            except TimeoutError:
                yield b": heartbeat\n\n"
                continue
            for chunk in await _convert(event, store, handle.id, render_items):
                yield chunk
    finally:
        feed.close()


async def _convert(
    event: SessionEvent, store: TreeStore, session_id: str, render_items: Callable[[list[Any]], str]
) -> list[bytes]:
    if event.type == "text.delta":
        return [_frame("delta", {"text": event.data.get("text", "")}, event.seq)]
    if event.type == "reasoning.delta":
        return [_frame("reasoning", {"text": event.data.get("text", "")}, event.seq)]
    if event.type == "reply.retracted":
        return [_frame("retract", {}, event.seq)]
    out: list[bytes] = []
    if event.type == "checkpoint":
        head = event.data.get("history_revision_id")
        base = event.data.get("base_revision_id")
        history = await store.load_history(head) if isinstance(head, str) else None
        if history is not None and head != base:
            runs = await store.list_runs(session_id, limit=1)
            items = conversation(history, runs, since_revision=base if isinstance(base, str) else None)
            if items:
                out.append(_frame("items", {"html": render_items(items)}, event.seq))
    if not out:
        out.append(_frame("status", {"type": event.type, "rest": event.type in _REST}, event.seq))
    elif event.type in _REST:
        out.append(_frame("status", {"type": event.type, "rest": True}))
    return out
