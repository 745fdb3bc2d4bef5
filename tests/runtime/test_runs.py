"""Runs from start to done: results, checkpoints, watching, threads, inputs, budgets, errors, output types."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel

from repertory import (
    AbortSignal,
    Agent,
    ModelMessage,
    ModelResponse,
    RunState,
    Session,
    SessionBusy,
    StepBudgetExceeded,
    TextPart,
    ToolCallPart,
    ToolContext,
    Usage,
    suspend,
    tool,
)
from repertory.errors import ModelError, OutputValidationError, RunCancelled
from repertory.storage import SessionStore
from repertory.testing import ScriptedModel

from .helpers import (
    CheckedModel,
    StoreSpy,
    assert_run_paired,
    call,
    run_history,
    stored,
    thread_history,
    wait,
)


@tool
def echo(text: str) -> str:
    """Repeat the text."""
    return text


def agent(model: Any, **kw: Any) -> Agent:
    return Agent(name="assistant", model=model, tools=kw.pop("tools", [echo]), **kw)


async def test_start_runs_to_done_with_text(store: SessionStore) -> None:
    model = CheckedModel([{"text": "hello back"}])
    sess = Session(store=store, agent=agent(model))
    r = await sess.start("hello")
    assert r.status == "done"
    assert r.text == "hello back"
    assert r.state.status == "done"
    assert r.state.result == "hello back"
    assert r.state.thread_id == sess.thread_id
    assert r.state.suspended_on is None
    assert sess.state is not None and sess.state.status == "done" and sess.state.run_id == r.run_id
    run = await stored(store, r.run_id)
    assert run.status == "done" and run.result == "hello back"
    messages = await run_history(store, r.run_id)
    assert [(m.role, m.text) for m in messages] == [("user", "hello"), ("assistant", "hello back")]
    thread = await store.load_thread(sess.thread_id)
    assert thread is not None and thread.history_revision_id == run.history_revision_id


async def test_run_id_can_be_chosen(store: SessionStore) -> None:
    sess = Session(store=store, agent=agent(CheckedModel([{"text": "ok"}])))
    r = await sess.start("hi", run_id="my-run")
    assert r.run_id == "my-run"
    assert (await stored(store, "my-run")).status == "done"


async def test_step_index_counts_model_requests(store: SessionStore) -> None:
    model = CheckedModel([call("echo", text="a"), call("echo", text="b"), {"text": "done"}])
    sess = Session(store=store, agent=agent(model))
    r = await sess.start("go")
    assert model.requests == 3
    assert r.state.step_index == 3
    assert (await stored(store, r.run_id)).step_index == 3
    await assert_run_paired(store, r.run_id)


async def test_usage_is_summed_over_steps(store: SessionStore) -> None:
    model = CheckedModel(
        [
            {**call("echo", text="a"), "usage": {"input_tokens": 10, "output_tokens": 1}},
            {**call("echo", text="b"), "usage": {"input_tokens": 20, "output_tokens": 2}},
            {"text": "done", "usage": {"input_tokens": 30, "output_tokens": 3}},
        ]
    )
    r = await Session(store=store, agent=agent(model)).start("go")
    expected = Usage(input_tokens=60, output_tokens=6, total_tokens=66, requests=3)
    assert r.state.usage == expected
    assert (await stored(store, r.run_id)).usage == expected


class PricedModel:
    """A minimal Model that prices each request, to check that cost is summed."""

    def __init__(self) -> None:
        self.requests = 0

    async def request(self, messages: list[ModelMessage], tools: Any, settings: Any) -> AsyncIterator[Any]:
        self.requests += 1
        n = sum(1 for m in messages if m.role == "assistant")
        if n == 0:
            message = ModelMessage(
                role="assistant", parts=[ToolCallPart(tool_call_id="c1", tool_name="echo", args={"text": "x"})]
            )
        else:
            message = ModelMessage(role="assistant", parts=[TextPart(text="fin")])
        yield ModelResponse(
            message=message, usage=Usage(input_tokens=1, output_tokens=1, total_tokens=2, requests=1), cost=0.25
        )


async def test_cost_is_summed_over_steps(store: SessionStore) -> None:
    model = PricedModel()
    r = await Session(store=store, agent=agent(model)).start("go")
    assert r.status == "done" and r.text == "fin"
    assert r.state.cost == pytest.approx(0.5)
    assert (await stored(store, r.run_id)).cost == pytest.approx(0.5)


async def test_run_row_is_committed_before_the_first_model_call(store: SessionStore) -> None:
    seen: list[RunState | None] = []

    async def first(messages: list[ModelMessage]) -> dict[str, Any]:
        seen.append(await store.load_run("r1"))
        return {"text": "ok"}

    await Session(store=store, agent=agent(CheckedModel([first]))).start("hi", run_id="r1")
    assert seen[0] is not None
    assert seen[0].status == "running" and seen[0].step_index == 0
    # The input is durable too: the run's revision already holds it.
    assert [m.text for m in await _messages_at(store, seen[0].history_revision_id)] == ["hi"]


async def _messages_at(store: SessionStore, revision: str | None) -> list[ModelMessage]:
    assert revision is not None
    history = await store.load_history(revision)
    assert history is not None
    return history.messages


async def test_on_checkpoint_follows_every_commit_with_a_copy(store: SessionStore) -> None:
    spy = StoreSpy(store)
    committed: list[dict[str, Any]] = []
    events: list[str] = []

    async def after_commit(*, run: RunState, **_: Any) -> None:
        committed.append(run.model_dump(mode="json"))
        events.append("commit")

    spy.after["commit_session"] = after_commit
    snapshots: list[RunState] = []

    def on_checkpoint(state: RunState) -> None:
        events.append("checkpoint")
        # Called after the commit, with exactly what was committed.
        assert state.model_dump(mode="json") == committed[-1]
        snapshots.append(state)

    model = CheckedModel([call("echo", text="a"), {"text": "done"}])
    sess = Session(store=spy, agent=agent(model), on_checkpoint=on_checkpoint)
    r = await sess.start("go")
    assert events == ["commit", "checkpoint"] * (len(events) // 2)
    assert len(snapshots) == len(committed) >= 3
    assert snapshots[0].status == "running" and snapshots[0].step_index == 0
    assert snapshots[-1].status == "done" and snapshots[-1].step_index == 2
    assert [s.step_index for s in snapshots] == sorted(s.step_index for s in snapshots)
    # Copies: distinct objects, and changing one changes nothing else.
    assert len({id(s) for s in snapshots}) == len(snapshots)
    snapshots[-1].scratch["mutated"] = True
    snapshots[-1].status = "error"
    assert sess.state is not None and sess.state.status == "done" and "mutated" not in sess.state.scratch
    value = sess.watch().value
    assert value is not None and value.status == "done" and "mutated" not in value.scratch
    assert r.state.status == "done"
    assert (await stored(store, r.run_id)).status == "done"


async def test_watch_value_tracks_the_latest_state_without_subscribers(store: SessionStore) -> None:
    sess = Session(store=store, agent=agent(CheckedModel([{"text": "ok"}])))
    sig = sess.watch()
    assert sig.value is None
    r = await sess.start("hi")
    assert sig.value is not None, "watch().value must hold the latest run state once a run exists"
    assert sig.value.run_id == r.run_id and sig.value.status == "done"


async def test_watch_value_is_the_last_checkpoint_mid_drive(store: SessionStore) -> None:
    """Between commits the drive changes its run in memory; ``watch().value`` must still be what was
    committed (a checkpoint), and changing it must not leak into the next commit."""
    entered, release = asyncio.Event(), asyncio.Event()

    @tool(idempotent=True)  # idempotent calls run before their step is committed
    async def fetch(ctx: ToolContext) -> str:
        entered.set()
        await release.wait()
        return "page"

    sess = Session(store=store, agent=agent(CheckedModel([call("fetch"), {"text": "ok"}]), tools=[fetch]))
    task = asyncio.create_task(sess.start("go", run_id="mid"))
    await wait(entered)
    value = sess.watch().value
    committed = await stored(store, "mid")
    assert value is not None
    assert value.model_dump() == committed.model_dump(), "watch().value shows uncommitted changes"
    value.scratch["leak"] = True
    release.set()
    await task
    assert "leak" not in (await stored(store, "mid")).scratch


async def test_watch_subscribe_and_unsubscribe(store: SessionStore) -> None:
    model = CheckedModel([call("echo", text="a"), {"text": "one"}, {"text": "two"}])
    sess = Session(store=store, agent=agent(model))
    got: list[RunState | None] = []
    unsubscribe = sess.watch().subscribe(got.append)
    r1 = await sess.start("first")
    assert got and all(s is not None for s in got)
    assert got[0] is not None and got[0].status == "running"
    assert got[-1] is not None and got[-1].status == "done" and got[-1].run_id == r1.run_id
    assert sess.watch().value is not None and sess.watch().value.status == "done"  # type: ignore[union-attr]
    count = len(got)
    unsubscribe()
    unsubscribe()  # harmless twice
    r2 = await sess.start("second")
    assert r2.status == "done"
    assert len(got) == count


async def test_watch_async_iteration_sees_every_checkpoint(store: SessionStore) -> None:
    model = CheckedModel([call("echo", text="a"), {"text": "done"}])
    sess = Session(store=store, agent=agent(model))
    listening = asyncio.Event()
    seen: list[RunState | None] = []

    async def consume() -> None:
        async with contextlib.aclosing(sess.watch().__aiter__()) as it:
            async for state in it:
                seen.append(state)
                listening.set()
                if state is not None and state.status == "done":
                    return

    consumer = asyncio.create_task(consume())
    await wait(listening)
    r = await sess.start("go")
    await asyncio.wait_for(consumer, 10)
    assert seen[0] is None  # the current value first
    states = [s for s in seen[1:] if s is not None]
    assert len(states) == len(seen) - 1
    assert states[0].status == "running" and states[-1].status == "done"
    assert states[-1].run_id == r.run_id
    steps = [s.step_index for s in states]
    assert steps == sorted(steps) and steps[-1] == 2


async def test_conversation_continues_across_runs_on_the_same_thread(store: SessionStore) -> None:
    model = CheckedModel([{"text": "first reply"}, {"text": "second reply"}])
    a = agent(model)
    s1 = Session(store=store, agent=a)
    r1 = await s1.start("first")
    s2 = Session(store=store, agent=a, thread_id=s1.thread_id)
    r2 = await s2.start("second")
    assert r2.text == "second reply"
    assert r2.state.thread_id == r1.state.thread_id
    assert [m.text for m in model.seen[1]] == ["first", "first reply", "second"]
    history = await thread_history(store, s1.thread_id)
    assert [m.text for m in history] == ["first", "first reply", "second", "second reply"]
    runs = await store.list_runs(s1.thread_id)
    assert {r.run_id for r in runs} == {r1.run_id, r2.run_id}
    assert all(r.status == "done" for r in runs)
    # The same Session object also continues its own thread.
    model.script.steps.append({"text": "third reply"})
    r3 = await s1.start("third")
    assert [m.text for m in model.seen[2]][-3:] == ["second", "second reply", "third"]
    assert r3.text == "third reply"


async def test_input_as_messages(store: SessionStore) -> None:
    model = CheckedModel([{"text": "ok"}])
    sess = Session(store=store, agent=agent(model))
    r = await sess.start(
        {
            "messages": [
                ModelMessage.user("part one"),
                {"role": "user", "parts": [{"type": "text", "text": "part two"}]},
            ]
        }
    )
    assert r.status == "done"
    assert [m.text for m in model.seen[0]] == ["part one", "part two"]
    assert [m.text for m in await run_history(store, r.run_id)] == ["part one", "part two", "ok"]


async def test_instructions_are_sent_but_never_stored(store: SessionStore) -> None:
    secret = "You are a careful assistant. SECRET-INSTRUCTIONS"

    def check(messages: list[ModelMessage]) -> dict[str, Any]:
        assert messages[0].role == "system" and messages[0].text == secret
        assert sum(secret in m.text for m in messages) == 1
        return call("echo", text="x") if sum(m.role == "assistant" for m in messages) == 0 else {"text": "ok"}

    model = CheckedModel([check, check])
    sess = Session(store=store, agent=agent(model, instructions=secret))
    r = await sess.start("hi")
    assert r.status == "done" and model.requests == 2
    history = await run_history(store, r.run_id)
    assert all(secret not in m.text for m in history)
    assert all(m.role != "system" for m in history)


async def test_exceeding_max_steps_commits_error_then_raises(store: SessionStore) -> None:
    model = CheckedModel([call("echo", text=str(i)) for i in range(10)])
    checkpoints: list[RunState] = []
    sess = Session(store=store, agent=agent(model, max_steps=2), on_checkpoint=checkpoints.append)
    with pytest.raises(StepBudgetExceeded):
        await sess.start("loop", run_id="budget")
    assert model.requests == 2
    run = await stored(store, "budget")
    assert run.status == "error"
    assert run.step_index == 2
    assert run.error is not None and run.error.type == "StepBudgetExceeded"
    assert checkpoints[-1].status == "error"
    assert sess.state is not None and sess.state.status == "error"
    await assert_run_paired(store, "budget")


async def test_a_model_error_commits_error_then_raises(store: SessionStore) -> None:
    def boom(messages: list[ModelMessage]) -> dict[str, Any]:
        raise RuntimeError("model exploded")

    model = CheckedModel([call("echo", text="a"), boom])
    checkpoints: list[RunState] = []
    sess = Session(store=store, agent=agent(model), on_checkpoint=checkpoints.append)
    with pytest.raises(RuntimeError, match="model exploded"):
        await sess.start("go", run_id="boom")
    run = await stored(store, "boom")
    assert run.status == "error"
    assert run.error is not None
    assert run.error.message == "model exploded" and run.error.type == "RuntimeError"
    assert run.error.stack and "model exploded" in run.error.stack
    assert run.step_index == 1
    assert checkpoints[-1].status == "error"
    # What was done before the failure is kept.
    messages = await assert_run_paired(store, "boom")
    assert [m.role for m in messages] == ["user", "assistant", "tool"]


async def test_a_model_out_of_steps_is_a_model_error(store: SessionStore) -> None:
    sess = Session(store=store, agent=agent(ScriptedModel([])))
    with pytest.raises(ModelError):
        await sess.start("hi", run_id="empty")
    run = await stored(store, "empty")
    assert run.status == "error" and run.error is not None and run.error.type == "ModelError"


async def test_a_second_drive_on_a_busy_session_is_refused(store: SessionStore) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(messages: list[ModelMessage]) -> dict[str, Any]:
        entered.set()
        await release.wait()
        return {"text": "ok"}

    sess = Session(store=store, agent=agent(CheckedModel([slow])))
    first = asyncio.create_task(sess.start("one"))
    await wait(entered)
    with pytest.raises(SessionBusy):
        await sess.start("two")
    release.set()
    r = await first
    assert r.status == "done"


class Answer(BaseModel):
    city: str
    population: int


async def test_output_type_validates_the_final_reply(store: SessionStore) -> None:
    model = CheckedModel([{"json": {"city": "Oslo", "population": 700000}}])
    sess = Session(store=store, agent=agent(model, output_type=Answer))
    r = await sess.start("where?")
    assert r.status == "done"
    assert r.output == Answer(city="Oslo", population=700000)
    assert json.loads(r.text or "") == {"city": "Oslo", "population": 700000}


async def test_output_type_accepts_a_fenced_reply(store: SessionStore) -> None:
    model = CheckedModel([{"text": '```json\n{"city": "Rome", "population": 3}\n```'}])
    r = await Session(store=store, agent=agent(model, output_type=Answer)).start("where?")
    assert r.output == Answer(city="Rome", population=3)


async def test_output_type_retries_with_the_validation_error(store: SessionStore) -> None:
    def retry_after(messages: list[ModelMessage]) -> dict[str, Any]:
        last = messages[-1]
        assert last.role == "user"
        assert "population" in last.text  # pydantic's explanation names the failing field
        return {"json": {"city": "Oslo", "population": 1}}

    def bad_again(messages: list[ModelMessage]) -> dict[str, Any]:
        assert messages[-1].role == "user" and "population" in messages[-1].text
        return {"json": {"city": "Oslo", "population": "many"}}

    model = CheckedModel([{"json": {"city": "Oslo"}}, bad_again, retry_after])
    sess = Session(store=store, agent=agent(model, output_type=Answer))
    r = await sess.start("where?")
    assert model.requests == 3
    assert r.status == "done" and r.output == Answer(city="Oslo", population=1)
    await assert_run_paired(store, r.run_id)


async def test_output_type_gives_up_after_two_retries(store: SessionStore) -> None:
    model = CheckedModel([{"text": "not json"}] * 5)
    sess = Session(store=store, agent=agent(model, output_type=Answer))
    with pytest.raises(OutputValidationError):
        await sess.start("where?", run_id="bad-output")
    assert model.requests == 3  # the first try and at most two retries
    run = await stored(store, "bad-output")
    assert run.status == "error" and run.error is not None and run.error.type == "OutputValidationError"


async def test_recover_of_a_done_run_with_output_type_returns_the_output(store: SessionStore) -> None:
    model = CheckedModel([{"json": {"city": "Oslo", "population": 7}}])
    a = agent(model, output_type=Answer)
    r = await Session(store=store, agent=a).start("where?")
    again = await Session.recover(store=store, agent=a, run_id=r.run_id)
    assert model.requests == 1
    assert again.status == "done" and again.output == Answer(city="Oslo", population=7)
    assert again.text == r.text


async def test_recover_re_drives_a_run_that_errored(store: SessionStore) -> None:
    failures = [RuntimeError("flaky")]

    def flaky(messages: list[ModelMessage]) -> dict[str, Any]:
        if failures:
            raise failures.pop()
        return {"text": "recovered"}

    model = CheckedModel([call("echo", text="a"), flaky])
    a = agent(model)
    with pytest.raises(RuntimeError):
        await Session(store=store, agent=a).start("go", run_id="flaky")
    assert (await stored(store, "flaky")).status == "error"
    r = await Session.recover(store=store, agent=a, run_id="flaky")
    assert r.status == "done" and r.text == "recovered"
    run = await stored(store, "flaky")
    assert run.status == "done" and run.error is None and run.step_index == 2
    messages = await assert_run_paired(store, "flaky")
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]


async def test_tool_context_is_available_to_a_plain_function(store: SessionStore) -> None:
    seen: list[str] = []

    def who(ctx: ToolContext) -> str:
        seen.append(ctx.run_id)
        return "me"

    model = CheckedModel([call("who"), {"text": "ok"}])
    r = await Session(store=store, agent=agent(model, tools=[who])).start("go")
    assert seen == [r.run_id]


async def _checkpoints_per_commit(store: SessionStore, scenario: Any) -> tuple[list[str], list[RunState]]:
    spy = StoreSpy(store)
    events: list[str] = []

    async def after_commit(**_: Any) -> None:
        events.append("commit")

    async def after_save(*_: Any) -> None:
        events.append("commit")

    spy.after["commit_session"] = after_commit
    spy.after["save"] = after_save
    states: list[RunState] = []

    def on_checkpoint(state: RunState) -> None:
        events.append("checkpoint")
        states.append(state)

    await scenario(spy, on_checkpoint)
    return events, states


def _boom(messages: list[ModelMessage]) -> dict[str, Any]:
    raise RuntimeError("boom")


@pytest.mark.parametrize("path", ["model-error", "step-budget", "abort", "cancel-suspended"])
async def test_on_checkpoint_is_called_once_per_commit_on_failure_paths(store: SessionStore, path: str) -> None:
    async def scenario(spy: Any, on_checkpoint: Any) -> None:
        if path == "model-error":
            sess = Session(store=spy, agent=agent(CheckedModel([_boom])), on_checkpoint=on_checkpoint)
            with pytest.raises(RuntimeError):
                await sess.start("go")
        elif path == "step-budget":
            model = CheckedModel([call("echo", text="a")] * 3)
            sess = Session(store=spy, agent=agent(model, max_steps=1), on_checkpoint=on_checkpoint)
            with pytest.raises(StepBudgetExceeded):
                await sess.start("go")
        elif path == "abort":
            signal = AbortSignal()
            signal.abort()
            sess = Session(store=spy, agent=agent(CheckedModel([{"text": "x"}])), on_checkpoint=on_checkpoint)
            with pytest.raises(RunCancelled):
                await sess.start("go", signal=signal)
        else:

            @tool
            def wait_here() -> str:
                suspend()

            sess = Session(
                store=spy,
                agent=agent(CheckedModel([call("wait_here")]), tools=[wait_here]),
                on_checkpoint=on_checkpoint,
            )
            await sess.start("go")
            await sess.cancel()

    events, states = await _checkpoints_per_commit(store, scenario)
    assert events == ["commit", "checkpoint"] * (len(events) // 2), events
    assert states[-1].status in ("error", "cancelled")


async def test_cancel_of_a_done_run_calls_no_checkpoint(store: SessionStore) -> None:
    states: list[RunState] = []
    sess = Session(store=store, agent=agent(CheckedModel([{"text": "ok"}])), on_checkpoint=states.append)
    await sess.start("hi")
    n = len(states)
    await sess.cancel()  # a no-op: nothing is committed, so nothing is announced
    assert len(states) == n


async def test_scripted_model_counts_each_requests_own_assistant_messages(store: SessionStore) -> None:
    """``steps[n]`` for a request holding n assistant messages, even when a message object is shared."""
    model = ScriptedModel([{"text": "step0"}, {"text": "step1"}])
    a = agent(model)
    shared = ModelMessage.user("the same prompt object")
    first = Session(store=store, agent=a)
    await first.start("hello")
    continued = await first.start({"messages": [shared]})  # [user, assistant, shared]: one assistant
    fresh = await Session(store=store, agent=a).start(
        {"messages": [ModelMessage.user("x"), ModelMessage.user("y"), shared]}
    )  # no assistant yet
    assert continued.text == "step1"
    assert fresh.text == "step0"
