"""Tool approvals: approve, reject, replaced arguments, ordering, restarts and single-use tokens."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from repertory import Agent, RunState, Session, ToolContext, suspend, tool
from repertory.errors import InvalidResumeToken, ToolError, WrongSuspensionKind
from repertory.storage import SessionStore

from .conftest import Backend
from .helpers import (
    WAIT,
    CheckedModel,
    StoreSpy,
    assert_paired,
    assert_run_paired,
    call,
    calls,
    result_for,
    run_history,
    stored,
    tool_calls,
    tool_results,
)


class Ledger:
    """Tools that record every real execution, so a test can count them."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any], Any, str]] = []  # (tool, args, approval, call_id)
        self.gate: asyncio.Event | None = None  # when set, delete_account holds until the gate opens

        @tool(requires_approval=True)
        async def delete_account(ctx: ToolContext, account_id: str) -> str:
            """Delete an account for good."""
            self.ran.append(("delete_account", {"account_id": account_id}, ctx.approval, ctx.call_id))
            if self.gate is not None:
                await asyncio.wait_for(self.gate.wait(), WAIT)
            return f"deleted {account_id}"

        @tool(requires_approval=True)
        def wire_money(ctx: ToolContext, amount: int, to: str) -> str:
            self.ran.append(("wire_money", {"amount": amount, "to": to}, ctx.approval, ctx.call_id))
            return f"sent {amount} to {to}"

        @tool
        def lookup(ctx: ToolContext, q: str) -> str:
            self.ran.append(("lookup", {"q": q}, ctx.approval, ctx.call_id))
            return f"found {q}"

        @tool
        async def ask_human(ctx: ToolContext, question: str) -> str:
            self.ran.append(("ask_human", {"question": question}, None, ctx.call_id))
            suspend(reason="need input", payload={"question": question})

        self.tools = [delete_account, wire_money, lookup, ask_human]

    def agent(self, model: Any) -> Agent:
        return Agent(name="ops", model=model, tools=self.tools)

    def names(self) -> list[str]:
        return [r[0] for r in self.ran]


def token_of(state: RunState) -> str:
    assert state.status == "suspended" and state.suspended_on is not None
    return state.suspended_on.token


async def test_approval_suspends_with_the_call_and_no_result(store: SessionStore) -> None:
    led = Ledger()
    model = CheckedModel([call("delete_account", account_id="a1"), {"text": "done"}])
    r = await Session(store=store, agent=led.agent(model)).start("delete a1")
    on = r.state.suspended_on
    assert r.status == "suspended" and on is not None and on.kind == "approval"
    messages = await run_history(store, r.run_id)
    (c,) = tool_calls(messages)
    assert on.tool_call_id == c.tool_call_id
    assert on.payload == {"tool_name": "delete_account", "args": {"account_id": "a1"}, "tool_call_id": c.tool_call_id}
    assert messages[-1].role == "assistant" and tool_results(messages) == []
    assert_paired(messages, open_calls=[c.tool_call_id])
    assert led.ran == []
    (record,) = r.state.approvals
    assert record.tool_call_id == c.tool_call_id and record.decision is None


async def test_approve_runs_the_tool_exactly_once_with_the_approval(store: SessionStore) -> None:
    led = Ledger()
    model = CheckedModel([call("delete_account", account_id="a1"), {"text": "it is gone"}])
    sess = Session(store=store, agent=led.agent(model))
    r = await sess.start("delete a1")
    done = await sess.approve_tool(token_of(r.state), approval={"approved_by": "ops@example.com"})
    assert done.status == "done" and done.text == "it is gone"
    assert len(led.ran) == 1
    name, args, approval, call_id = led.ran[0]
    assert (name, args, approval) == ("delete_account", {"account_id": "a1"}, {"approved_by": "ops@example.com"})
    messages = await assert_run_paired(store, r.run_id)
    res = result_for(messages, call_id)
    assert res.result == "deleted a1" and not res.is_error
    (record,) = (await stored(store, r.run_id)).approvals
    assert record.decision == "approved" and record.approval == {"approved_by": "ops@example.com"}
    assert record.decided_at is not None and record.decided_at >= record.requested_at
    assert record.args == {"account_id": "a1"} and not record.args_replaced
    with pytest.raises(InvalidResumeToken):
        await sess.approve_tool(token_of(r.state))
    assert len(led.ran) == 1


