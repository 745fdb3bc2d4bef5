"""Passivation: idle session actors leave memory and come back transparently on the next call."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from repertory.runtime.tools import ToolContext, tool
from repertory.testing.conformance.backend.doubles import Script, Sink, collect, completed, history, texts, within
from repertory.testing.conformance.backend.runtimes import BackendSuite, RuntimeFactory

__all__ = ["PassivationConformance"]


@tool(requires_approval=True)
def launch(ctx: ToolContext, target: str) -> str:
    """Launch (needs approval)."""
    return f"launched {target}"


class PassivationConformance(BackendSuite):
    """Idle session actors leave memory and come back transparently on the next call."""

    async def test_passivate_idle_drops_idle_actors_and_the_next_call_reactivates(
        self, make_runtime: RuntimeFactory
    ) -> None:
        script = Script()
        rt = await make_runtime(script.agent(), idle_timeout=60)
        a = await rt.create_session(agent="assistant", title="A")
        b = await rt.create_session(agent="assistant")
        await within(a.run("one"))
        await within(b.run("b one"))
        assert rt.host.resident == 2

        assert rt.host.passivate_idle(0) == 2
        assert rt.host.resident == 0

        meta = await a.metadata()  # reactivated from the store
        assert (meta.title, meta.status) == ("A", "idle")
        assert rt.host.resident == 1
        assert (await within(a.run("two"))).text == "re: two"
        assert texts(script.requests[-1]) == ["one", "re: one", "two"]  # the history came back
        assert texts(await history(rt, a)) == ["one", "re: one", "two", "re: two"]

    async def test_events_continue_with_the_next_seq_after_reactivation(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent(), idle_timeout=60)
        h = await rt.create_session(agent="assistant")
        first = await h.send("one")
        await within(first.result())
        before = await collect(h.events(), completed(first.submission_id))
        assert rt.host.passivate_idle(0) == 1

        second = await h.send("two")
        await within(second.result())
        after = await collect(h.events(after_seq=before[-1].seq or 0), completed(second.submission_id))
        assert after[0].seq == (before[-1].seq or 0) + 1
        seqs = [e.seq for e in before + after]
        assert seqs == list(range(1, len(seqs) + 1))

    async def test_busy_or_watched_actors_are_not_passivated(self, make_runtime: RuntimeFactory) -> None:
        script = Script()
        gate = script.hold("slow")
        rt = await make_runtime(script.agent(), idle_timeout=60)
        busy = await rt.create_session(agent="assistant")
        watched = await rt.create_session(agent="assistant")
        idle = await rt.create_session(agent="assistant")
        await within(idle.run("x"))
        await within(watched.run("x"))

        turn = await busy.send("slow")
        await gate.reached()
        seen = Sink()
        listener = watched.on_progress(seen.append)
        reader_sink = Sink()
        reader = asyncio.ensure_future(collect(watched.events(), lambda e: False, seconds=60, sink=reader_sink))
        await reader_sink.wait_for(lambda e: e.type == "turn.completed")  # the reader is attached
        await within(watched.metadata())

        assert rt.host.passivate_idle(0) == 1  # only the idle one
        assert rt.host.resident == 2

        gate.release()
        await within(turn.result())
        listener.dispose()
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
        assert rt.host.passivate_idle(0) == 2
        assert rt.host.resident == 0

    async def test_a_suspended_session_passivates_and_is_approved_after_reactivation(
        self,
        make_runtime: RuntimeFactory,
    ) -> None:
        script = Script({"go": [{"tool": "launch", "args": {"target": "moon"}}, {"text": "launched"}]})
        rt = await make_runtime(script.agent(tools=[launch]), idle_timeout=60)
        h = await rt.create_session(agent="assistant")
        turn = await h.send("go")
        assert (await within(turn.result())).status == "suspended"
        assert rt.host.passivate_idle(0) == 1

        assert (await h.metadata()).status == "suspended"
        rt.host.passivate_idle(0)
        [pending] = await h.pending_approvals()
        rt.host.passivate_idle(0)
        result = await within(h.approve(pending.token))
        assert (result.status, result.text) == ("done", "launched")
        assert await turn.status() == "done"

    async def test_idle_timeout_passivates_by_itself(self, make_runtime: RuntimeFactory) -> None:
        # Half a second, not less: the reaper looks every idle_timeout / 2, and on a loaded machine the
        # loop can stall for tens of milliseconds between the run's end and the residency check below,
        # long enough for a 50 ms timeout to passivate the session first (the test was flaky on PostgreSQL).
        rt = await make_runtime(Script().agent(), idle_timeout=0.5)
        h = await rt.create_session(agent="assistant")
        await within(h.run("hi"))
        assert rt.host.resident == 1
        # The reaper runs on the clock and offers nothing to await, so this is the one test that polls.
        async with asyncio.timeout(5):
            while rt.host.resident:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        assert (await within(h.run("again"))).text == "re: again"

    async def test_idle_timeout_must_be_positive(self, make_runtime: RuntimeFactory) -> None:
        with pytest.raises(ValueError):
            await make_runtime(Script().agent(), idle_timeout=0)
