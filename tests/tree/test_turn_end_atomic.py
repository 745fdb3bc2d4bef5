"""A turn's end and its ``turn.completed`` event are one write, so no crash can part them.

Found by the chaos soak (issue 26): the driver process was SIGKILLed 19 ms after a worker turn was
written ``done`` and before its ``turn.completed`` was appended in a second write. Nothing
re-drives a finished turn, so that session's log never said the turn ended. This store dies
(as a SIGKILL would) on the write that would carry a ``turn.completed`` apart from its turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from repertory import Agent, Runtime
from repertory.core.tree import SessionEvent
from repertory.storage.memory.store import InMemorySessionStore
from repertory.testing import ScriptedModel


class _Killed(BaseException):
    """Stands for the SIGKILL: nothing after it runs."""


class _DiesOnALoneTurnCompleted(InMemorySessionStore):
    async def append_events(self, events: Sequence[SessionEvent]) -> None:
        if any(e.type == "turn.completed" for e in events):
            raise _Killed("the process died between the turn's end and its event")
        await super().append_events(events)


@pytest.mark.parametrize("prompts", [["hello"], ["one", "two", "three"]])
async def test_every_ended_turn_has_its_turn_completed(prompts: list[str]) -> None:
    store = _DiesOnALoneTurnCompleted()
    agent = Agent(name="a", model=ScriptedModel(lambda messages, tools: {"text": "hi"}))
    async with await Runtime.start(store=store, agents={"a": agent}) as rt:
        handle = await rt.create_session(agent="a")
        turns = [await handle.send(p) for p in prompts]
        async with asyncio.timeout(30):  # with the end written apart, the killed write leaves it waiting
            for turn in turns:
                assert (await turn.result()).status == "done"
        events = await store.load_events(handle.id)
    for turn in turns:
        stored = await store.load_turn(turn.submission_id)
        assert stored is not None and stored.status == "done"
        ends = [e for e in events if e.type == "turn.completed" and e.submission_id == turn.submission_id]
        assert len(ends) == 1
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