async def test_args_replaced_at_approval_are_validated_and_used(store: SessionStore) -> None:
    led = Ledger()
    model = CheckedModel([call("wire_money", amount=1000, to="mallory"), {"text": "sent"}])
    sess = Session(store=store, agent=led.agent(model))
    r = await sess.start("pay")
    token = token_of(r.state)
    bad_args: list[dict[str, Any]] = [
        {"amount": "lots", "to": "bob"},
        {"amount": 5},
        {"amount": 5, "to": "bob", "extra": 1},
    ]
    for bad in bad_args:
        with pytest.raises(ToolError):
            await sess.approve_tool(token, args=bad)
        run = await stored(store, r.run_id)
        assert run.status == "suspended" and token_of(run) == token  # the token stays live
        assert run.approvals[0].decision is None
    assert led.ran == []
    done = await sess.approve_tool(token, approval="ok", args={"amount": 5, "to": "bob"})
    assert done.status == "done"
    assert [(n, a) for n, a, _, _ in led.ran] == [("wire_money", {"amount": 5, "to": "bob"})]
    messages = await assert_run_paired(store, r.run_id)
    assert result_for(messages, led.ran[0][3]).result == "sent 5 to bob"
    (record,) = (await stored(store, r.run_id)).approvals
    assert record.args == {"amount": 5, "to": "bob"} and record.args_replaced


async def test_reject_gives_an_error_result_and_the_tool_never_runs(store: SessionStore) -> None:
    led = Ledger()
    model = CheckedModel([call("delete_account", account_id="a1"), {"text": "ok, I will not"}])
    sess = Session(store=store, agent=led.agent(model))
    r = await sess.start("delete a1")
    done = await sess.reject_tool(token_of(r.state), reason="policy forbids it")
    assert done.status == "done" and done.text == "ok, I will not"
    assert led.ran == []
    (res,) = tool_results(model.seen[1])
    assert res.is_error and res.result == "policy forbids it"
    await assert_run_paired(store, r.run_id)
    (record,) = (await stored(store, r.run_id)).approvals
    assert record.decision == "rejected" and record.reason == "policy forbids it"


async def test_reject_has_a_default_reason(store: SessionStore) -> None:
    led = Ledger()
    model = CheckedModel([call("delete_account", account_id="a1"), {"text": "ok"}])
    sess = Session(store=store, agent=led.agent(model))
    r = await sess.start("delete a1")
    await sess.reject_tool(token_of(r.state))
    (res,) = tool_results(model.seen[1])
    assert res.is_error and res.result == "not approved"


async def test_several_approvals_are_asked_one_at_a_time_in_call_order(store: SessionStore) -> None:
    led = Ledger()
    model = CheckedModel(
        [
            calls(
                ("wire_money", {"amount": 1, "to": "x"}),
                ("lookup", {"q": "a"}),
                ("delete_account", {"account_id": "b"}),
                ("lookup", {"q": "c"}),
            ),
            {"text": "all done"},
        ]
    )
    sess = Session(store=store, agent=led.agent(model))
    r = await sess.start("do it all")
    step_calls = tool_calls(await run_history(store, r.run_id))
    ids = [c.tool_call_id for c in step_calls]
    # Calls needing no approval ran first; the first approval in call order is asked.
    assert led.names() == ["lookup", "lookup"]
    assert r.state.suspended_on is not None and r.state.suspended_on.tool_call_id == ids[0]
    first = token_of(r.state)
    messages = await run_history(store, r.run_id)
    assert {p.tool_call_id for p in tool_results(messages)} == {ids[1], ids[3]}
    assert_paired(messages, open_calls=[ids[0], ids[2]])

    second = await sess.approve_tool(first)
    assert second.status == "suspended"
    assert second.state.suspended_on is not None and second.state.suspended_on.tool_call_id == ids[2]
    assert second.state.suspended_on.payload["tool_name"] == "delete_account"  # type: ignore[index, call-overload]
    assert token_of(second.state) != first
    assert led.names() == ["lookup", "lookup", "wire_money"]
    assert model.requests == 1  # the model is not asked while approvals are pending
    with pytest.raises(InvalidResumeToken):
        await sess.approve_tool(first)

    done = await sess.reject_tool(token_of(second.state), "no deletes today")
    assert done.status == "done" and done.text == "all done"
    assert led.names() == ["lookup", "lookup", "wire_money"]
    final = await assert_run_paired(store, r.run_id)
    assert result_for(final, ids[2]).is_error and result_for(final, ids[2]).result == "no deletes today"
    assert result_for(final, ids[0]).result == "sent 1 to x"
    decisions = {a.tool_call_id: a.decision for a in (await stored(store, r.run_id)).approvals}
    assert decisions == {ids[0]: "approved", ids[2]: "rejected"}


