"""fork(), cancel(), aborts, task cancellation, recover() of finished runs and superseding."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from repertory import AbortSignal, Agent, ModelMessage, RunState, Session, ToolContext, suspend, tool
from repertory.errors import InvalidResumeToken, RunCancelled, RunNotFound, RunSuspended
from repertory.storage import SessionStore
from repertory.testing import ScriptedModel

from .conftest import Backend
from .helpers import (
    WAIT,
    CheckedModel,
    assert_paired,
    assert_run_paired,
    call,
    result_for,
    stored,
    thread_history,
    tool_calls,
    wait,
)


@tool(requires_approval=True)
def delete_account(account_id: str) -> str:
    return f"deleted {account_id}"


@tool
def ask_human(question: str) -> str:
    suspend(reason="need input", payload={"question": question})


def make_agent(model: Any, tools: list[Any] | None = None) -> Agent:
    return Agent(name="forky", model=model, tools=[delete_account, ask_human, *(tools or [])])


def token_of(state: RunState | None) -> str:
    assert state is not None and state.suspended_on is not None
    return state.suspended_on.token


class Blocker:
    """A model step or tool body that parks until released, announcing that it got there."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = False

    async def park(self) -> None:
        self.entered.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise


# -- fork -----------------------------------------------------------------------------------------


async def test_fork_starts_a_new_thread_sharing_history(backend: Backend) -> None:
    store = backend.store
    replies = {
        "draft the plan": "plan A",
        "now assume a delay": "plan B",
        "continue A": "plan A2",
        "continue B": "plan B2",
    }

    def reply(messages: list[ModelMessage]) -> dict[str, Any]:
        return {"text": replies[[m for m in messages if m.role == "user"][-1].text]}

    model = CheckedModel([reply] * 5)
    a = make_agent(model)
    sess = Session(store=store, agent=a)
    r1 = await sess.start("draft the plan")
    entries_before = await backend.entry_count()
    alt = await sess.fork("now assume a delay")
    assert alt.status == "done" and alt.text == "plan B"
    assert alt.state.thread_id != sess.thread_id
    assert sess.state is not None and sess.state.run_id == r1.run_id  # sess stays on its own thread
    assert [m.text for m in model.seen[1]] == ["draft the plan", "plan A", "now assume a delay"]
    fork_history = await thread_history(store, alt.state.thread_id)
    assert [m.text for m in fork_history] == ["draft the plan", "plan A", "now assume a delay", "plan B"]
    # The shared prefix is stored once: the fork added only its own two messages.
    assert await backend.entry_count() == entries_before + 2
    original = await thread_history(store, sess.thread_id)
    assert [m.text for m in original] == ["draft the plan", "plan A"]

    # Nothing crosses either way afterwards.
    r3 = await sess.start("continue A")
    assert r3.text == "plan A2"
    assert "now assume a delay" not in [m.text for m in model.seen[2]]
    alt_sess = Session(store=store, agent=a, thread_id=alt.state.thread_id)
    r4 = await alt_sess.start("continue B")
    assert r4.text == "plan B2"
    assert "continue A" not in [m.text for m in model.seen[3]]
    assert [m.text for m in await thread_history(store, sess.thread_id)] == [
        "draft the plan",
        "plan A",
        "continue A",
        "plan A2",
    ]
    assert [m.text for m in await thread_history(store, alt.state.thread_id)] == [
        "draft the plan",
        "plan A",
        "now assume a delay",
        "plan B",
        "continue B",
        "plan B2",
    ]
    assert {r.run_id for r in await store.list_runs(alt.state.thread_id)} == {alt.run_id, r4.run_id}


async def test_fork_before_any_run_raises_run_not_found(store: SessionStore) -> None:
    sess = Session(store=store, agent=make_agent(CheckedModel([{"text": "x"}])))
    with pytest.raises(RunNotFound):
        await sess.fork("anything")
    assert await store.list_runs() == []


async def test_fork_while_an_approval_is_pending_pairs_the_call_and_leaves_the_original(
    store: SessionStore,
) -> None:
    model = CheckedModel([call("delete_account", account_id="a"), {"text": "after"}])
    sess = Session(store=store, agent=make_agent(model))
    r = await sess.start("delete a")
    alt = await sess.fork("never mind")  # the checked model asserts the fork's request is paired
    assert alt.status == "done"
    await assert_run_paired(store, alt.run_id)
    assert (await stored(store, r.run_id)).status == "suspended"
    done = await sess.approve_tool(token_of(r.state))
    assert done.status == "done"
    await assert_run_paired(store, r.run_id)


