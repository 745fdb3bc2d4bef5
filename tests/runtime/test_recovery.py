"""Crash recovery in one process: crashes simulated by hand-committed states or a store that "dies".

A crashed process leaves its run ``running`` at its last commit. ``Session.recover`` re-drives it:
an unanswered call of a non-idempotent tool gets "outcome unknown" and is never run again; an
idempotent tool is re-run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from repertory import (
    Agent,
    ApprovalRecord,
    MessageHistory,
    ModelMessage,
    Origin,
    RunState,
    Session,
    ThreadState,
    ToolCallPart,
    ToolContext,
    tool,
)
from repertory.core.ids import now_ms
from repertory.errors import InvalidResumeToken, StoreError
from repertory.storage import SessionStore

from .conftest import Backend
from .helpers import (
    CheckedModel,
    StoreSpy,
    assert_run_paired,
    call,
    calls,
    result_for,
    run_history,
    stored,
    thread_history,
    tool_calls,
    wait,
)


class Effects:
    """Tools with side effects we can count: ``charge`` (not idempotent) and ``fetch`` (idempotent)."""

    def __init__(
        self, block: asyncio.Event | None = None, entered: asyncio.Event | None = None, expect: int = 1
    ) -> None:
        self.ran: list[tuple[str, str, Any]] = []
        self.block = block
        self.entered = entered
        self.arrived = 0

        async def maybe_block() -> None:
            self.arrived += 1
            if self.entered is not None and self.arrived >= expect:
                self.entered.set()  # every expected call is inside its tool
            if self.block is not None:
                await self.block.wait()

        @tool
        async def charge(ctx: ToolContext, amount: int) -> str:
            """Charge a card: must never run twice."""
            await maybe_block()
            self.ran.append(("charge", ctx.call_id, ctx.approval))
            return f"charged {amount}"

        @tool(idempotent=True)
        async def fetch(ctx: ToolContext, url: str) -> str:
            await maybe_block()
            self.ran.append(("fetch", ctx.call_id, ctx.approval))
            return f"page {url}"

        @tool(requires_approval=True)
        async def refund(ctx: ToolContext, amount: int) -> str:
            await maybe_block()
            self.ran.append(("refund", ctx.call_id, ctx.approval))
            return f"refunded {amount}"

        @tool(requires_approval=True, idempotent=True)
        async def archive(ctx: ToolContext, doc: str) -> str:
            await maybe_block()
            self.ran.append(("archive", ctx.call_id, ctx.approval))
            return f"archived {doc}"

        self.tools = [charge, fetch, refund, archive]

    def agent(self, model: Any) -> Agent:
        return Agent(name="payments", model=model, tools=self.tools)

    def names(self) -> list[str]:
        return [r[0] for r in self.ran]


async def commit_crashed_run(
    store: SessionStore,
    run_id: str,
    parts: Sequence[tuple[str, dict[str, Any]] | ToolCallPart],
    approvals: list[ApprovalRecord] | None = None,
) -> list[str]:
    """Commit what a process leaves when it dies while the calls of its first step run."""
    history = MessageHistory()
    history.append(ModelMessage.user("go", origin=Origin(kind="user")))
    call_parts = [
        p if isinstance(p, ToolCallPart) else ToolCallPart(tool_call_id=f"{run_id}-c{i}", tool_name=p[0], args=p[1])
        for i, p in enumerate(parts)
    ]
    history.append(ModelMessage(role="assistant", parts=list(call_parts), origin=Origin(kind="model")))
    run = RunState(
        run_id=run_id,
        thread_id=f"thread-{run_id}",
        status="running",
        step_index=1,
        history_revision_id=history.revision_id,
        approvals=approvals or [],
        agent="payments",
    )
    thread = ThreadState(thread_id=run.thread_id, history_revision_id=history.revision_id)
    await store.commit_session(run=run, thread=thread, history=history, base_revision_id=None)
    return [c.tool_call_id for c in call_parts]


def after_crash(text: str = "recovered") -> CheckedModel:
    # The crashed step is step 0 (already in history); the recovered drive asks for step 1.
    return CheckedModel([{"text": "unused"}, {"text": text}])


async def test_a_non_idempotent_call_without_result_gets_outcome_unknown(store: SessionStore) -> None:
    (cid,) = await commit_crashed_run(store, "r1", [("charge", {"amount": 5})])
    fx = Effects()
    model = after_crash()
    r = await Session.recover(store=store, agent=fx.agent(model), run_id="r1")
    assert r.status == "done" and r.text == "recovered"
    assert fx.ran == []
    messages = await assert_run_paired(store, "r1")
    res = result_for(messages, cid)
    assert res.is_error and "outcome unknown" in str(res.result)
    assert result_for(model.seen[0], cid).is_error  # the model was told
    assert (await stored(store, "r1")).step_index == 2


async def test_an_idempotent_call_without_result_is_run_again(store: SessionStore) -> None:
    (cid,) = await commit_crashed_run(store, "r2", [("fetch", {"url": "a"})])
    fx = Effects()
    r = await Session.recover(store=store, agent=fx.agent(after_crash()), run_id="r2")
    assert r.status == "done"
    assert fx.ran == [("fetch", cid, None)]
    messages = await assert_run_paired(store, "r2")
    assert result_for(messages, cid).result == "page a" and not result_for(messages, cid).is_error


async def test_mixed_calls_after_a_crash_keep_call_order(store: SessionStore) -> None:
    ids = await commit_crashed_run(
        store, "r3", [("fetch", {"url": "x"}), ("charge", {"amount": 1}), ("fetch", {"url": "y"})]
    )
    fx = Effects()
    model = after_crash()
    await Session.recover(store=store, agent=fx.agent(model), run_id="r3")
    assert sorted(fx.names()) == ["fetch", "fetch"]
    messages = await assert_run_paired(store, "r3")
    results = [p for m in messages for p in m.tool_results]
    assert [p.tool_call_id for p in results] == ids
    assert [p.is_error for p in results] == [False, True, False]


async def test_an_approved_but_unrun_non_idempotent_call_gets_outcome_unknown(store: SessionStore) -> None:
    now = now_ms()
    record = ApprovalRecord(
        tool_call_id="r4-c0",
        tool_name="refund",
        args={"amount": 9},
        requested_at=now,
        decision="approved",
        decided_at=now,
        approval={"by": "ops"},
    )
    (cid,) = await commit_crashed_run(store, "r4", [("refund", {"amount": 9})], approvals=[record])
    fx = Effects()
    r = await Session.recover(store=store, agent=fx.agent(after_crash()), run_id="r4")
    assert r.status == "done"
    assert fx.ran == []
    messages = await assert_run_paired(store, "r4")
    assert result_for(messages, cid).is_error and "outcome unknown" in str(result_for(messages, cid).result)


async def test_an_approved_idempotent_call_is_re_run_with_its_approval(store: SessionStore) -> None:
    now = now_ms()
    record = ApprovalRecord(
        tool_call_id="r5-c0",
        tool_name="archive",
        args={"doc": "d"},
        requested_at=now,
        decision="approved",
        decided_at=now,
        approval={"by": "ops"},
    )
    (cid,) = await commit_crashed_run(store, "r5", [("archive", {"doc": "d"})], approvals=[record])
    fx = Effects()
    await Session.recover(store=store, agent=fx.agent(after_crash()), run_id="r5")
    assert fx.ran == [("archive", cid, {"by": "ops"})]
    await assert_run_paired(store, "r5")


async def test_a_rejected_call_after_a_crash_gets_its_rejection(store: SessionStore) -> None:
    now = now_ms()
    record = ApprovalRecord(
        tool_call_id="r6-c0",
        tool_name="refund",
        args={"amount": 1},
        requested_at=now,
        decision="rejected",
        decided_at=now,
        reason="too much",
    )
    (cid,) = await commit_crashed_run(store, "r6", [("refund", {"amount": 1})], approvals=[record])
    fx = Effects()
    await Session.recover(store=store, agent=fx.agent(after_crash()), run_id="r6")
    assert fx.ran == []
    messages = await assert_run_paired(store, "r6")
    assert result_for(messages, cid).is_error and result_for(messages, cid).result == "too much"


@pytest.mark.parametrize("stored_as", ["field", "old in-band key"])
async def test_a_crashed_call_whose_arguments_never_parsed_gets_an_error_and_never_runs(
    store: SessionStore, stored_as: str
) -> None:
    # ``fetch`` is idempotent, so a call of it with no result would be run again after a crash;
    # one whose arguments are not a JSON object must get the same error result as a fresh one.
    raw = '{"url": "a"'
    if stored_as == "field":
        part = ToolCallPart(tool_call_id="r6b-c0", tool_name="fetch", invalid_args=raw)
    else:
        # Unvalidated, so it is stored exactly as adapters wrote it before ``invalid_args`` existed.
        part = ToolCallPart.model_construct(tool_call_id="r6b-c0", tool_name="fetch", args={"__invalid_json__": raw})
    (cid,) = await commit_crashed_run(store, "r6b", [part])
    fx = Effects()
    model = after_crash()
    r = await Session.recover(store=store, agent=fx.agent(model), run_id="r6b")
    assert r.status == "done" and fx.ran == []
    messages = await assert_run_paired(store, "r6b")
    res = result_for(messages, cid)
    assert res.is_error and str(res.result).startswith("the arguments of this call to 'fetch' are not a JSON object")
    assert str(res.result).endswith(f"Received: {raw}")
    assert messages[1].tool_calls[0].invalid_args == raw and messages[1].tool_calls[0].args == {}
    assert result_for(model.seen[0], cid).is_error  # the model was told


@pytest.mark.durable
async def test_recover_after_a_restart(backend: Backend) -> None:
    ids = await commit_crashed_run(backend.store, "r7", [("charge", {"amount": 1}), ("fetch", {"url": "u"})])
    store = await backend.restart()
    fx = Effects()
    r = await Session.recover(store=store, agent=fx.agent(after_crash("back")), run_id="r7")
    assert r.status == "done" and r.text == "back"
    assert fx.ran == [("fetch", ids[1], None)]
    await assert_run_paired(store, "r7")


async def _crash(task: asyncio.Task[Any], spy: StoreSpy) -> None:
    """The process dies: nothing more reaches the store, and its tasks stop."""
    spy.dead = True
    task.cancel()
    with pytest.raises((asyncio.CancelledError, StoreError)):
        await task


async def test_a_real_drive_crashing_mid_tool_is_recovered_without_a_second_run(store: SessionStore) -> None:
    entered = asyncio.Event()
    fx = Effects(block=asyncio.Event(), entered=entered, expect=2)
    durable_before_run: list[bool] = []
    real_charge = fx.tools[0].fn

    async def charge(ctx: ToolContext, amount: int) -> str:
        # An assistant message with a non-idempotent call is durable before the tool runs.
        run = await store.load_run("crash")
        assert run is not None
        calls_stored = tool_calls(await run_history(store, "crash"))
        durable_before_run.append(ctx.call_id in {c.tool_call_id for c in calls_stored})
        return await real_charge(ctx, amount)  # type: ignore[no-any-return]

    fx.tools[0].fn = charge
    spy = StoreSpy(store)
    model = CheckedModel([calls(("charge", {"amount": 3}), ("fetch", {"url": "p"})), {"text": "done"}])
    sess = Session(store=spy, agent=fx.agent(model))
    task = asyncio.create_task(sess.start("pay", run_id="crash"))
    await wait(entered)
    await _crash(task, spy)
    assert durable_before_run == [True]
    assert fx.ran == []  # both tools were still running when the process died
    run = await stored(store, "crash")
    assert run.status == "running"  # what a dead process leaves behind
    (charge_id, fetch_id) = [c.tool_call_id for c in tool_calls(await run_history(store, "crash"))]

    fx2 = Effects()  # the restarted process
    model2 = CheckedModel([{"text": "unused"}, {"text": "recovered"}])
    r = await Session.recover(store=store, agent=fx2.agent(model2), run_id="crash")
    assert r.status == "done" and r.text == "recovered"
    assert fx2.ran == [("fetch", fetch_id, None)]
    messages = await assert_run_paired(store, "crash")
    assert "outcome unknown" in str(result_for(messages, charge_id).result)
    assert result_for(messages, fetch_id).result == "page p"


async def test_a_crash_before_an_idempotent_step_commits_re_asks_the_model(store: SessionStore) -> None:
    entered = asyncio.Event()
    fx = Effects(block=asyncio.Event(), entered=entered)
    spy = StoreSpy(store)
    model = CheckedModel([call("fetch", url="a"), {"text": "done"}])
    task = asyncio.create_task(Session(store=spy, agent=fx.agent(model)).start("go", run_id="idem"))
    await wait(entered)
    await _crash(task, spy)
    # Only idempotent calls: the step commits once, after its tools, so nothing of it was stored.
    assert [m.role for m in await run_history(store, "idem")] == ["user"]
    fx2 = Effects()
    model2 = CheckedModel([call("fetch", url="a"), {"text": "done"}])
    r = await Session.recover(store=store, agent=fx2.agent(model2), run_id="idem")
    assert r.status == "done" and model2.requests == 2
    assert fx2.names() == ["fetch"]
    await assert_run_paired(store, "idem")


async def test_a_crash_while_an_approved_tool_runs(store: SessionStore) -> None:
    entered = asyncio.Event()
    fx = Effects(block=asyncio.Event(), entered=entered)
    model = CheckedModel([call("refund", amount=7), {"text": "done"}])
    r = await Session(store=store, agent=fx.agent(model)).start("refund")
    token = r.state.suspended_on.token  # type: ignore[union-attr]
    spy = StoreSpy(store)
    task = asyncio.create_task(
        Session.approve_suspended(
            store=spy,
            agent=fx.agent(model),
            run_id=r.run_id,
            resume_token=token,
        )
    )
    await wait(entered)
    await _crash(task, spy)
    run = await stored(store, r.run_id)
    assert run.status == "running" and run.approvals[0].decision == "approved"
    fx2 = Effects()
    done = await Session.recover(store=store, agent=fx2.agent(after_crash()), run_id=r.run_id)
    assert done.status == "done"
    assert fx.ran == [] and fx2.ran == []
    messages = await assert_run_paired(store, r.run_id)
    (c,) = tool_calls(messages)
    assert "outcome unknown" in str(result_for(messages, c.tool_call_id).result)


async def test_a_crash_before_the_first_model_call(store: SessionStore) -> None:
    spy = StoreSpy(store)
    entered = asyncio.Event()

    async def stuck(messages: list[ModelMessage]) -> dict[str, Any]:
        entered.set()
        await asyncio.Event().wait()
        return {}

    task = asyncio.create_task(
        Session(store=spy, agent=Effects().agent(CheckedModel([stuck]))).start("hello", run_id="early")
    )
    await wait(entered)
    await _crash(task, spy)
    assert (await stored(store, "early")).status == "running"
    model = CheckedModel([{"text": "hi there"}])
    r = await Session.recover(store=store, agent=Effects().agent(model), run_id="early")
    assert r.status == "done" and r.text == "hi there"
    assert [m.text for m in await thread_history(store, f"{r.state.thread_id}")] == ["hello", "hi there"]


async def test_a_cancelled_drive_set_back_to_running_by_save_is_re_driven(store: SessionStore) -> None:
    """The brief's other crash recipe: cancel the drive mid-tool, then ``save`` the run as 'running'."""
    entered = asyncio.Event()
    fx = Effects(block=asyncio.Event(), entered=entered)
    model = CheckedModel([call("charge", amount=2), {"text": "after"}])
    task = asyncio.create_task(Session(store=store, agent=fx.agent(model)).start("go", run_id="saved"))
    await wait(entered)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    run = await stored(store, "saved")
    assert run.status == "cancelled"
    await store.save(run.model_copy(update={"status": "running"}))
    fx2 = Effects()
    model2 = CheckedModel([{"text": "unused"}, {"text": "after"}])
    r = await Session.recover(store=store, agent=fx2.agent(model2), run_id="saved")
    assert r.status == "done" and r.text == "after"
    assert fx.ran == [] and fx2.ran == []  # the interrupted call already has its (error) result
    messages = await assert_run_paired(store, "saved")
    (c,) = tool_calls(messages)
    assert result_for(messages, c.tool_call_id).is_error


