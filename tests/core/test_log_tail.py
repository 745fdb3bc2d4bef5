"""``repertory.core.log_tail``: a session's log read from its end, past page boundaries, within bounds."""

from __future__ import annotations

from repertory import InMemorySessionStore
from repertory.core.log_tail import newest_first, turn_start
from repertory.core.tree import SessionEvent


def _event(seq: int, type: str = "tool.call", sub: str | None = None) -> SessionEvent:
    return SessionEvent(session_id="s", seq=seq, type=type, submission_id=sub)


async def _store(events: list[SessionEvent]) -> InMemorySessionStore:
    store = InMemorySessionStore()
    await store.append_events(events)
    return store


async def test_newest_first_pages_back_across_page_boundaries_and_stops_at_its_bounds() -> None:
    store = await _store([_event(i) for i in range(1, 601)])  # past two pages
    assert [e.seq async for e in newest_first(store, "s")] == list(range(600, 0, -1))
    assert [e.seq async for e in newest_first(store, "s", before=300, limit=3)] == [299, 298, 297]
    assert [e.seq async for e in newest_first(store, "other")] == []


async def test_turn_start_is_before_the_turns_first_event_of_the_commit_that_started_it() -> None:
    events = [_event(1, "turn.started", "a"), _event(2, "turn.completed", "a")]
    # b's first commit: its checkpoint, then its turn.started; then 500 events of b and one of a queued c.
    events += [_event(3, "checkpoint", "b"), _event(4, "turn.started", "b")]
    events += [_event(i, "text.delta", "b") for i in range(5, 505)] + [_event(505, "notification", "c")]
    store = await _store(events)
    assert await turn_start(store, "s", "b") == 2
    assert await turn_start(store, "s", "a") == 0
    assert await turn_start(store, "s", "c") is None  # never started
