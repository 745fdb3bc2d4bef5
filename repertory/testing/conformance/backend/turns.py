"""Turns: send with every ``if_busy`` policy, follow-ups, ``get_turn`` and ``TurnHandle``."""

from __future__ import annotations

import asyncio

import pytest

from repertory.core.principal import UserMessage
from repertory.errors import ModelError, RepertoryError, RunCancelled, SessionBusy, StepBudgetExceeded
from repertory.runtime.tools import suspend
from repertory.testing.conformance.backend.doubles import Answer, Recorder, Script, history, texts, within
from repertory.testing.conformance.backend.runtimes import BackendSuite, RuntimeFactory

__all__ = ["TurnsConformance"]


class TurnsConformance(BackendSuite):
    """Turns: ``send`` with every ``if_busy`` policy, follow-ups, ``get_turn`` and ``TurnHandle``."""

    async def test_send_returns_a_turn_whose_result_is_the_reply(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        h = await rt.create_session(agent="assistant")
        turn = await h.send("hello")
        assert turn.submission_id
        result = await within(turn.result())
        assert (result.status, result.text) == ("done", "re: hello")
        assert result.state.thread_id == h.id
        assert await turn.status() == "done"
        turn2 = await h.send(UserMessage(text="again"))
        assert (await within(turn2.result())).text == "re: again"
        assert turn2.submission_id != turn.submission_id
        assert texts(await history(rt, h)) == ["hello", "re: hello", "again", "re: again"]

    async def test_turn_status_goes_queued_running_done(self, make_runtime: RuntimeFactory) -> None:
        script = Script()
        first_gate, second_gate = script.hold("first"), script.hold("second")
        rt = await make_runtime(script.agent())
        h = await rt.create_session(agent="assistant")

        first = await h.send("first")
        second = await h.send("second")
        await first_gate.reached()
        assert await first.status() == "running"
        assert await second.status() == "queued"

        first_gate.release()
        await within(first.result())
        await second_gate.reached()
        assert await first.status() == "done"
        assert await second.status() == "running"
        second_gate.release()
        assert (await within(second.result())).text == "re: second"
        assert await second.status() == "done"

    async def test_enqueue_runs_turns_in_order_after_the_running_one(self, make_runtime: RuntimeFactory) -> None:
        script = Script()
        gate = script.hold("t0")
        rt = await make_runtime(script.agent())
        h = await rt.create_session(agent="assistant")

        turns = [await h.send("t0")]
        await gate.reached()
        turns += [await h.send(f"t{i}", if_busy="enqueue") for i in range(1, 5)]
        assert [await t.status() for t in turns] == ["running", "queued", "queued", "queued", "queued"]
        gate.release()
        results = [await within(t.result()) for t in turns]

        assert [r.text for r in results] == [f"re: t{i}" for i in range(5)]
        assert script.prompts() == [f"t{i}" for i in range(5)]  # one request each, in order
        assert texts(await history(rt, h), "user") == [f"t{i}" for i in range(5)]

    async def test_follow_ups_sent_during_a_long_turn_are_delivered_in_order_exactly_once(
        self,
        make_runtime: RuntimeFactory,
    ) -> None:
        # The long turn calls a tool, then waits (at its second model request) for the test's gate.
        script = Script({"long": [{"tool": "work", "args": {}}, {"text": "long done"}]})
        gate = script.hold("long", step=1)
        calls = Recorder()

        def work() -> str:
            calls.append("work")
            return "worked"

        rt = await make_runtime(script.agent(tools=[work]))
        h = await rt.create_session(agent="assistant")
        long = await h.send("long")
        await gate.reached()
        follow = [await h.send(f"follow-up {i}") for i in range(6)]
        gate.release()
        for t in [long, *follow]:
            await within(t.result())

        users = texts(await history(rt, h), "user")
        assert users == ["long"] + [f"follow-up {i}" for i in range(6)]
        for i in range(6):
            assert script.count(f"follow-up {i}") == 1
        assert calls == ["work"]
        # Every request saw each earlier follow-up exactly once.
        last = texts(script.requests[-1])
        assert [t for t in last if t.startswith("follow-up")] == [f"follow-up {i}" for i in range(6)]

    async def test_reject_raises_session_busy_while_a_turn_runs_or_is_queued(
        self, make_runtime: RuntimeFactory
    ) -> None:
        script = Script()
        gate = script.hold("busy")
        rt = await make_runtime(script.agent())
        h = await rt.create_session(agent="assistant")

        idle_turn = await h.send("while idle", if_busy="reject")  # not busy: accepted
        await within(idle_turn.result())

        running = await h.send("busy")
        await gate.reached()
        with pytest.raises(SessionBusy):
            await h.send("rejected while running", if_busy="reject")
        queued_gate = script.hold("queued")
        queued = await h.send("queued")
        gate.release()
        await within(running.result())
        await queued_gate.reached()  # "busy" is over, "queued" is the running one now
        with pytest.raises(SessionBusy):
            await h.send("rejected while the next one runs", if_busy="reject")
        queued_gate.release()
        await within(queued.result())

        after = await h.send("accepted when idle again", if_busy="reject")
        assert (await within(after.result())).text == "re: accepted when idle again"
        assert script.count("rejected while running") == 0
        assert script.count("rejected while the next one runs") == 0
        assert "rejected while running" not in texts(await history(rt, h))
        assert [t.submission_id for t in await rt.store.list_turns(h.id)] == [
            idle_turn.submission_id,
            running.submission_id,
            queued.submission_id,
            after.submission_id,
        ]

    async def test_reject_raises_session_busy_while_a_turn_is_only_queued(self, make_runtime: RuntimeFactory) -> None:
        script = Script()
        gate = script.hold("first")
        rt = await make_runtime(script.agent())
        h = await rt.create_session(agent="assistant")
        first = await h.send("first")
        second = await h.send("second")  # sent before the first request even started: both are busy work
        with pytest.raises(SessionBusy):
            await h.send("third", if_busy="reject")
        await gate.reached()
        gate.release()
        await within(first.result())
        await within(second.result())
        assert script.count("third") == 0

    async def test_interrupt_cancels_the_running_turn_and_runs_the_new_one(self, make_runtime: RuntimeFactory) -> None:
        script = Script()
        gate = script.hold("slow")  # never released: only the interrupt can end this turn
        rt = await make_runtime(script.agent())
        h = await rt.create_session(agent="assistant")

        slow = await h.send("slow")
        await gate.reached()
        urgent = await h.send("urgent", if_busy="interrupt")

        with pytest.raises(RunCancelled):
            await within(slow.result())
        assert await slow.status() == "cancelled"
        assert (await within(urgent.result())).text == "re: urgent"
        assert await urgent.status() == "done"
        slow_run = await rt.store.load_run((await rt.store.load_turn(slow.submission_id)).run_id)  # type: ignore[union-attr]
        assert slow_run is not None and slow_run.status == "cancelled"
        assert "re: slow" not in texts(await history(rt, h))
        assert (await h.metadata()).status == "idle"

    async def test_interrupt_on_an_idle_session_just_runs(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        h = await rt.create_session(agent="assistant")
        turn = await h.send("hi", if_busy="interrupt")
        assert (await within(turn.result())).text == "re: hi"

    async def test_an_unknown_if_busy_policy_is_a_value_error(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(Script().agent())
        h = await rt.create_session(agent="assistant")
        with pytest.raises(ValueError):
            await h.send("hi", if_busy="drop")  # type: ignore[arg-type]
        assert await rt.store.list_turns(h.id) == []

    async def test_get_turn_reacquires_a_turn_from_another_handle(self, make_runtime: RuntimeFactory) -> None:
        script = Script()
        gate = script.hold("slow")
        rt = await make_runtime(script.agent())
        h = await rt.create_session(agent="assistant")
        turn = await h.send("slow")
        await gate.reached()

        other = (await rt.session(h.id)).get_turn(turn.submission_id)
        assert other.submission_id == turn.submission_id
        assert await other.status() == "running"
        waiting = asyncio.ensure_future(other.result())
        gate.release()
        result = await within(waiting)
        assert result.text == "re: slow"
        assert (await h.get_turn(turn.submission_id).result()).run_id == result.run_id
        with pytest.raises(RepertoryError):
            await h.get_turn("no-such-submission").status()

    async def test_cancelling_a_queued_turn_means_it_never_runs(self, make_runtime: RuntimeFactory) -> None:
        script = Script()
        gate = script.hold("first")
        rt = await make_runtime(script.agent())
        h = await rt.create_session(agent="assistant")
        first = await h.send("first")
        doomed = await h.send("doomed")
        last = await h.send("last")
        await gate.reached()

        await within(doomed.cancel())
        assert await doomed.status() == "cancelled"
        gate.release()
        assert (await within(first.result())).text == "re: first"
        assert (await within(last.result())).text == "re: last"
        with pytest.raises(RunCancelled):
            await within(doomed.result())
        assert script.count("doomed") == 0
        assert "doomed" not in texts(await history(rt, h))
        assert await doomed.status() == "cancelled"

    async def test_cancelling_the_running_turn_stops_it_and_the_queue_goes_on(
        self, make_runtime: RuntimeFactory
    ) -> None:
        script = Script()
        gate = script.hold("running")  # never released
        rt = await make_runtime(script.agent())
        h = await rt.create_session(agent="assistant")
        running = await h.send("running")
        after = await h.send("after")
        await gate.reached()

        await within(running.cancel())
        assert await running.status() == "cancelled"
        with pytest.raises(RunCancelled):
            await within(running.result())
        assert (await within(after.result())).text == "re: after"
        assert "re: running" not in texts(await history(rt, h))
        await within(running.cancel())  # cancelling a finished turn changes nothing
        assert await running.status() == "cancelled"
        assert await after.status() == "done"

    async def test_a_failed_turn_raises_its_error_and_the_session_goes_on(self, make_runtime: RuntimeFactory) -> None:
        script = Script({"explode": [ModelError("the model fell over")]})
        rt = await make_runtime(script.agent())
        h = await rt.create_session(agent="assistant")
        turn = await h.send("explode")
        with pytest.raises(ModelError, match="the model fell over"):
            await within(turn.result())
        assert await turn.status() == "error"
        assert (await h.metadata()).status == "error"
        assert (await h.run("recover")).text == "re: recover"
        assert (await h.metadata()).status == "idle"

    async def test_a_turn_over_its_step_budget_raises_step_budget_exceeded(self, make_runtime: RuntimeFactory) -> None:
        def again() -> str:
            """Loop."""
            return "more"

        script = Script({"loop": [{"tool": "again", "args": {}}] * 5})
        rt = await make_runtime(script.agent(tools=[again], max_steps=2))
        h = await rt.create_session(agent="assistant")
        turn = await h.send("loop")
        with pytest.raises(StepBudgetExceeded):
            await within(turn.result())
        assert await turn.status() == "error"
        assert script.count("loop") == 2

    async def test_a_reacquired_turn_keeps_its_output_type(self, make_runtime: RuntimeFactory) -> None:
        script = Script({"city": [{"json": {"city": "Oslo", "population": 1}}]})
        rt = await make_runtime(script.agent())
        h = await rt.create_session(agent="assistant")
        turn = await h.send("city", output=Answer)
        assert (await within(turn.result())).output == Answer(city="Oslo", population=1)
        again = (await rt.session(h.id)).get_turn(turn.submission_id)
        assert (await within(again.result())).output == Answer(city="Oslo", population=1)

    async def test_turn_events_start_with_turn_started_and_end_at_turn_completed(
        self, make_runtime: RuntimeFactory
    ) -> None:
        script = Script({"two": [{"tool": "noop", "args": {}}, {"text": "done two"}]})

        def noop() -> str:
            return "ok"

        rt = await make_runtime(script.agent(tools=[noop]))
        h = await rt.create_session(agent="assistant")
        one = await h.send("one")
        two = await h.send("two")
        await within(two.result())

        for turn in (one, two):
            events = [e async for e in turn.events()]  # ends by itself at turn.completed
            assert events[0].type == "turn.started" and events[-1].type == "turn.completed"
            assert {e.submission_id for e in events} == {turn.submission_id}
            assert [e.type for e in events].count("turn.completed") == 1
            assert events[-1].data["status"] == "done"
        types = [e.type async for e in two.events()]
        assert "tool.call" in types and "tool.result" in types and "checkpoint" in types

    async def test_turn_events_follow_a_turn_that_is_still_running(self, make_runtime: RuntimeFactory) -> None:
        script = Script()
        gate = script.hold("slow")
        rt = await make_runtime(script.agent())
        h = await rt.create_session(agent="assistant")
        turn = await h.send("slow")
        await gate.reached()

        seen: list[str] = []
        first = asyncio.Event()

        async def read() -> list[str]:
            async for e in turn.events():
                seen.append(e.type)
                first.set()
            return seen

        reader = asyncio.ensure_future(read())
        # Deltas are live-only: release the model only once the reader is subscribed. events() subscribes
        # before it replays the stored events, so the first (stored) event in hand means it listens.
        await within(first.wait())
        gate.release()
        types = await within(reader)
        assert types[0] == "turn.started" and types[-1] == "turn.completed"
        assert "text.delta" in types  # live part of the stream

    async def test_concurrent_sends_run_once_each_in_queue_order(self, make_runtime: RuntimeFactory) -> None:
        script = Script()
        gate = script.hold("first")
        rt = await make_runtime(script.agent())
        h = await rt.create_session(agent="assistant")
        first = await h.send("first")
        await gate.reached()
        turns = await asyncio.gather(*(h.send(f"m{i}") for i in range(40)))
        gate.release()
        for t in [first, *turns]:
            await within(t.result())

        queue = [t.submission_id for t in await rt.store.list_turns(h.id)]
        assert sorted(queue[1:]) == sorted(t.submission_id for t in turns)
        by_sub = {t.submission_id: f"m{i}" for i, t in enumerate(turns)} | {first.submission_id: "first"}
        # The turns ran in the order the store queued them (the order a restart would run them in).
        assert script.prompts() == [by_sub[s] for s in queue]
        assert texts(await history(rt, h), "user") == [by_sub[s] for s in queue]

    async def test_reject_policy_on_a_suspended_session_is_accepted_and_supersedes(
        self, make_runtime: RuntimeFactory
    ) -> None:
        def ask_human(question: str) -> str:
            """Ask the person at the keyboard."""
            suspend(reason="need input", payload={"question": question})

        script = Script({"ask": [{"tool": "ask_human", "args": {"question": "?"}}]})
        rt = await make_runtime(script.agent(tools=[ask_human]))
        h = await rt.create_session(agent="assistant")
        asked = await h.send("ask")
        assert (await within(asked.result())).status == "suspended"
        turn = await h.send("moving on", if_busy="reject")  # suspended is not busy
        assert (await within(turn.result())).text == "re: moving on"

    async def test_a_fork_taken_while_a_turn_runs_shares_only_what_was_committed(
        self, make_runtime: RuntimeFactory
    ) -> None:
        def step_tool() -> str:
            """A step."""
            return "stepped"

        script = Script({"long": [{"tool": "step_tool", "args": {}}, {"text": "long done"}]})
        gate = script.hold("long", step=1)
        rt = await make_runtime(script.agent(tools=[step_tool]))
        h = await rt.create_session(agent="assistant")
        turn = await h.send("long")
        await gate.reached()
        head = (await rt.store.load_thread(h.id)).history_revision_id  # type: ignore[union-attr]

        fork = await h.fork()
        assert fork.lineage.forked_at_revision_id == head
        gate.release()
        await within(turn.result())
        assert (await within(fork.run("in the fork"))).text == "re: in the fork"

        fork_texts = texts(await history(rt, fork))
        assert fork_texts[0] == "long" and "long done" not in fork_texts and fork_texts[-1] == "re: in the fork"
        assert "in the fork" not in texts(await history(rt, h))
        assert texts(await history(rt, h))[-1] == "long done"

    async def test_concurrent_reject_sends_on_an_idle_session_accept_only_one(
        self, make_runtime: RuntimeFactory
    ) -> None:
        script = Script()
        gate = script.hold("a")
        gate_b = script.hold("b")
        rt = await make_runtime(script.agent())
        h = await rt.create_session(agent="assistant")
        outcomes = await asyncio.gather(
            h.send("a", if_busy="reject"), h.send("b", if_busy="reject"), return_exceptions=True
        )
        accepted = [o for o in outcomes if not isinstance(o, BaseException)]
        refused = [o for o in outcomes if isinstance(o, BaseException)]
        gate.release()
        gate_b.release()
        for t in accepted:
            await within(t.result())
        # The second send arrives while the first is being queued: one turn, one SessionBusy.
        assert len(accepted) == 1 and len(refused) == 1 and isinstance(refused[0], SessionBusy), outcomes
