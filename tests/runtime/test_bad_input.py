"""Bad input: non-JSON scratch, wrong input types, bad configuration, duplicate run ids, bad tokens."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from pydantic import ValidationError

from repertory import Agent, RunState, Session, ToolContext, suspend, tool
from repertory.errors import CommitConflict, InvalidResumeToken
from repertory.storage import SessionStore
from repertory.testing import ScriptedModel

from .helpers import CheckedModel, call, stored


@tool
def noop() -> str:
    return "ok"


def make_agent(model: Any, tools: list[Any] | None = None, **kw: Any) -> Agent:
    return Agent(name="strict", model=model, tools=tools if tools is not None else [noop], **kw)


def test_run_state_rejects_non_json_scratch() -> None:
    for bad in [object(), {1, 2}, (1, 2), b"bytes"]:
        with pytest.raises(ValidationError):
            RunState(run_id="r", thread_id="t", scratch={"x": bad})
    with pytest.raises(ValidationError):
        RunState.model_validate({"run_id": "r", "thread_id": "t", "scratch": {"x": {"nested": object()}}})
    ok = RunState(run_id="r", thread_id="t", scratch={"x": [1, "a", None, {"b": 2.5}]})
    assert RunState.model_validate_json(ok.model_dump_json()) == ok


def test_run_state_rejects_a_newer_schema_version() -> None:
    with pytest.raises(ValidationError, match="newer"):
        RunState(run_id="r", thread_id="t", schema_version=99)


async def test_a_tool_putting_a_non_json_object_in_scratch_fails_the_run_with_an_error_checkpoint(
    store: SessionStore,
) -> None:
    @tool
    def hoard(ctx: ToolContext) -> str:
        ctx.scratch["conn"] = object()  # type: ignore[assignment]
        return "stored"

    model = CheckedModel([call("hoard"), {"text": "done"}])
    sess = Session(store=store, agent=make_agent(model, [hoard]))
    with pytest.raises(Exception):  # noqa: B017 - which exception is the engine's choice; the checkpoint is not
        await sess.start("go", run_id="hoarder")
    run = await stored(store, "hoarder")
    assert run.status == "error", f"the run was left {run.status!r}: the failure was never checkpointed"
    assert run.error is not None
    json.loads(run.model_dump_json())


async def test_a_tool_putting_a_set_in_scratch_is_stored_as_json(store: SessionStore) -> None:
    @tool
    def tag(ctx: ToolContext) -> str:
        ctx.scratch["tags"] = {"b", "a"}  # type: ignore[assignment]
        return "tagged"

    model = CheckedModel([call("tag"), {"text": "done"}])
    r = await Session(store=store, agent=make_agent(model, [tag])).start("go")
    assert r.status == "done"
    run = await stored(store, r.run_id)
    tags = run.scratch["tags"]
    assert isinstance(tags, list)
    assert sorted(cast("list[str]", tags)) == ["a", "b"]


@pytest.mark.parametrize("bad", [123, ["hello"], {"text": "hi"}, {"messages": [], "extra": 1}, b"hi"])
async def test_a_bad_session_input_type_raises_type_error(store: SessionStore, bad: Any) -> None:
    model = CheckedModel([{"text": "ok"}])
    sess = Session(store=store, agent=make_agent(model))
    with pytest.raises(TypeError):
        await sess.start(bad)
    assert await store.list_runs() == []
    assert model.requests == 0
    assert (await sess.start("fine")).status == "done"  # the session is not left busy


async def test_no_input_is_a_reply_and_needs_a_conversation(store: SessionStore) -> None:
    model = CheckedModel([{"text": "first"}, {"text": "again"}])
    sess = Session(store=store, agent=make_agent(model))
    with pytest.raises(ValueError, match="has none yet"):
        await sess.start(None)
    assert await store.list_runs() == [] and model.requests == 0
    await sess.start("hello")
    replied = await sess.start(None)  # the model answers the thread as it stands; no message is added
    assert replied.text == "again"
    assert [m.text for m in model.seen[-1]] == ["hello", "first"]


async def test_malformed_messages_raise_and_store_nothing(store: SessionStore) -> None:
    sess = Session(store=store, agent=make_agent(CheckedModel([{"text": "ok"}])))
    with pytest.raises(ValueError):
        await sess.start({"messages": []})
    with pytest.raises(ValidationError):
        await sess.start({"messages": [{"role": "nobody", "parts": []}]})
    with pytest.raises(ValidationError):
        await sess.start({"messages": "hello"})
    assert await store.list_runs() == []


@pytest.mark.parametrize("steps", [0, -1])
def test_agent_max_steps_must_be_positive(steps: int) -> None:
    with pytest.raises(ValueError):
        Agent(name="a", model=ScriptedModel([]), max_steps=steps)


def test_agent_refuses_two_tools_with_one_name() -> None:
    @tool(name="noop")
    def other() -> str:
        return "x"

    with pytest.raises(ValueError):
        Agent(name="a", model=ScriptedModel([]), tools=[noop, other])


def test_a_tool_with_var_args_is_refused() -> None:
    with pytest.raises(TypeError):

        @tool
        def spread(*args: int) -> int:
            return sum(args)


def test_scripted_model_refuses_a_negative_delay() -> None:
    with pytest.raises(ValueError):
        ScriptedModel([], delay=-1)


async def test_a_duplicate_run_id_raises_commit_conflict(store: SessionStore) -> None:
    model = CheckedModel([{"text": "one"}, {"text": "two"}])
    sess = Session(store=store, agent=make_agent(model))
    await sess.start("first", run_id="dup")
    before = await stored(store, "dup")
    with pytest.raises(CommitConflict):
        await sess.start("second", run_id="dup")
    with pytest.raises(CommitConflict):
        await Session(store=store, agent=make_agent(model)).start("elsewhere", run_id="dup")
    assert await stored(store, "dup") == before
    assert model.requests == 1
    assert (await sess.start("third")).status == "done"  # not left busy


async def test_non_string_tokens_are_invalid(store: SessionStore) -> None:
    @tool
    def wait_here() -> str:
        suspend()

    sess = Session(store=store, agent=make_agent(CheckedModel([call("wait_here"), {"text": "ok"}]), [wait_here]))
    r = await sess.start("go")
    for bad in [None, 123, b"bytes"]:
        with pytest.raises(InvalidResumeToken):
            await sess.resume(bad, "v")  # type: ignore[arg-type]
    assert (await sess.resume(r.state.suspended_on.token, "v")).status == "done"  # type: ignore[union-attr]
