"""``GET /threads/{thread_id}/events``: repertory's own event stream of a session, as server-sent events.

The run streams speak LangGraph (``values``, ``messages``, ...); this route carries what a
repertory client wants instead: every ``SessionEvent`` of the thread (``turn.started``,
``tool.call``, ``approval.requested``, ``checkpoint``, ``turn.completed``, the text and
reasoning deltas, ...). Each SSE message is named after the event type and holds the event as
JSON; a durable event's SSE id is its ``seq``, so a client that reconnects with
``Last-Event-ID: <seq>`` (or ``?after_seq=<seq>``) gets everything after it, with no gap and no
repeat: the text and reasoning deltas too (stored, coalesced, by the agent's ``delta_window``), so
a reader that reconnects mid-reply, also after a server restart, gets exactly the text it missed,
and a ``reply.retracted`` event names a partial reply that will never be completed. An agent
without a delta window sends its deltas live only, without an id. The stream follows the session until the client
goes away (a comment line every 15 seconds keeps proxies from closing it) and counts against the
key's open-stream limit.
"""

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import StreamingResponse

from repertory.core.tree import SessionEvent
from repertory.http.auth import Caller, StreamSlots
from repertory.http.docs import SSE
from repertory.http.errors import HttpError
from repertory.http.gateway import Gateway
from repertory.http.sse import HEARTBEAT_S, EventFeed, SlotStream, frame

__all__ = ["MAX_SEQ", "event_routes"]

MAX_SEQ = 2**63 - 1
"""The largest event seq a store holds (a signed 64-bit integer): ``after_seq`` above it is 422, not a 500."""


def _after(after_seq: int | None, last_event_id: str | None) -> int:
    if last_event_id:
        value = last_event_id.strip()
        if not value.isdigit() or len(value) > 18:
            raise HttpError(f"Last-Event-ID {last_event_id!r} is not an event seq of this route", status=422)
        return int(value)
    return after_seq or 0


def event_routes(gw: Gateway, slots: StreamSlots, auth: Callable[..., Awaitable[Caller]]) -> APIRouter:
    """The event route, bound to one gateway."""
    router = APIRouter(tags=["threads"])
    CallerDep = Annotated[Caller, Depends(auth)]

    @router.get(
        "/threads/{thread_id}/events",
        responses=SSE,
        summary="The thread's session events (repertory's own stream), stored then live; Last-Event-ID resumes",
    )
    async def thread_events(
        thread_id: str,
        caller: CallerDep,
        after_seq: Annotated[int | None, Query(ge=0, le=MAX_SEQ)] = None,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    ) -> StreamingResponse:
        after = _after(after_seq, last_event_id)
        record = await gw.record(thread_id, caller)
        handle = await gw.runtime.session(record.session_id, caller.principal)
        slots.take(caller.who)
        try:
            feed = await EventFeed(handle, gw.store, after).open()
        except BaseException:
            slots.give_back(caller.who)
            raise

        async def body() -> AsyncIterator[bytes]:
            getting: asyncio.Task[SessionEvent] | None = None
            try:
                while True:
                    if getting is None:
                        getting = asyncio.ensure_future(feed.get())
                    done, _ = await asyncio.wait({getting}, timeout=HEARTBEAT_S)
                    if not done:
                        yield b": heartbeat\n\n"
                        continue
                    event, getting = getting.result(), None
                    ident = None if event.seq is None else str(event.seq)
                    yield frame(event.type, event.model_dump(mode="json"), ident)
            finally:
                if getting is not None and not getting.done():
                    getting.cancel()
                feed.close()

        return SlotStream(body(), lambda: slots.give_back(caller.who))

    return router