# -- cancel ---------------------------------------------------------------------------------------


async def test_cancel_of_a_suspended_approval_answers_the_call_and_kills_the_token(store: SessionStore) -> None:
    model = CheckedModel([call("delete_account", account_id="a"), {"text": "x"}])
    checkpoints: list[RunState] = []
    sess = Session(store=store, agent=make_agent(model), on_checkpoint=checkpoints.append)
    r = await sess.start("delete a")
    token = token_of(r.state)
    await sess.cancel()
    run = await stored(store, r.run_id)
    assert run.status == "cancelled" and run.suspended_on is None
    assert sess.state is not None and sess.state.status == "cancelled"
    assert checkpoints[-1].status == "cancelled"
    messages = await assert_run_paired(store, r.run_id)
    (c,) = tool_calls(messages)
    assert result_for(messages, c.tool_call_id).is_error
    assert run.approvals[0].decision == "cancelled"
    with pytest.raises(InvalidResumeToken):
        await sess.approve_tool(token)
    with pytest.raises(InvalidResumeToken):
        await Session.reject_suspended(store=store, agent=make_agent(model), run_id=r.run_id, resume_token=token)
    assert model.requests == 1


async def test_cancel_of_a_suspend_kills_the_token(store: SessionStore) -> None:
    sess = Session(store=store, agent=make_agent(CheckedModel([call("ask_human", question="q"), {"text": "x"}])))
    r = await sess.start("go")
    await sess.cancel()
    assert (await stored(store, r.run_id)).status == "cancelled"
    with pytest.raises(InvalidResumeToken):
        await sess.resume(token_of(r.state), "late")
    await assert_run_paired(store, r.run_id)


async def test_cancel_of_a_finished_run_or_no_run_is_a_no_op(store: SessionStore) -> None:
    sess = Session(store=store, agent=make_agent(CheckedModel([{"text": "ok"}])))
    await sess.cancel()  # no run yet
    assert sess.state is None and await store.list_runs() == []
    r = await sess.start("hi")
    before = await stored(store, r.run_id)
    await sess.cancel()
    after = await stored(store, r.run_id)
    assert after.status == "done" and after == before


async def test_cancel_during_a_long_model_call_stops_the_drive(store: SessionStore) -> None:
    block = Blocker()

    async def forever(messages: list[ModelMessage]) -> dict[str, Any]:
        await block.park()
        return {"text": "never"}

    sess = Session(store=store, agent=make_agent(CheckedModel([forever])))
    task = asyncio.create_task(sess.start("go", run_id="long"))
    await wait(block.entered)
    await sess.cancel()
    with pytest.raises(RunCancelled):
        await task
    assert block.cancelled
    run = await stored(store, "long")
    assert run.status == "cancelled" and run.step_index == 0
    assert sess.state is not None and sess.state.status == "cancelled"
    await assert_run_paired(store, "long")


async def test_cancel_during_a_model_delay(store: SessionStore) -> None:
    running = asyncio.Event()

    def on_checkpoint(state: RunState) -> None:
        if state.status == "running":
            running.set()

    sess = Session(
        store=store, agent=make_agent(ScriptedModel([{"text": "late"}], delay=60)), on_checkpoint=on_checkpoint
    )
    task = asyncio.create_task(sess.start("go", run_id="slow"))
    await wait(running)
    await sess.cancel()
    with pytest.raises(RunCancelled):
        await task
    assert (await stored(store, "slow")).status == "cancelled"


async def test_cancel_during_a_resume_drive(store: SessionStore) -> None:
    block = Blocker()

    async def slow(messages: list[ModelMessage]) -> dict[str, Any]:
        await block.park()
        return {"text": "never"}

    sess = Session(store=store, agent=make_agent(CheckedModel([call("ask_human", question="q"), slow])))
    r = await sess.start("go")
    task = asyncio.create_task(sess.resume(token_of(r.state), "answer"))
    await wait(block.entered)
    await sess.cancel()
    with pytest.raises(RunCancelled):
        await task
    assert (await stored(store, r.run_id)).status == "cancelled"
    await assert_run_paired(store, r.run_id)


