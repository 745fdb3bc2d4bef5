"""Reading a session's event log from its newest event back: what a reader looks for is near the end.

A reconnecting client wants where the running turn started, a recovered run the replies it
streamed after its last checkpoint, a page loaded mid-reply where that reply began: each is a
few events from the end of a log that may hold millions. ``newest_first`` pages backwards
(``TreeStore.load_events`` by seq ranges) and stops where its caller stops reading.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from repertory.core.store import TreeStore
from repertory.core.tree import SessionEvent

__all__ = ["newest_first", "turn_start"]

_PAGE = 256


async def newest_first(
    store: TreeStore, session_id: str, *, before: int | None = None, limit: int | None = None
) -> AsyncIterator[SessionEvent]:
    """The session's stored events, newest first, from ``before`` (exclusive; the log's end) down, at most ``limit``."""
    high = await store.last_event_seq(session_id) if before is None else before - 1
    read = 0
    while high > 0 and (limit is None or read < limit):
        low = max(high - _PAGE, 0)
        page = await store.load_events(session_id, after_seq=low, limit=high - low)
        for event in reversed(page):
            read += 1
            yield event
            if limit is not None and read >= limit:
                return
        high = low


async def turn_start(store: TreeStore, session_id: str, submission_id: str) -> int | None:
    """The seq just before the turn's first event (a replay from there shows the whole turn); ``None``: not started.

    The first event is its ``turn.started`` or, when the turn's first commit carried it, the events
    of that commit before it (its checkpoint): the turn's events right before ``turn.started``.
    """
    start: int | None = None
    async for event in newest_first(store, session_id):
        if event.seq is None:
            continue
        if start is not None:
            if event.submission_id != submission_id:
                return start
            start = event.seq - 1
        elif event.type == "turn.started" and event.submission_id == submission_id:
            start = event.seq - 1
    return start
