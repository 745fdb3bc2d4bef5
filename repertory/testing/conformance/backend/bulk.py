"""Bulk calls: ``Runtime.create_sessions`` and ``Runtime.send_many`` (one Ray call per host per chunk)."""

from __future__ import annotations

import pytest

from repertory.errors import RepertoryError
from repertory.testing.conformance.backend.doubles import Script, history, texts, within
from repertory.testing.conformance.backend.runtimes import BackendSuite, RuntimeFactory

__all__ = ["BulkConformance"]


class BulkConformance(BackendSuite):
    """``Runtime.create_sessions`` and ``Runtime.send_many``: bulk calls that keep the single calls' guarantees."""

    async def test_create_sessions_makes_that_many_distinct_working_roots(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        handles = await rt.create_sessions("assistant", 25, title="batch")
        assert len({h.id for h in handles}) == 25
        for h in handles[:3]:
            record = await rt.store.load_session(h.id)
            assert record is not None and record.title == "batch" and record.lineage.kind == "root"
            assert (await within(h.run("hi"))).text == "re: hi"
        assert await rt.create_sessions("assistant", 0) == []

    async def test_create_sessions_refuses_an_unknown_agent_and_creates_nothing(
        self, make_runtime: RuntimeFactory
    ) -> None:
        rt = await make_runtime(Script().agent())
        with pytest.raises(RepertoryError, match="no agent named 'ghost'"):
            await rt.create_sessions("ghost", 3)
        with pytest.raises(ValueError):
            await rt.create_sessions("assistant", -1)

    async def test_send_many_queues_one_durable_turn_per_session(self, make_runtime: RuntimeFactory) -> None:
        script = Script()
        rt = await make_runtime(script.agent())
        handles = await rt.create_sessions("assistant", 12)
        busy = handles[0]
        gate = script.hold("first")
        running = await busy.send("first")
        await gate.reached()
        turns = await rt.send_many([(h, f"hello {i}") for i, h in enumerate(handles)])
        assert [t.session_id for t in turns] == [h.id for h in handles]
        assert len({t.submission_id for t in turns}) == 12
        assert await turns[0].status() == "queued"  # enqueued behind the running turn, not rejected
        gate.release()
        await within(running.result())
        results = [await within(t.result()) for t in turns]
        assert [r.text for r in results] == [f"re: hello {i}" for i in range(12)]
        assert texts(await history(rt, busy), "user") == ["first", "hello 0"]
        for i in range(12):
            assert script.count(f"hello {i}") == 1