async def test_a_step_with_suspend_and_approvals_asks_approvals_first(store: SessionStore) -> None:
    led = Ledger()
    model = CheckedModel(
        [
            calls(("ask_human", {"question": "why?"}), ("delete_account", {"account_id": "a1"})),
            {"text": "done"},
        ]
    )
    sess = Session(store=store, agent=led.agent(model))
    r = await sess.start("go")
    assert r.state.suspended_on is not None and r.state.suspended_on.kind == "approval"
    with pytest.raises(WrongSuspensionKind):
        await sess.resume(token_of(r.state), "too early")
    nxt = await sess.approve_tool(token_of(r.state))
    assert nxt.status == "suspended"
    assert nxt.state.suspended_on is not None and nxt.state.suspended_on.kind == "suspend"
    assert nxt.state.suspended_on.payload == {"question": "why?"}
    done = await sess.resume(token_of(nxt.state), "because")
    assert done.status == "done"
    assert led.names() == ["ask_human", "delete_account"]
    messages = await assert_run_paired(store, r.run_id)
    roles = [m.role for m in messages]
    assert roles[-2:] == ["user", "assistant"] and messages[-2].text == "because"
    # The resume value follows every result of that step.
    user_at = len(messages) - 2
    step_ids = {c.tool_call_id for c in tool_calls(messages)}
    assert all(i < user_at for i, m in enumerate(messages) for p in m.tool_results if p.tool_call_id in step_ids)


@pytest.mark.durable
async def test_approve_suspended_after_a_restart(backend: Backend) -> None:
    led = Ledger()
    r = await Session(
        store=backend.store, agent=led.agent(CheckedModel([call("delete_account", account_id="z")]))
    ).start("delete z")
    token = token_of(r.state)
    store = await backend.restart()
    led2 = Ledger()  # the new process's tools
    model = CheckedModel([call("delete_account", account_id="z"), {"text": "deleted after restart"}])
    done = await Session.approve_suspended(
        store=store, agent=led2.agent(model), run_id=r.run_id, resume_token=token, approval={"by": "me"}
    )
    assert done.status == "done" and done.text == "deleted after restart"
    assert led.ran == [] and [(n, a, ap) for n, a, ap, _ in led2.ran] == [
        ("delete_account", {"account_id": "z"}, {"by": "me"})
    ]
    await assert_run_paired(store, r.run_id)
    with pytest.raises(InvalidResumeToken):
        await Session.reject_suspended(store=store, agent=led2.agent(model), run_id=r.run_id, resume_token=token)


@pytest.mark.durable
async def test_reject_suspended_after_a_restart(backend: Backend) -> None:
    led = Ledger()
    r = await Session(
        store=backend.store, agent=led.agent(CheckedModel([call("delete_account", account_id="z")]))
    ).start("delete z")
    token = token_of(r.state)
    store = await backend.restart()
    model = CheckedModel([call("delete_account", account_id="z"), {"text": "understood"}])
    done = await Session.reject_suspended(
        store=store, agent=led.agent(model), run_id=r.run_id, resume_token=token, reason="nope"
    )
    assert done.status == "done" and led.ran == []
    assert tool_results(model.seen[0])[0].result == "nope"
    with pytest.raises(InvalidResumeToken):
        await Session.approve_suspended(store=store, agent=led.agent(model), run_id=r.run_id, resume_token=token)
    assert led.ran == []