async def test_abort_signal_during_a_run_commits_cancelled(store: SessionStore) -> None:
    block = Blocker()

    async def forever(messages: list[ModelMessage]) -> dict[str, Any]:
        await block.park()
        return {"text": "never"}

    signal = AbortSignal()
    sess = Session(store=store, agent=make_agent(CheckedModel([forever])))
    task = asyncio.create_task(sess.start("go", run_id="aborted", signal=signal))
    await wait(block.entered)
    signal.abort("user pressed stop")
    assert signal.aborted
    with pytest.raises(RunCancelled):
        await task
    assert (await stored(store, "aborted")).status == "cancelled"
    assert sess.state is not None and sess.state.status == "cancelled"


async def test_abort_during_a_tool_gives_the_call_an_error_result(store: SessionStore) -> None:
    block = Blocker()

    @tool
    async def long_job(ctx: ToolContext) -> str:
        await block.park()
        return "finished"

    signal = AbortSignal()
    model = CheckedModel([call("long_job"), {"text": "never"}])
    sess = Session(store=store, agent=make_agent(model, [long_job]))
    task = asyncio.create_task(sess.start("go", run_id="mid-tool", signal=signal))
    await wait(block.entered)
    signal.abort()
    with pytest.raises(RunCancelled):
        await task
    assert block.cancelled
    messages = await assert_run_paired(store, "mid-tool")
    (c,) = tool_calls(messages)
    assert result_for(messages, c.tool_call_id).is_error
    assert (await stored(store, "mid-tool")).status == "cancelled"
    assert model.requests == 1


async def test_an_already_aborted_signal_cancels_before_the_model_is_asked(store: SessionStore) -> None:
    model = CheckedModel([{"text": "never"}])
    signal = AbortSignal()
    signal.abort()
    sess = Session(store=store, agent=make_agent(model))
    with pytest.raises(RunCancelled):
        await sess.start("go", run_id="pre-aborted", signal=signal)
    assert model.requests == 0
    assert (await stored(store, "pre-aborted")).status == "cancelled"


async def test_cancelling_the_awaiting_task_commits_cancelled_and_propagates(store: SessionStore) -> None:
    block = Blocker()

    async def forever(messages: list[ModelMessage]) -> dict[str, Any]:
        await block.park()
        return {"text": "never"}

    sess = Session(store=store, agent=make_agent(CheckedModel([forever])))
    task = asyncio.create_task(sess.start("go", run_id="task-cancelled"))
    await wait(block.entered)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
    assert (await stored(store, "task-cancelled")).status == "cancelled"
    # The session is free again.
    sess.agent = make_agent(CheckedModel([{"text": "fresh"}]))
    assert (await sess.start("again")).text == "fresh"


# -- recover() of runs that need no driving ---------------------------------------------------------


async def test_recover_of_done_and_cancelled_runs_returns_the_stored_result(store: SessionStore) -> None:
    model = CheckedModel([{"text": "the answer"}])
    a = make_agent(model)
    r = await Session(store=store, agent=a).start("q")
    again = await Session.recover(store=store, agent=a, run_id=r.run_id)
    assert model.requests == 1
    assert again.status == "done" and again.text == "the answer" and again.run_id == r.run_id
    assert again.state == await stored(store, r.run_id)

    model2 = CheckedModel([call("ask_human", question="q"), {"text": "never"}])
    sess = Session(store=store, agent=make_agent(model2))
    r2 = await sess.start("q")
    await sess.cancel()
    back = await Session.recover(store=store, agent=make_agent(model2), run_id=r2.run_id)
    assert back.status == "cancelled" and back.text is None
    assert model2.requests == 1


async def test_recover_of_a_suspended_run_raises_run_suspended(store: SessionStore) -> None:
    model = CheckedModel([call("delete_account", account_id="a"), {"text": "x"}])
    r = await Session(store=store, agent=make_agent(model)).start("q")
    with pytest.raises(RunSuspended):
        await Session.recover(store=store, agent=make_agent(model), run_id=r.run_id)
    assert model.requests == 1
    assert (await stored(store, r.run_id)).status == "suspended"


# -- superseding ----------------------------------------------------------------------------------


