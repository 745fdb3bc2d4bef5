"""A small load test: many sessions, each with a follow-up queued behind its first turn, all at once.

It checks correctness under concurrency, never speed (two hundred sessions: a backend whose
sessions each cost a process may run it apart, as a slow test).
"""

from __future__ import annotations

import asyncio

from repertory.runtime.agent import Agent
from repertory.testing.conformance.backend.doubles import Script, history, texts
from repertory.testing.conformance.backend.runtimes import BackendSuite, RuntimeFactory

__all__ = ["LoadConformance"]


SESSIONS = 200


class LoadConformance(BackendSuite):
    """Many sessions, each with a follow-up queued behind its first turn, all at once: correct under concurrency."""

    async def test_two_hundred_sessions_each_running_two_turns_concurrently(self, make_runtime: RuntimeFactory) -> None:
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
