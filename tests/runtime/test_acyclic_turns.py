"""A finished turn leaves no reference cycles behind, so the cyclic collector has nothing of ours to find.

With thousands of resident sessions the collector's full passes were a third to a half of the CPU
(issue 21). Refcounting frees acyclic garbage at once; a cycle lives until a pass finds it. So after
warmed-up turns of every kind (a plain run, an approval, a rejection, a resume, a sent turn and its
result, an erroring tool, a failing model, a listener, an event stream, passivation and activation
again) the collector, saving what it finds (``DEBUG_SAVEALL``), must find nothing. This is a
count, not a timing.
"""

from __future__ import annotations

import collections
import gc
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any, cast

import pytest

from repertory import Agent, ModelMessage, Runtime, SessionEvent, SessionHandle, suspend, tool
from repertory.core.model import ToolSpec
from repertory.runtime.host import LocalHost
from repertory.testing import ScriptedModel


@tool(requires_approval=True)
async def deploy(target: str) -> str:
    """Deploy, once approved."""
    return f"deployed {target}"


@tool
async def ask(question: str) -> str:
    """Wait for a human's answer."""
    suspend(reason="needs an answer", payload={"question": question})


@tool
async def broken() -> str:
    """A tool whose failure the model reads."""
    raise ValueError("broken tool")


def _step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    last = messages[-1]
    if last.role == "user":
        verb = last.text.split()[0]
        if verb == "deploy":
            return {"tool": "deploy", "args": {"target": "prod"}}
        if verb == "ask":
            return {"tool": "ask", "args": {"question": "go?"}}
        if verb == "boom":
            return {"tool": "broken", "args": {}}
        if verb == "fail":
            raise RuntimeError("the model is down")
    return {"text": "ok"}


async def _turns(rt: Runtime, handles: list[SessionHandle], round_: int) -> None:
    for h in handles:
        assert (await h.run(f"hello {round_}")).status == "done"
        approval = await h.run(f"deploy {round_}")
        assert approval.state.suspended_on is not None
        assert (await h.approve(approval.state.suspended_on.token, {"by": "test"})).status == "done"
        question = await h.run(f"ask {round_}")
        assert question.state.suspended_on is not None
        assert (await h.resume(question.state.suspended_on.token, "yes")).status == "done"
        rejected = await h.run(f"deploy {round_}")
        assert rejected.state.suspended_on is not None
        assert (await h.reject(rejected.state.suspended_on.token, "no")).status == "done"
        sent = await h.send(f"sent {round_}")
        assert (await sent.result()).status == "done"
        assert (await h.run(f"boom {round_}")).status == "done"
        with pytest.raises(Exception, match="the model is down"):
            await h.run(f"fail {round_}")
        await h.metadata()
        h.on_progress(lambda event: None).dispose()
        stream = cast(AsyncGenerator[SessionEvent, None], h.events())  # the local backend's is a generator
        await stream.__anext__()
        await stream.aclose()
    host = rt.host
    assert isinstance(host, LocalHost)
    assert host.passivate_idle(0.0) == len(handles)
    for h in handles:
        assert (await h.run(f"again {round_}")).status == "done"


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_warmed_up_turns_leave_no_cyclic_garbage(store: str, tmp_path: Path) -> None:
    url = "memory://" if store == "memory" else f"sqlite:///{tmp_path / 'acyclic.db'}"
    agent = Agent(name="a", model=ScriptedModel(_step), tools=[deploy, ask, broken], instructions="Be brief.")
    rt = await Runtime.start(store=url, agents={"a": agent}, idle_timeout=3600.0)
    try:
        handles = [await rt.create_session(agent="a") for _ in range(3)]
        await _turns(rt, handles, 0)  # warm-up: imports, validators, reader connections, caches
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            await _turns(rt, handles, 1)
            gc.collect()
            found = collections.Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.garbage)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
        assert not found, f"the turns left reference cycles: {found.most_common(12)}"
    finally:
        await rt.close()
