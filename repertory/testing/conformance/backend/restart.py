"""Restart durability: a runtime closed mid-turn leaves its work durable; the next one finishes it exactly once.

A restart is a second runtime on the same store, so these tests need a factory whose data outlives
a runtime (``RuntimeFactory.durable``: a store URL); on any other they skip, saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from repertory.core.tree import SessionEvent
from repertory.runtime.tools import ToolContext, tool
from repertory.testing.conformance.backend.doubles import (
    Answer,
    Gate,
    Recorder,
    Script,
    collect,
    completed,
    entries,
    history,
    texts,
    within,
)
from repertory.testing.conformance.backend.runtimes import BackendSuite, RuntimeFactory

__all__ = ["RestartConformance"]


TOOL_RUNS = Recorder("restart.tool_runs")


def fetch(what: str) -> str:
    """Fetch something (not idempotent)."""
    TOOL_RUNS.append(f"fetch {what}")
    return f"fetched {what}"


@tool(requires_approval=True)
def pay(ctx: ToolContext, amount: int) -> str:
    """Pay (needs approval)."""
    TOOL_RUNS.append(f"pay {amount}")
    return f"paid {amount}"


def _script() -> Script:
    return Script(
        {
            "b1": [{"tool": "fetch", "args": {"what": "data"}}, {"text": "b1 done"}],
            "d0": [{"tool": "pay", "args": {"amount": 7}}, {"text": "d0 done"}],
        }
    )


class RestartConformance(BackendSuite):
    """A runtime closed mid-turn leaves its work durable; the next finishes it exactly once (durable stores only)."""

    @pytest.fixture(autouse=True)
    def _restarts_need_durable_data(self, make_runtime: RuntimeFactory) -> None:
        make_runtime.require_durable()

    async def test_queued_turns_run_exactly_once_after_a_restart(self, make_runtime: RuntimeFactory) -> None:
        first = _script()
        gate_a = first.hold("a0")  # never released: the runtime closes under it
        gate_b = first.hold("b1", step=1)  # mid-run: the tool step is committed, the reply is not
        rt1 = await make_runtime(first.agent(tools=[fetch, pay]))
        a = await rt1.create_session(agent="assistant")
        b = await rt1.create_session(agent="assistant")
        d = await rt1.create_session(agent="assistant")

        await within(b.run("b0"))
        assert (await within(d.run("d0"))).status == "suspended"
        [pending] = await d.pending_approvals()
        a_turns = [await a.send(f"a{i}") for i in range(4)]
        b_turns = [await b.send("b1"), await b.send("b2")]
        await gate_a.reached()
        await gate_b.reached()

        await rt1.close()  # detaches: nothing is cancelled

        store = await make_runtime.open_store()
        try:
            statuses = {t.submission_id: (await store.load_turn(t.submission_id)).status for t in a_turns + b_turns}  # type: ignore[union-attr]
            assert [statuses[t.submission_id] for t in a_turns] == ["running", "queued", "queued", "queued"]
            assert [statuses[t.submission_id] for t in b_turns] == ["running", "queued"]
            a0_turn = await store.load_turn(a_turns[0].submission_id)
            assert a0_turn is not None
            # Stopped in its first model call: nothing of its run is stored yet, the turn row holds its
            # input (a turn's first commit is its first step), so the restart starts the run afresh.
            assert await store.load_run(a0_turn.run_id) is None
        finally:
            await store.close()
        assert TOOL_RUNS == ["fetch data"]

        second = _script()
        rt2 = await make_runtime(second.agent(tools=[fetch, pay]))
        a2, b2, d2 = (await rt2.session(a.id), await rt2.session(b.id), await rt2.session(d.id))
        results = [await within(a2.get_turn(t.submission_id).result()) for t in a_turns]
        results += [await within(b2.get_turn(t.submission_id).result()) for t in b_turns]
        assert [r.status for r in results] == ["done"] * 6
        assert results[0].run_id == a0_turn.run_id  # the interrupted turn finished its own run

        for prompt in ("a0", "a1", "a2", "a3", "b2"):
            assert second.count(prompt) == 1, prompt
        assert second.log.count(("b1", 1)) == 1 and second.count("b1") == 1  # only the missing reply
        assert TOOL_RUNS == ["fetch data"]  # the committed tool step is not run again

        assert texts(await history(rt2, a2), "user") == ["a0", "a1", "a2", "a3"]
        assert texts(await history(rt2, a2), "assistant") == ["re: a0", "re: a1", "re: a2", "re: a3"]
        assert texts(await history(rt2, b2), "user") == ["b0", "b1", "b2"]
        assert texts(await history(rt2, b2), "assistant")[-2:] == ["b1 done", "re: b2"]
        for h in (a2, b2):
            assert (await h.metadata()).status == "idle"

        # The suspended session kept its approval across the restart.
        [again] = await d2.pending_approvals()
        assert again.token == pending.token
        assert (await within(d2.approve(again.token))).text == "d0 done"
        assert TOOL_RUNS == ["fetch data", "pay 7"]

        # Each session's event log stays gap-free across the restart, one turn.completed per turn.
        for h, turns in ((a2, a_turns), (b2, b_turns)):
            log: list[SessionEvent] = await collect(h.events(), completed(turns[-1].submission_id))
            assert [e.seq for e in log] == list(range(1, len(log) + 1))
            done = [e.submission_id for e in log if e.type == "turn.completed"]
            assert len(done) == len(set(done))
            assert {t.submission_id for t in turns} <= set(done)

    async def test_a_turn_sent_just_before_close_runs_after_the_restart(self, make_runtime: RuntimeFactory) -> None:
        script = _script()
        gate = script.hold("first")
        rt1 = await make_runtime(script.agent(tools=[fetch]))
        h = await rt1.create_session(agent="assistant")
        first = await h.send("first")
        last = await h.send("last")  # durable once send() returns
        await gate.reached()
        await rt1.close()

        second = _script()
        rt2 = await make_runtime(second.agent(tools=[fetch]))
        h2 = await rt2.session(h.id)
        assert (await within(h2.get_turn(first.submission_id).result())).text == "re: first"
        assert (await within(h2.get_turn(last.submission_id).result())).text == "re: last"
        assert second.prompts() == ["first", "last"]
        rt3_script = _script()
        await rt2.close()
        rt3 = await make_runtime(rt3_script.agent(tools=[fetch]))  # nothing left open: nothing runs again
        h3 = await rt3.session(h.id)
        assert (await within(h3.run("third"))).text == "re: third"
        assert rt3_script.prompts() == ["third"]
        assert texts(await history(rt3, h3), "user") == ["first", "last", "third"]

    async def test_a_decision_interrupted_by_close_is_finished_after_the_restart(
        self, make_runtime: RuntimeFactory
    ) -> None:
        gate = Gate()

        @tool(requires_approval=True)
        async def slow_pay(ctx: ToolContext, amount: int) -> str:
            """Pay slowly (needs approval)."""
            TOOL_RUNS.append(f"slow_pay {amount}")
            await gate.pass_through()
            return f"paid {amount}"

        plans: dict[str, list[Any]] = {"pay": [{"tool": "slow_pay", "args": {"amount": 3}}, {"text": "pay done"}]}
        rt1 = await make_runtime(Script(plans).agent(tools=[slow_pay]))
        h = await rt1.create_session(agent="assistant")
        turn = await h.send("pay")
        assert (await within(turn.result())).status == "suspended"
        [pending] = await h.pending_approvals()
        approving = asyncio.ensure_future(h.approve(pending.token))
        await gate.reached()  # the approved tool is running
        await rt1.close()
        # Whoever awaited approve() is released by the close (with any outcome), never left hanging.
        await asyncio.wait([approving], timeout=3)
        released = approving.done()
        if released:
            with contextlib.suppress(BaseException):
                approving.result()
        else:
            approving.cancel()

        second = Script(plans)
        rt2 = await make_runtime(second.agent(tools=[slow_pay]))
        h2 = await rt2.session(h.id)
        result = await within(h2.get_turn(turn.submission_id).result())
        assert (result.status, result.text) == ("done", "pay done")
        assert await h2.get_turn(turn.submission_id).status() == "done"
        assert TOOL_RUNS == ["slow_pay 3"]  # not idempotent: never run a second time
        assert (await h2.metadata()).status == "idle"
        assert released, "approve() was still pending after the runtime closed"

    async def test_an_output_type_survives_a_restart(self, make_runtime: RuntimeFactory) -> None:
        plans: dict[str, list[Any]] = {
            "city": [{"text": "Oslo"}, {"json": {"city": "Oslo"}}, {"json": {"city": "Oslo", "population": 9}}],
        }
        first = Script(plans)
        gate = first.hold("hold")
        rt1 = await make_runtime(first.agent())
        h = await rt1.create_session(agent="assistant")
        await h.send("hold")
        turn = await h.send("city", output=Answer)
        await gate.reached()
        await rt1.close()

        second = Script(plans)
        rt2 = await make_runtime(second.agent())
        result = await within((await rt2.session(h.id)).get_turn(turn.submission_id).result())
        assert result.status == "done"
        assert second.count("city") == 3  # validated, with both retries, in the new process
        assert Answer.model_validate_json(result.text or "") == Answer(city="Oslo", population=9)

    async def test_a_reply_cut_off_by_close_is_retracted_before_the_one_asked_again(
        self, make_runtime: RuntimeFactory
    ) -> None:
        plans: dict[str, list[Any]] = {"tell": [{"text": "alpha beta gamma delta epsilon zeta eta theta"}]}
        first = Script(plans)
        gate = first.hold_midway("tell", chunks=8)  # never released: the runtime closes mid-reply
        rt1 = await make_runtime(first.agent())
        h = await rt1.create_session(agent="assistant")
        turn = await h.send("tell")
        await gate.reached()
        seen = await collect(h.events(), lambda e: e.type == "text.delta")  # half the reply is in the log
        cut = seen[-1].data["message_id"]
        await rt1.close()

        second = Script(plans)
        rt2 = await make_runtime(second.agent())
        h2 = await rt2.session(h.id)
        result = await within(h2.get_turn(turn.submission_id).result())
        assert (result.status, result.text) == ("done", "alpha beta gamma delta epsilon zeta eta theta")

        # A reader that had the cut-off half reconnects: first it hears the half will never be
        # completed, then it gets the reply asked again, whole, under the id the history has.
        after = await collect(h2.events(after_seq=seen[-1].seq or 0), completed(turn.submission_id))
        retracted = [i for i, e in enumerate(after) if e.type == "reply.retracted"]
        assert len(retracted) == 1 and after[retracted[0]].data["message_ids"] == [cut]
        fresh = [e for e in after[retracted[0] :] if e.type == "text.delta"]
        assert "".join(e.data["text"] for e in fresh) == result.text
        assert not [e for e in after[: retracted[0]] if e.type == "text.delta"]
        [(reply_id, _)] = [(i, m) for i, m in await entries(rt2, h2) if m.role == "assistant"]
        assert {e.data["message_id"] for e in fresh} == {reply_id} != {cut}
