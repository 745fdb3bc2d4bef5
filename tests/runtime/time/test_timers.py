"""Timers inside tools: ``repertory.sleep`` suspends a run, and the runtime wakes it exactly once.

Every test moves a ``ManualClock`` and then awaits what must follow; nothing sleeps. Covered: the
wake and the result the model reads, an overdue timer at start (a restart, and a SIGKILL), two
runtimes on one store (one wake), a human resuming early with the token, cancelling a sleeping run,
racing wakes of one token, bad arguments, and two naps in one step.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from repertory import (
    Agent,
    InMemorySessionStore,
    InvalidResumeToken,
    MessageHistory,
    Runtime,
    Session,
    SqliteSessionStore,
    WrongSuspensionKind,
    sleep,
    tool,
)
from repertory.testing import ManualClock, ScriptedModel
from tests.runtime.time.helpers import (
    HOUR,
    after_event,
    messages_of,
    nap_agent,
    quiet_after,
    timed,
    tool_results,
    until,
    within,
)

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(params=["memory", "sqlite"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    yield "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'time.db'}"


def completed(event: object) -> bool:
    return getattr(event, "type", None) == "turn.completed"


async def test_a_timer_wakes_its_run_once_at_wake_at(store_url: str) -> None:
    clock = ManualClock()
    store = InMemorySessionStore() if store_url == "memory://" else store_url
    async with await Runtime.start(store, agents={"napper": nap_agent()}, clock=clock) as rt:
        h = await rt.create_session("napper")
        start = clock.now_ms()
        result = await h.run("nap")
        assert result.status == "suspended"
        on = result.state.suspended_on
        assert on is not None and on.kind == "timer" and on.wake_at == start + 3_600_000
        assert "wake_at" not in on.model_dump(exclude={"wake_at"}) and on.model_dump()["wake_at"] == on.wake_at
        (timer,) = await timed(rt).list_timers()
        assert (timer.run_id, timer.session_id, timer.token, timer.wake_at) == (
            result.run_id,
            h.id,
            on.token,
            on.wake_at,
        )
        events = [e for e in await rt.store.load_events(h.id) if e.type == "run.suspended"]
        assert events[-1].data["kind"] == "timer" and events[-1].data["wake_at"] == on.wake_at
        assert "token" not in str(events[-1].data)
        # While it sleeps, the call has no result: it is answered when it wakes.
        assert tool_results(await messages_of(rt, h.id)) == []
        seq = await rt.store.last_event_seq(h.id)
        await quiet_after(rt, lambda: clock.advance(HOUR - 0.001))  # a millisecond early: not due
        assert (await rt.store.load_run(result.run_id)).status == "suspended"  # type: ignore[union-attr]
        clock.advance(0.001)
        await after_event(h, seq, completed)
        messages = await messages_of(rt, h.id)
        assert tool_results(messages) == ["woke at 2026-01-01T01:00:00.000Z (it was set for 2026-01-01T01:00:00.000Z)"]
        assert messages[-1].text == "awake"
        run = await rt.store.load_run(result.run_id)
        assert run is not None and run.status == "done" and run.suspended_on is None
        await until(lambda: _no_timers(rt))
        await quiet_after(rt, lambda: clock.advance(10 * HOUR))  # nothing more happens
        assert (await messages_of(rt, h.id))[-1].text == "awake"


async def _no_timers(rt: Runtime) -> bool:
    return not await timed(rt).list_timers()


async def test_an_overdue_timer_fires_when_a_runtime_starts(tmp_path: Path) -> None:
    url, clock = f"sqlite:///{tmp_path / 'restart.db'}", ManualClock()
    async with await Runtime.start(url, agents={"napper": nap_agent()}, clock=clock) as rt:
        h = await rt.create_session("napper")
        result = await h.run("nap")
        assert result.status == "suspended"
    clock.advance(5 * HOUR)  # nothing ran while the timer came due
    async with await Runtime.start(url, agents={"napper": nap_agent()}, clock=clock) as rt:
        h = await rt.session(h.id)
        await until(lambda: _run_done(rt, result.run_id))
        messages = await messages_of(rt, h.id)
        assert tool_results(messages) == ["woke at 2026-01-01T05:00:00.000Z (it was set for 2026-01-01T01:00:00.000Z)"]
        assert messages[-1].text == "awake"


async def _run_done(rt: Runtime, run_id: str) -> bool:
    run = await rt.store.load_run(run_id)
    return run is not None and run.status == "done"


async def test_two_runtimes_on_one_store_wake_a_timer_exactly_once(tmp_path: Path) -> None:
    url, clock = f"sqlite:///{tmp_path / 'two.db'}", ManualClock()
    calls: list[str] = []
    agents = {"napper": nap_agent(calls=calls)}
    async with (
        await Runtime.start(url, agents=agents, clock=clock, poll_interval=1) as one,
        await Runtime.start(url, agents=agents, clock=clock, poll_interval=1) as two,
    ):
        handles = [await one.create_session("napper") for _ in range(6)]
        results = await asyncio.gather(*(h.run("nap") for h in handles))
        assert {r.status for r in results} == {"suspended"}
        clock.advance(HOUR)
        for r in results:
            await until(lambda r=r: _run_done(one, r.run_id))  # type: ignore[misc]
        for h in handles:
            messages = await messages_of(one, h.id)
            assert len(tool_results(messages)) == 1, tool_results(messages)
            assert [m.text for m in messages if m.role == "assistant" and m.text] == ["awake"]
        keepers = [k.timekeeper for k in (one.host, two.host)]  # type: ignore[attr-defined]
        # A keeper counts a wake once the woken run has rested, which its commits precede: wait for
        # the count, then hold it to exactly one taker per timer.
        await until(lambda: sum(k.woken for k in keepers) >= 6)
        woken = [k.woken for k in keepers]
        assert sum(woken) == 6, woken  # each timer was taken by one runtime (the claim), once
        assert calls == ["nap"] * 6  # the sleeping tool itself ran once per session
        await until(lambda: _no_timers(one))


async def test_racing_wakes_of_one_token_let_exactly_one_through() -> None:
    store = InMemorySessionStore()
    agent = nap_agent()
    sess = Session(store=store, agent=agent)
    result = await sess.start("nap")
    on = result.state.suspended_on
    assert on is not None and on.kind == "timer"
    others = [Session(store=store, agent=agent) for _ in range(4)]
    for other in others:
        other.adopt_state(await store.load_run(result.run_id))
    outcomes = await asyncio.gather(*(o.wake(on.token) for o in others), return_exceptions=True)
    assert sum(not isinstance(o, BaseException) for o in outcomes) == 1, outcomes
    assert all(isinstance(o, InvalidResumeToken) for o in outcomes if isinstance(o, BaseException))
    run = await store.load_run(result.run_id)
    assert run is not None and run.status == "done"
    with pytest.raises(InvalidResumeToken):
        await sess.resume(on.token, "late")


async def test_a_human_may_wake_a_timer_early_with_its_token(store_url: str) -> None:
    clock = ManualClock()
    store = InMemorySessionStore() if store_url == "memory://" else store_url
    async with await Runtime.start(store, agents={"napper": nap_agent()}, clock=clock) as rt:
        h = await rt.create_session("napper")
        result = await h.run("nap")
        on = result.state.suspended_on
        assert on is not None
        clock.advance(60)
        woken = await within(h.resume(on.token, "the build is green"))
        assert woken.status == "done" and woken.text == "awake"
        messages = await messages_of(rt, h.id)
        assert tool_results(messages) == [
            "woken early at 2026-01-01T00:01:00.000Z by a resume (it was set for 2026-01-01T01:00:00.000Z): "
            "the build is green"
        ]
        seq = await rt.store.last_event_seq(h.id)
        await quiet_after(rt, lambda: clock.advance(2 * HOUR))  # due, its token used: dropped
        assert await _no_timers(rt)
        assert await rt.store.last_event_seq(h.id) == seq
        assert len(tool_results(await messages_of(rt, h.id))) == 1


async def test_approve_is_the_wrong_decision_for_a_timer() -> None:
    store = InMemorySessionStore()
    sess = Session(store=store, agent=nap_agent())
    result = await sess.start("nap")
    on = result.state.suspended_on
    assert on is not None
    with pytest.raises(WrongSuspensionKind, match=r"resume\(\)"):
        await sess.approve_tool(on.token)
    assert (await sess.wake(on.token)).status == "done"  # the wrong kind did not use the token up


async def test_cancelling_a_sleeping_run_closes_it_and_the_timer_does_nothing(store_url: str) -> None:
    clock = ManualClock()
    store = InMemorySessionStore() if store_url == "memory://" else store_url
    async with await Runtime.start(store, agents={"napper": nap_agent()}, clock=clock) as rt:
        h = await rt.create_session("napper")
        result = await h.run("nap")
        await h.cancel()
        run = await rt.store.load_run(result.run_id)
        assert run is not None and run.status == "cancelled"
        (result_part,) = [p for m in await messages_of(rt, h.id) for p in m.tool_results]
        assert result_part.is_error and "cancelled" in str(result_part.result)
        seq = await rt.store.last_event_seq(h.id)
        await quiet_after(rt, lambda: clock.advance(HOUR))
        assert await _no_timers(rt)
        assert await rt.store.last_event_seq(h.id) == seq
        assert (await rt.store.load_run(result.run_id)).status == "cancelled"  # type: ignore[union-attr]


async def test_a_new_turn_supersedes_a_sleeping_run(store_url: str) -> None:
    clock = ManualClock()
    store = InMemorySessionStore() if store_url == "memory://" else store_url
    async with await Runtime.start(store, agents={"napper": nap_agent()}, clock=clock) as rt:
        h = await rt.create_session("napper")
        slept = await h.run("nap")
        later = await h.run("hello")
        assert later.text == "heard: hello"
        assert (await rt.store.load_run(slept.run_id)).status == "cancelled"  # type: ignore[union-attr]
        await quiet_after(rt, lambda: clock.advance(HOUR))
        assert await _no_timers(rt)
        messages = await messages_of(rt, h.id)
        assert messages[-1].text == "heard: hello"
        assert [p.is_error for m in messages for p in m.tool_results] == [True]


async def test_until_ms_and_bad_arguments() -> None:
    clock = ManualClock()
    async with await Runtime.start(InMemorySessionStore(), agents={"napper": nap_agent()}, clock=clock) as rt:
        h = await rt.create_session("napper")
        at = clock.now_ms() + 90_000
        result = await h.run(f"until {at}")
        assert result.state.suspended_on is not None and result.state.suspended_on.wake_at == at
    for bad in [{}, {"seconds": 1, "until_ms": 5}, {"seconds": -1}, {"seconds": float("nan")}, {"until_ms": "x"}]:
        with pytest.raises(ValueError):
            sleep(**bad)  # type: ignore[arg-type]

    @tool
    def broken() -> str:
        """Sleeps for a negative time."""
        sleep(seconds=-5)

    model = ScriptedModel([{"tool": "broken", "args": {}}, {"text": "ok"}])
    sess = Session(store=InMemorySessionStore(), agent=Agent(name="b", model=model, tools=[broken]))
    done = await sess.start("go")
    assert done.status == "done"
    (part,) = [p for m in (await _history(sess)).messages for p in m.tool_results]
    assert part.is_error and "cannot be negative" in str(part.result)


async def _history(sess: Session) -> MessageHistory:
    assert sess.state is not None and sess.state.history_revision_id is not None
    history = await sess.store.load_history(sess.state.history_revision_id)
    assert history is not None
    return history


async def test_two_naps_in_one_step_wake_one_after_the_other() -> None:
    @tool
    def nap(seconds: float) -> str:
        """Sleep."""
        sleep(seconds=seconds)

    model = ScriptedModel(
        [
            {"tools": [{"tool": "nap", "args": {"seconds": 60}}, {"tool": "nap", "args": {"seconds": 120}}]},
            {"text": "up"},
        ]
    )
    clock = ManualClock()
    agent = Agent(name="twice", model=model, tools=[nap])
    async with await Runtime.start(InMemorySessionStore(), agents={"twice": agent}, clock=clock) as rt:
        h = await rt.create_session("twice")
        first = await h.run("go")
        assert first.state.suspended_on is not None and first.state.suspended_on.wake_at == clock.now_ms() + 60_000
        clock.advance(60)
        await until(lambda: _second_timer(rt, first.run_id, clock.now_ms() + 60_000))
        clock.advance(60)
        await until(lambda: _run_done(rt, first.run_id))
        assert [str(r)[:8] for r in tool_results(await messages_of(rt, h.id))] == ["woke at ", "woke at "]


async def _second_timer(rt: Runtime, run_id: str, wake_at: int) -> bool:
    run = await rt.store.load_run(run_id)
    return run is not None and run.suspended_on is not None and run.suspended_on.wake_at == wake_at


def test_a_timer_outlives_a_sigkill(tmp_path: Path) -> None:
    db = tmp_path / "killed.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.runtime.time._sleep_worker", str(db), "300"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().split()
    if not line or line[0] != "suspended":
        proc.kill()
        pytest.fail(f"worker failed: {line} {proc.communicate()[1].decode(errors='replace')}")
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    asyncio.run(_wakes_after_kill(db, line[1]))


async def _wakes_after_kill(db: Path, session_id: str) -> None:
    async with await SqliteSessionStore.open(db) as store:
        assert len(await store.list_timers()) == 1
    # A fresh runtime on the wall clock: the timer is overdue or due within 300 ms.
    async with await Runtime.start(f"sqlite:///{db}", agents={"napper": nap_agent(seconds=0.3)}) as rt:
        h = await rt.session(session_id)
        runs = await rt.store.list_runs(session_id)
        await until(lambda: _run_done(rt, runs[0].run_id))
        messages = await messages_of(rt, h.id)
        assert len(tool_results(messages)) == 1 and str(tool_results(messages)[0]).startswith("woke at ")
        assert messages[-1].text == "awake"