async def test_a_token_is_single_use_across_approve_and_reject(store: SessionStore) -> None:
    led = Ledger()
    model = CheckedModel([call("delete_account", account_id="a"), {"text": "ok"}])
    a = led.agent(model)
    r1 = await Session(store=store, agent=a).start("one")
    await Session.approve_suspended(store=store, agent=a, run_id=r1.run_id, resume_token=token_of(r1.state))
    with pytest.raises(InvalidResumeToken):
        await Session.reject_suspended(store=store, agent=a, run_id=r1.run_id, resume_token=token_of(r1.state))
    with pytest.raises(InvalidResumeToken):
        await Session.approve_suspended(store=store, agent=a, run_id=r1.run_id, resume_token=token_of(r1.state))
    r2 = await Session(store=store, agent=a).start("two")
    await Session.reject_suspended(store=store, agent=a, run_id=r2.run_id, resume_token=token_of(r2.state))
    with pytest.raises(InvalidResumeToken):
        await Session.approve_suspended(store=store, agent=a, run_id=r2.run_id, resume_token=token_of(r2.state))
    assert len(led.ran) == 1


async def _race(led: Ledger, agent: Agent, run_id: str, token: str, stores: list[Any]) -> list[Any]:
    """Redeem one token once per store object, concurrently.

    The winner's tool holds until every other redemption has failed, so the losers cannot lose
    merely because the winner already finished the run: the token itself must stop them.
    """
    n = len(stores)
    lost = 0
    all_lost = asyncio.Event()
    led.gate = all_lost

    async def redeem(i: int, s: Any) -> Any:
        nonlocal lost
        try:
            return await Session.approve_suspended(store=s, agent=agent, run_id=run_id, resume_token=token, approval=i)
        except Exception:
            lost += 1
            if lost == n - 1:
                all_lost.set()
            raise

    return await asyncio.gather(*(redeem(i, s) for i, s in enumerate(stores)), return_exceptions=True)


def _check_race(outcomes: list[Any], led: Ledger) -> None:
    winners = [o for o in outcomes if not isinstance(o, BaseException)]
    losers = [o for o in outcomes if isinstance(o, BaseException)]
    assert led.names() == ["delete_account"], f"the approved tool ran {len(led.ran)} times"
    assert len(winners) == 1, outcomes
    assert all(isinstance(e, InvalidResumeToken) for e in losers), [repr(e) for e in losers]
    assert winners[0].status == "done"


async def test_concurrent_redemption_exactly_one_proceeds(store: SessionStore) -> None:
    led = Ledger()
    a = led.agent(CheckedModel([call("delete_account", account_id="a"), {"text": "ok"}]))
    r = await Session(store=store, agent=a).start("go")
    outcomes = await _race(led, a, r.run_id, token_of(r.state), [store] * 10)
    _check_race(outcomes, led)
    await assert_run_paired(store, r.run_id)


async def test_concurrent_redemption_racing_at_the_commit(store: SessionStore) -> None:
    """All ten redeemers pass the pre-checks before any of them commits: the commit decides."""
    led = Ledger()
    a = led.agent(CheckedModel([call("delete_account", account_id="a"), {"text": "ok"}]))
    r = await Session(store=store, agent=a).start("go")
    barrier = asyncio.Barrier(10)
    spies = []
    for _ in range(10):
        spy = StoreSpy(store)
        armed = [True]

        async def hold(*_: Any, armed: list[bool] = armed, **kw: Any) -> None:
            if armed[0] and kw.get("redeem_token") is not None:
                armed[0] = False
                await asyncio.wait_for(barrier.wait(), 10)

        spy.before["commit_session"] = hold
        spies.append(spy)
    outcomes = await _race(led, a, r.run_id, token_of(r.state), spies)
    _check_race(outcomes, led)
    await assert_run_paired(store, r.run_id)


