"""Tools inside a step: validation, failures the model reads, concurrency, context, scratch, naming."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from pydantic import BaseModel

from repertory import Agent, RunState, Session, ToolContext, tool
from repertory.errors import ToolError
from repertory.storage import SessionStore

from .helpers import (
    WAIT,
    CheckedModel,
    assert_run_paired,
    call,
    calls,
    result_for,
    stored,
    tool_calls,
    tool_results,
)


def make_agent(model: Any, tools: list[Any], **kw: Any) -> Agent:
    return Agent(name="toolbox", model=model, tools=tools, **kw)


async def test_sync_and_async_tools_both_run(store: SessionStore) -> None:
    ran: list[str] = []

    @tool
    def sync_add(a: int, b: int) -> int:
        ran.append("sync")
        return a + b

    @tool
    async def async_mul(a: int, b: int) -> int:
        ran.append("async")
        return a * b

    model = CheckedModel([call("sync_add", a=2, b=3), call("async_mul", a=4, b=5), {"text": "done"}])
    r = await Session(store=store, agent=make_agent(model, [sync_add, async_mul])).start("math")
    assert r.status == "done"
    assert ran == ["sync", "async"]
    messages = await assert_run_paired(store, r.run_id)
    assert [(p.result, p.is_error) for p in tool_results(messages)] == [(5, False), (20, False)]


async def test_arguments_are_validated_and_coerced_by_pydantic(store: SessionStore) -> None:
    got: list[tuple[Any, Any]] = []

    @tool
    def add(a: int, b: int = 10) -> int:
        got.append((a, b))
        return a + b

    model = CheckedModel([call("add", a="2"), {"text": "done"}])
    r = await Session(store=store, agent=make_agent(model, [add])).start("go")
    assert got == [(2, 10)] and isinstance(got[0][0], int)
    assert tool_results(model.seen[1])[0].result == 12
    await assert_run_paired(store, r.run_id)


async def test_invalid_arguments_become_an_error_result_and_the_run_goes_on(store: SessionStore) -> None:
    ran: list[Any] = []

    @tool
    def add(a: int, b: int) -> int:
        ran.append((a, b))
        return a + b

    model = CheckedModel(
        [
            calls(("add", {"a": "not a number", "b": 1}), ("add", {"a": 1}), ("add", {"a": 1, "b": 2, "c": 3})),
            {"text": "I will fix my call"},
        ]
    )
    r = await Session(store=store, agent=make_agent(model, [add])).start("go")
    assert r.status == "done" and r.text == "I will fix my call"
    assert ran == []
    seen = tool_results(model.seen[1])
    assert len(seen) == 3 and all(p.is_error for p in seen)
    assert all("invalid arguments" in str(p.result) and "add" in str(p.result) for p in seen)
    assert "c" in str(seen[2].result)  # the unexpected argument is named
    await assert_run_paired(store, r.run_id)


async def test_a_raising_tool_gives_the_model_an_error_and_the_run_goes_on(store: SessionStore) -> None:
    @tool
    async def fragile() -> str:
        raise ValueError("disk on fire")

    @tool
    def fine() -> str:
        return "fine"

    model = CheckedModel([calls(("fragile", {}), ("fine", {})), {"text": "handled"}])
    r = await Session(store=store, agent=make_agent(model, [fragile, fine])).start("go")
    assert r.status == "done" and r.text == "handled"
    bad, good = tool_results(model.seen[1])
    assert bad.is_error and "disk on fire" in str(bad.result) and "ValueError" in str(bad.result)
    assert not good.is_error and good.result == "fine"
    await assert_run_paired(store, r.run_id)


async def test_tool_error_chooses_the_message(store: SessionStore) -> None:
    @tool
    def picky(x: int) -> str:
        raise ToolError(f"x={x} is out of range, try 1..10")

    model = CheckedModel([call("picky", x=99), {"text": "ok"}])
    r = await Session(store=store, agent=make_agent(model, [picky])).start("go")
    assert r.status == "done"
    (res,) = tool_results(model.seen[1])
    assert res.is_error and res.result == "x=99 is out of range, try 1..10"


async def test_unknown_tool_is_an_error_result(store: SessionStore) -> None:
    @tool
    def known() -> str:
        return "k"

    model = CheckedModel([call("nope", a=1), {"text": "ok"}])
    r = await Session(store=store, agent=make_agent(model, [known])).start("go")
    assert r.status == "done"
    (res,) = tool_results(model.seen[1])
    assert res.is_error and "nope" in str(res.result) and "known" in str(res.result)
    await assert_run_paired(store, r.run_id)


async def test_parallel_async_calls_run_concurrently_and_keep_call_order(store: SessionStore) -> None:
    first_started, second_done = asyncio.Event(), asyncio.Event()
    order: list[str] = []

    @tool
    async def slow_first() -> str:
        first_started.set()
        # Finishes only after the second call finished: impossible if calls ran one by one.
        await asyncio.wait_for(second_done.wait(), WAIT)
        order.append("first")
        return "first"

    @tool
    async def quick_second() -> str:
        await asyncio.wait_for(first_started.wait(), WAIT)
        order.append("second")
        second_done.set()
        return "second"

    model = CheckedModel([calls(("slow_first", {}), ("quick_second", {})), {"text": "ok"}])
    r = await Session(store=store, agent=make_agent(model, [slow_first, quick_second])).start("go")
    assert order == ["second", "first"]
    results = tool_results(model.seen[1])
    assert [(p.tool_name, p.result, p.is_error) for p in results] == [
        ("slow_first", "first", False),
        ("quick_second", "second", False),
    ]
    calls_made = tool_calls(model.seen[1])
    assert [p.tool_call_id for p in results] == [c.tool_call_id for c in calls_made]
    await assert_run_paired(store, r.run_id)


async def test_parallel_sync_calls_run_concurrently(store: SessionStore) -> None:
    barrier = threading.Barrier(3, timeout=WAIT)

    @tool
    def meet(n: int) -> int:
        barrier.wait()  # breaks (and raises) unless all three calls run at the same time
        return n

    model = CheckedModel([calls(("meet", {"n": 1}), ("meet", {"n": 2}), ("meet", {"n": 3})), {"text": "ok"}])
    r = await Session(store=store, agent=make_agent(model, [meet])).start("go")
    assert [(p.result, p.is_error) for p in tool_results(model.seen[1])] == [(1, False), (2, False), (3, False)]
    await assert_run_paired(store, r.run_id)


async def test_tool_context_carries_the_call_and_run_ids(store: SessionStore) -> None:
    contexts: list[ToolContext] = []

    @tool
    async def inspect_me(ctx: ToolContext, n: int) -> int:
        contexts.append(ctx)
        return n

    model = CheckedModel([calls(("inspect_me", {"n": 1}), ("inspect_me", {"n": 2})), {"text": "ok"}])
    sess = Session(store=store, agent=make_agent(model, [inspect_me]))
    r = await sess.start("go")
    call_ids = [c.tool_call_id for c in tool_calls(model.seen[1])]
    assert sorted(c.call_id for c in contexts) == sorted(call_ids)
    assert all(c.run_id == r.run_id and c.thread_id == sess.thread_id for c in contexts)
    assert all(c.tool_name == "inspect_me" and c.approval is None for c in contexts)
    args_by_id = {c.tool_call_id: c.args["n"] for c in tool_calls(model.seen[1])}
    for c in contexts:
        assert result_for(model.seen[1], c.call_id).result == args_by_id[c.call_id]


async def test_scratch_changes_are_persisted_in_checkpoints(store: SessionStore) -> None:
    @tool
    def count(ctx: ToolContext) -> int:
        n = int(ctx.scratch.get("count", 0)) + 1  # type: ignore[arg-type]
        ctx.scratch["count"] = n
        ctx.scratch.setdefault("seen", [])
        ctx.scratch["seen"].append(ctx.call_id)  # type: ignore[union-attr]
        return n

    checkpoints: list[RunState] = []
    model = CheckedModel([call("count"), call("count"), {"text": "ok"}])
    r = await Session(store=store, agent=make_agent(model, [count]), on_checkpoint=checkpoints.append).start("go")
    assert [tool_results(model.seen[2])[i].result for i in range(2)] == [1, 2]
    run = await stored(store, r.run_id)
    assert run.scratch["count"] == 2 and len(run.scratch["seen"]) == 2  # type: ignore[arg-type]
    # The checkpoint that committed the first tool's result already holds its scratch change.
    after_first = [c for c in checkpoints if c.step_index == 1 and c.scratch.get("count") == 1]
    assert after_first, [c.scratch for c in checkpoints]
    assert checkpoints[0].scratch == {}


async def test_tool_name_and_description(store: SessionStore) -> None:
    @tool(name="lookup_city", description="Find a city by name.")
    def find(q: str) -> str:
        """Not this docstring."""
        return q.upper()

    @tool
    def documented(x: int) -> int:
        """Double a number.

        More detail.
        """
        return 2 * x

    @tool
    def bare(x: int) -> int:
        return x

    assert find.name == "lookup_city" and find.description == "Find a city by name."
    assert documented.name == "documented" and documented.description.startswith("Double a number.")
    assert "More detail." in documented.description
    assert bare.description == ""
    model = CheckedModel([calls(("lookup_city", {"q": "oslo"}), ("documented", {"x": 2})), {"text": "ok"}])
    r = await Session(store=store, agent=make_agent(model, [find, documented, bare])).start("go")
    specs = {s.name: s for s in model.script.tools_seen[0]}
    assert set(specs) == {"lookup_city", "documented", "bare"}
    assert specs["lookup_city"].description == "Find a city by name."
    assert specs["documented"].description.startswith("Double a number.")
    assert set(specs["lookup_city"].parameters["properties"]) == {"q"}
    assert [p.result for p in tool_results(model.seen[1])] == ["OSLO", 4]
    await assert_run_paired(store, r.run_id)


class Point(BaseModel):
    x: int
    y: int


async def test_tool_results_are_converted_to_json(store: SessionStore) -> None:
    @tool
    def where(p: Point) -> Point:
        return Point(x=p.x + 1, y=p.y + 1)

    model = CheckedModel([call("where", p={"x": 1, "y": 2}), {"text": "ok"}])
    r = await Session(store=store, agent=make_agent(model, [where])).start("go")
    (res,) = tool_results(model.seen[1])
    assert res.result == {"x": 2, "y": 3} and not res.is_error
    await assert_run_paired(store, r.run_id)