@pytest.mark.parametrize("same_object", [True, False], ids=["same-session", "new-session"])
async def test_a_new_run_supersedes_a_suspended_approval(store: SessionStore, same_object: bool) -> None:
    ran: list[str] = []

    @tool(requires_approval=True)
    def drop_table(name: str) -> str:
        ran.append(name)
        return "dropped"

    model = CheckedModel([call("drop_table", name="users"), {"text": "moved on"}])
    a = make_agent(model, [drop_table])
    sess = Session(store=store, agent=a)
    old = await sess.start("drop users")
    token = token_of(old.state)
    other = sess if same_object else Session(store=store, agent=a, thread_id=sess.thread_id)
    new = await other.start("actually, do something else")
    assert new.status == "done" and new.text == "moved on"
    old_run = await stored(store, old.run_id)
    assert old_run.status == "cancelled" and old_run.suspended_on is None
    with pytest.raises(InvalidResumeToken):
        await Session.approve_suspended(store=store, agent=a, run_id=old.run_id, resume_token=token)
    assert ran == []
    history = await thread_history(store, sess.thread_id)
    assert_paired(history)
    (c,) = tool_calls(history)
    assert result_for(history, c.tool_call_id).is_error
    await assert_run_paired(store, new.run_id)
    assert [m.text for m in history if m.role == "user"] == ["drop users", "actually, do something else"]


async def test_a_new_run_supersedes_a_suspend(store: SessionStore) -> None:
    model = CheckedModel([call("ask_human", question="q"), {"text": "moved on"}])
    a = make_agent(model)
    sess = Session(store=store, agent=a)
    old = await sess.start("ask me")
    new = await Session(store=store, agent=a, thread_id=sess.thread_id).start("forget it")
    assert new.status == "done"
    assert (await stored(store, old.run_id)).status == "cancelled"
    with pytest.raises(InvalidResumeToken):
        await Session.resume_suspended(
            store=store, agent=a, run_id=old.run_id, resume_token=token_of(old.state), value="late"
        )
    assert_paired(await thread_history(store, sess.thread_id))


async def test_a_drive_elsewhere_fails_its_next_commit_and_stops(store: SessionStore) -> None:
    block = Blocker()
    ran: list[str] = []

    @tool
    async def slow_write(ctx: ToolContext) -> str:
        await block.park()
        ran.append(ctx.call_id)
        return "written"

    def reply(messages: list[ModelMessage]) -> dict[str, Any]:
        last_user = [m.text for m in messages if m.role == "user"][-1]
        return {"text": "second run done"} if last_user == "stop that" else call("slow_write")

    model = CheckedModel([reply, reply, reply])
    a = make_agent(model, [slow_write])
    first = Session(store=store, agent=a)
    task = asyncio.create_task(first.start("write", run_id="first"))
    await wait(block.entered)
    # Another session starts a run on the same thread: the running run is superseded.
    second = await asyncio.wait_for(Session(store=store, agent=a, thread_id=first.thread_id).start("stop that"), WAIT)
    assert second.status == "done"
    assert (await stored(store, "first")).status == "cancelled"
    block.release.set()
    with pytest.raises(RunCancelled):
        await asyncio.wait_for(task, WAIT)
    assert len(ran) == 1  # it finished its tool, but could not commit the result
    history = await thread_history(store, first.thread_id)
    assert_paired(history)
    (c,) = tool_calls(history)
    assert result_for(history, c.tool_call_id).is_error  # the superseded call's result, not "written"
    assert (await stored(store, "first")).status == "cancelled"
    assert (await stored(store, second.run_id)).status == "done"


async def test_cancel_stops_a_drive_of_the_run_in_another_session(store: SessionStore) -> None:
    block = Blocker()
    ran: list[str] = []

    @tool(requires_approval=True)
    async def migrate(ctx: ToolContext) -> str:
        await block.park()
        ran.append(ctx.call_id)
        return "migrated"

    model = CheckedModel([call("migrate"), {"text": "never"}])
    a = make_agent(model, [migrate])
    owner = Session(store=store, agent=a)
    r = await owner.start("migrate")
    elsewhere = asyncio.create_task(
        Session.approve_suspended(store=store, agent=a, run_id=r.run_id, resume_token=token_of(r.state))
    )
    await wait(block.entered)
    await owner.cancel()
    assert (await stored(store, r.run_id)).status == "cancelled"
    block.release.set()
    with pytest.raises(RunCancelled):
        await elsewhere
    assert len(ran) == 1  # it ran once, but its result could not be committed over the cancellation
    messages = await assert_run_paired(store, r.run_id)
    (c,) = tool_calls(messages)
    assert result_for(messages, c.tool_call_id).is_error
