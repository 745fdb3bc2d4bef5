"""A small load test: many sessions, each with a follow-up queued behind its first turn, all at once.

Marked ``slow`` but part of ``make test``; it checks correctness under concurrency, never speed.
"""

from __future__ import annotations

import asyncio

import pytest

from repertory import Agent
from tests.handles.conftest import RuntimeFactory
from tests.handles.helpers import Script, history, texts

SESSIONS = 200


@pytest.mark.stores("sqlite")  # its ray-sqlite instance is slow (conftest RAY_IN_SUITE)
@pytest.mark.timeout(60)
async def test_two_hundred_sessions_each_running_two_turns_concurrently(make_runtime: RuntimeFactory) -> None:
    script = Script()
    # A small model latency makes every turn yield mid-run, so the 400 turns really interleave.
    rt = await make_runtime(Agent(name="assistant", model=script.model(delay=0.002)))
    sessions = await asyncio.gather(*(rt.create_session(agent="assistant", title=f"s{i}") for i in range(SESSIONS)))

    async def two_turns(i: int) -> list[str | None]:
        h = sessions[i]
        first = await h.send(f"s{i} first")
        second = await h.send(f"s{i} second")  # queued behind the first
        return [(await first.result()).text, (await second.result()).text]

    async with asyncio.timeout(30):
        replies = await asyncio.gather(*(two_turns(i) for i in range(SESSIONS)))

    assert replies == [[f"re: s{i} first", f"re: s{i} second"] for i in range(SESSIONS)]
    assert len(script.log) == 2 * SESSIONS
    assert sorted(script.prompts()) == sorted(f"s{i} {w}" for i in range(SESSIONS) for w in ("first", "second"))
    for i in (0, SESSIONS // 2, SESSIONS - 1):
        assert texts(await history(rt, sessions[i])) == [
            f"s{i} first",
            f"re: s{i} first",
            f"s{i} second",
            f"re: s{i} second",
        ]
    statuses = await asyncio.gather(*(h.metadata() for h in sessions))
    assert {m.status for m in statuses} == {"idle"}
    assert len({h.id for h in sessions}) == SESSIONS