async def test_a_crash_between_two_approvals_suspends_again_on_the_next_one(store: SessionStore) -> None:
    entered = asyncio.Event()
    fx = Effects(block=asyncio.Event(), entered=entered)
    model = CheckedModel([calls(("refund", {"amount": 1}), ("refund", {"amount": 2})), {"text": "done"}])
    r = await Session(store=store, agent=fx.agent(model)).start("refund both")
    first_token = r.state.suspended_on.token  # type: ignore[union-attr]
    ids = [c.tool_call_id for c in tool_calls(await run_history(store, r.run_id))]
    spy = StoreSpy(store)
    task = asyncio.create_task(
        Session.approve_suspended(
            store=spy,
            agent=fx.agent(model),
            run_id=r.run_id,
            resume_token=first_token,
        )
    )
    await wait(entered)
    await _crash(task, spy)
    fx2 = Effects()
    back = await Session.recover(store=store, agent=fx2.agent(model), run_id=r.run_id)
    assert back.status == "suspended" and back.state.suspended_on is not None
    assert back.state.suspended_on.kind == "approval" and back.state.suspended_on.tool_call_id == ids[1]
    second_token = back.state.suspended_on.token
    assert second_token != first_token
    with pytest.raises(InvalidResumeToken):
        await Session.approve_suspended(store=store, agent=fx2.agent(model), run_id=r.run_id, resume_token=first_token)
    done = await Session.approve_suspended(
        store=store, agent=fx2.agent(model), run_id=r.run_id, resume_token=second_token
    )
    assert done.status == "done"
    assert fx.ran == [] and fx2.ran == [("refund", ids[1], None)]
    messages = await assert_run_paired(store, r.run_id)
    assert "outcome unknown" in str(result_for(messages, ids[0]).result)
    assert result_for(messages, ids[1]).result == "refunded 2"