async def test_a_late_redeemer_gets_invalid_token_even_after_the_winner_moved_on(store: SessionStore) -> None:
    """A redeemer that read the run before the winner's commits and the thread after them."""
    led = Ledger()
    a = led.agent(CheckedModel([call("delete_account", account_id="a"), {"text": "ok"}]))
    r = await Session(store=store, agent=a).start("go")
    token = token_of(r.state)
    read_run, winner_done = asyncio.Event(), asyncio.Event()
    late = StoreSpy(store)

    async def before_load_thread(*_: Any, **__: Any) -> None:
        # The late redeemer has checked the token against the run it read; now the winner goes first.
        read_run.set()
        await asyncio.wait_for(winner_done.wait(), 10)

    late.before["load_thread"] = before_load_thread

    async def loser() -> Any:
        return await Session.approve_suspended(
            store=late,
            agent=a,
            run_id=r.run_id,
            resume_token=token,
        )

    task = asyncio.create_task(loser())
    await asyncio.wait_for(read_run.wait(), 10)
    won = await Session.approve_suspended(store=store, agent=a, run_id=r.run_id, resume_token=token)
    assert won.status == "done"
    winner_done.set()
    with pytest.raises(InvalidResumeToken):
        await task
    assert led.names() == ["delete_account"]


@pytest.mark.durable
async def test_concurrent_redemption_through_separate_store_objects(backend: Backend) -> None:
    led = Ledger()
    a = led.agent(CheckedModel([call("delete_account", account_id="a"), {"text": "ok"}]))
    r = await Session(store=backend.store, agent=a).start("go")
    stores = [await backend.open_another() for _ in range(10)]
    outcomes = await _race(led, a, r.run_id, token_of(r.state), stores)
    _check_race(outcomes, led)
    await assert_run_paired(backend.store, r.run_id)


async def test_approval_with_invalid_original_args_is_never_asked(store: SessionStore) -> None:
    led = Ledger()
    model = CheckedModel([call("wire_money", amount="lots", to="x"), {"text": "oops"}])
    r = await Session(store=store, agent=led.agent(model)).start("pay")
    assert r.status == "done"
    (res,) = tool_results(model.seen[1])
    assert res.is_error and "invalid arguments" in str(res.result)
    assert led.ran == []


async def test_an_approved_tool_may_suspend_in_turn(store: SessionStore) -> None:
    ran: list[str] = []

    @tool(requires_approval=True)
    def deploy(ctx: ToolContext, env: str) -> str:
        ran.append(env)
        suspend(reason="confirm the rollout", payload={"env": env})

    model = CheckedModel([call("deploy", env="prod"), {"text": "rolled out"}])
    sess = Session(store=store, agent=Agent(name="d", model=model, tools=[deploy]))
    r = await sess.start("deploy")
    nxt = await sess.approve_tool(token_of(r.state))
    assert ran == ["prod"]
    assert nxt.status == "suspended" and nxt.state.suspended_on is not None
    assert nxt.state.suspended_on.kind == "suspend" and nxt.state.suspended_on.payload == {"env": "prod"}
    done = await sess.resume(token_of(nxt.state), "confirmed")
    assert done.status == "done" and ran == ["prod"]
    await assert_run_paired(store, r.run_id)


async def test_an_approved_tools_result_is_durable_before_the_model_is_asked(store: SessionStore) -> None:
    """The real result of an irreversible tool must not live only in memory during the next model
    call: a crash there turns it into "outcome unknown" although the tool finished."""
    led = Ledger()
    durable: list[list[Any]] = []

    async def next_step(messages: list[Any]) -> dict[str, Any]:
        durable.append([(p.result, p.is_error) for p in tool_results(await run_history(store, "decided"))])
        return {"text": "ok"}

    model = CheckedModel([call("delete_account", account_id="a"), next_step])
    sess = Session(store=store, agent=led.agent(model))
    r = await sess.start("delete a", run_id="decided")
    await sess.approve_tool(token_of(r.state))
    assert led.names() == ["delete_account"]
    assert durable == [[("deleted a", False)]]


async def test_a_fresh_steps_results_are_durable_before_the_model_is_asked(store: SessionStore) -> None:
    led = Ledger()
    durable: list[list[Any]] = []

    async def next_step(messages: list[Any]) -> dict[str, Any]:
        durable.append([p.result for p in tool_results(await run_history(store, "fresh"))])
        return {"text": "ok"}

    model = CheckedModel([call("lookup", q="x"), next_step])
    await Session(store=store, agent=led.agent(model)).start("look", run_id="fresh")
    assert durable == [["found x"]]
