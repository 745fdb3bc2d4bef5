"""suspend() from a tool, resume(), token rules and the stateless resume_suspended helper."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from repertory import Agent, ModelMessage, RunResult, Session, suspend, tool
from repertory.errors import InvalidResumeToken, RunNotFound, WrongSuspensionKind
from repertory.storage import SessionStore

from .conftest import Backend
from .helpers import CheckedModel, assert_paired, assert_run_paired, call, run_history, stored, tool_calls


@tool
async def ask_human(question: str) -> str:
    """Ask a person; the answer arrives as the resume value."""
    suspend(reason="need input", payload={"question": question})


@tool(requires_approval=True)
def delete_account(account_id: str) -> str:
    return f"deleted {account_id}"


def make_agent(model: Any) -> Agent:
    return Agent(name="asker", model=model, tools=[ask_human, delete_account])


def script(*tail: Any) -> CheckedModel:
    return CheckedModel([call("ask_human", question="which city?"), *tail])


async def test_a_suspending_tool_gets_a_result_saying_so(store: SessionStore) -> None:
    model = script({"text": "thanks"})
    sess = Session(store=store, agent=make_agent(model))
    r = await sess.start("plan my trip")
    assert r.status == "suspended" and r.text is None
    on = r.state.suspended_on
    assert on is not None
    assert on.kind == "suspend" and on.reason == "need input" and on.payload == {"question": "which city?"}
    assert on.token
    run = await stored(store, r.run_id)
    assert run.status == "suspended" and run.suspended_on == on
    messages = await run_history(store, r.run_id)
    (c,) = tool_calls(messages)
    assert on.tool_call_id == c.tool_call_id
    assert_paired(messages)  # the suspending call already has its result
    result = messages[-1].parts[0]
    assert messages[-1].role == "tool" and not result.is_error  # type: ignore[union-attr]
    assert "suspend" in str(result.result)  # type: ignore[union-attr]
    assert model.requests == 1


async def test_resume_with_a_string_follows_as_a_verbatim_user_message(store: SessionStore) -> None:
    model = script({"text": "booked Oslo"})
    sess = Session(store=store, agent=make_agent(model))
    r = await sess.start("plan my trip")
    done = await sess.resume(r.state.suspended_on.token, "  Oslo, please\n")  # type: ignore[union-attr]
    assert done.status == "done" and done.text == "booked Oslo"
    assert done.run_id == r.run_id
    request = model.seen[1]
    assert request[-1].role == "user" and request[-1].text == "  Oslo, please\n"
    assert request[-2].role == "tool"
    messages = await assert_run_paired(store, r.run_id)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "user", "assistant"]
    run = await stored(store, r.run_id)
    assert run.suspended_on is None and run.step_index == 2


async def test_resume_with_a_non_string_is_sent_as_json(store: SessionStore) -> None:
    model = script({"text": "ok"})
    sess = Session(store=store, agent=make_agent(model))
    r = await sess.start("plan")
    value = {"departure": "2026-08-01", "seats": 2, "names": ["Å", "B"]}
    await sess.resume(r.state.suspended_on.token, value)  # type: ignore[union-attr]
    assert json.loads(model.seen[1][-1].text) == value
    model2 = script({"text": "ok"})
    sess2 = Session(store=store, agent=make_agent(model2))
    r2 = await sess2.start("plan")
    await sess2.resume(r2.state.suspended_on.token, 42)  # type: ignore[union-attr]
    assert model2.seen[1][-1].text == "42"


async def test_resume_with_the_wrong_token_is_refused_and_the_token_stays_live(store: SessionStore) -> None:
    sess = Session(store=store, agent=make_agent(script({"text": "ok"})))
    r = await sess.start("plan")
    token = r.state.suspended_on.token  # type: ignore[union-attr]
    for wrong in ["nope", token[:-1], token + "x", ""]:
        with pytest.raises(InvalidResumeToken):
            await sess.resume(wrong, "x")
    assert (await stored(store, r.run_id)).status == "suspended"
    assert (await sess.resume(token, "Oslo")).status == "done"


async def test_a_token_is_single_use(store: SessionStore) -> None:
    model = CheckedModel([call("ask_human", question="a"), call("ask_human", question="b"), {"text": "ok"}])
    sess = Session(store=store, agent=make_agent(model))
    r = await sess.start("plan")
    t1 = r.state.suspended_on.token  # type: ignore[union-attr]
    r2 = await sess.resume(t1, "first answer")
    assert r2.status == "suspended"
    t2 = r2.state.suspended_on.token  # type: ignore[union-attr]
    assert t2 != t1
    with pytest.raises(InvalidResumeToken):
        await sess.resume(t1, "again")
    done = await sess.resume(t2, "second answer")
    assert done.status == "done"
    with pytest.raises(InvalidResumeToken):
        await sess.resume(t2, "again")  # the run is done: no token is live
    with pytest.raises(InvalidResumeToken):
        await Session.resume_suspended(
            store=store, agent=make_agent(model), run_id=r.run_id, resume_token=t2, value="again"
        )
    await assert_run_paired(store, r.run_id)


async def test_resume_of_an_approval_is_the_wrong_kind_and_keeps_the_token(store: SessionStore) -> None:
    model = CheckedModel([call("delete_account", account_id="a1"), {"text": "gone"}])
    sess = Session(store=store, agent=make_agent(model))
    r = await sess.start("delete a1")
    on = r.state.suspended_on
    assert on is not None and on.kind == "approval"
    with pytest.raises(WrongSuspensionKind):
        await sess.resume(on.token, "yes")
    with pytest.raises(WrongSuspensionKind):
        await Session.resume_suspended(
            store=store, agent=make_agent(model), run_id=r.run_id, resume_token=on.token, value="yes"
        )
    run = await stored(store, r.run_id)
    assert run.status == "suspended" and run.suspended_on is not None and run.suspended_on.token == on.token
    done = await sess.approve_tool(on.token)
    assert done.status == "done" and done.text == "gone"


async def test_approve_of_a_suspend_is_the_wrong_kind_and_keeps_the_token(store: SessionStore) -> None:
    model = script({"text": "ok"})
    sess = Session(store=store, agent=make_agent(model))
    r = await sess.start("plan")
    token = r.state.suspended_on.token  # type: ignore[union-attr]
    with pytest.raises(WrongSuspensionKind):
        await sess.approve_tool(token)
    with pytest.raises(WrongSuspensionKind):
        await sess.reject_tool(token, "no")
    with pytest.raises(WrongSuspensionKind):
        await Session.approve_suspended(store=store, agent=make_agent(model), run_id=r.run_id, resume_token=token)
    with pytest.raises(WrongSuspensionKind):
        await Session.reject_suspended(store=store, agent=make_agent(model), run_id=r.run_id, resume_token=token)
    assert (await sess.resume(token, "Oslo")).status == "done"


async def test_a_wrong_token_is_checked_before_the_kind(store: SessionStore) -> None:
    sess = Session(store=store, agent=make_agent(script({"text": "ok"})))
    r = await sess.start("plan")
    with pytest.raises(InvalidResumeToken):
        await sess.approve_tool("not-the-token")
    with pytest.raises(InvalidResumeToken):
        await Session.reject_suspended(store=store, agent=sess.agent, run_id=r.run_id, resume_token="nope")
    assert (await stored(store, r.run_id)).suspended_on == r.state.suspended_on


async def test_unknown_run_ids_raise_run_not_found(store: SessionStore) -> None:
    a = make_agent(script())
    with pytest.raises(RunNotFound):
        await Session.resume_suspended(store=store, agent=a, run_id="missing", resume_token="t", value="v")
    with pytest.raises(RunNotFound):
        await Session.approve_suspended(store=store, agent=a, run_id="missing", resume_token="t")
    with pytest.raises(RunNotFound):
        await Session.reject_suspended(store=store, agent=a, run_id="missing", resume_token="t")
    with pytest.raises(RunNotFound):
        await Session.recover(store=store, agent=a, run_id="missing")


async def test_instance_decisions_before_any_run_raise_run_not_found(store: SessionStore) -> None:
    sess = Session(store=store, agent=make_agent(script()))
    with pytest.raises(RunNotFound):
        await sess.resume("t", "v")
    with pytest.raises(RunNotFound):
        await sess.approve_tool("t")
    with pytest.raises(RunNotFound):
        await sess.reject_tool("t")


async def test_resume_suspended_from_a_fresh_session_object(store: SessionStore) -> None:
    model = script({"text": "booked"})
    r = await Session(store=store, agent=make_agent(model)).start("plan")
    token = r.state.suspended_on.token  # type: ignore[union-attr]
    seen: list[str] = []
    done = await Session.resume_suspended(
        store=store,
        agent=make_agent(model),
        run_id=r.run_id,
        resume_token=token,
        value="Oslo",
        on_checkpoint=lambda s: seen.append(s.status),
    )
    assert done.status == "done" and done.text == "booked" and done.run_id == r.run_id
    assert seen and seen[-1] == "done"
    assert model.seen[1][-1].text == "Oslo"
    await assert_run_paired(store, r.run_id)


@pytest.mark.durable
async def test_resume_suspended_after_a_restart(backend: Backend) -> None:
    r = await Session(store=backend.store, agent=make_agent(script())).start("plan")
    token = r.state.suspended_on.token  # type: ignore[union-attr]
    store = await backend.restart()
    model = script({"text": "booked after restart"})  # a new process: a new model object too
    done = await Session.resume_suspended(
        store=store, agent=make_agent(model), run_id=r.run_id, resume_token=token, value="Oslo"
    )
    assert done.status == "done" and done.text == "booked after restart"
    assert model.requests == 1
    assert [m.text for m in model.seen[0]][-1] == "Oslo"
    await assert_run_paired(store, r.run_id)
    with pytest.raises(InvalidResumeToken):
        await Session.resume_suspended(
            store=store, agent=make_agent(model), run_id=r.run_id, resume_token=token, value="again"
        )


async def test_step_index_and_usage_carry_across_a_resume(store: SessionStore) -> None:
    model = CheckedModel(
        [
            {**call("ask_human", question="q"), "usage": {"input_tokens": 5, "output_tokens": 1}},
            {"text": "ok", "usage": {"input_tokens": 7, "output_tokens": 2}},
        ]
    )
    sess = Session(store=store, agent=make_agent(model))
    r = await sess.start("plan")
    assert r.state.step_index == 1
    done = await sess.resume(r.state.suspended_on.token, "a")  # type: ignore[union-attr]
    assert done.state.step_index == 2
    assert done.state.usage.input_tokens == 12 and done.state.usage.output_tokens == 3
    assert done.state.usage.requests == 2


async def test_resume_value_reaches_the_model_after_the_suspend_note(store: SessionStore) -> None:
    def check(messages: list[ModelMessage]) -> dict[str, Any]:
        roles = [m.role for m in messages]
        assert roles == ["user", "assistant", "tool", "user"]
        return {"text": "ok"}

    sess = Session(store=store, agent=make_agent(script(check)))
    r = await sess.start("plan")
    assert (await sess.resume(r.state.suspended_on.token, "answer")).status == "done"  # type: ignore[union-attr]


async def test_two_suspends_in_one_step_are_asked_in_call_order(store: SessionStore) -> None:
    def check(messages: list[ModelMessage]) -> dict[str, Any]:
        assert [m.role for m in messages] == ["user", "assistant", "tool", "user", "user"]
        assert [m.text for m in messages[-2:]] == ["first answer", "second answer"]
        return {"text": "ok"}

    model = CheckedModel(
        [
            {
                "tools": [
                    {"tool": "ask_human", "args": {"question": "one"}},
                    {"tool": "ask_human", "args": {"question": "two"}},
                ]
            },
            check,
        ]
    )
    sess = Session(store=store, agent=make_agent(model))
    r = await sess.start("go")
    ids = [c.tool_call_id for c in tool_calls(await run_history(store, r.run_id))]
    assert r.state.suspended_on is not None and r.state.suspended_on.tool_call_id == ids[0]
    assert r.state.suspended_on.payload == {"question": "one"}
    r2 = await sess.resume(r.state.suspended_on.token, "first answer")
    assert r2.status == "suspended" and r2.state.suspended_on is not None
    assert r2.state.suspended_on.tool_call_id == ids[1] and r2.state.suspended_on.payload == {"question": "two"}
    assert model.requests == 1
    done = await sess.resume(r2.state.suspended_on.token, "second answer")
    assert done.status == "done" and model.requests == 2
    await assert_run_paired(store, r.run_id)


async def test_tokens_never_appear_in_error_messages(store: SessionStore) -> None:
    model = CheckedModel([call("delete_account", account_id="a"), {"text": "ok"}])
    sess = Session(store=store, agent=make_agent(model))
    r = await sess.start("go")
    token = r.state.suspended_on.token  # type: ignore[union-attr]
    errors: list[Exception] = []
    attempts: list[Callable[[], Awaitable[RunResult]]] = [
        lambda: sess.resume(token, "x"),
        lambda: sess.approve_tool(token + "x"),
    ]
    for attempt in attempts:
        try:
            await attempt()
        except Exception as exc:
            errors.append(exc)
    await sess.approve_tool(token)
    try:
        await sess.approve_tool(token)
    except Exception as exc:
        errors.append(exc)
    assert len(errors) == 3
    for error in errors:
        assert token not in str(error) and token not in repr(error)
        assert token not in repr(getattr(error, "details", {}))
