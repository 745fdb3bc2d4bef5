"""Child process for ``test_durability.py``: drives sessions whose tools live on a real MCP server.

``python -m tests.mcp._crash_worker loop DB LOG COMMITS``
    Prints ``ready``, recovers every run a previous incarnation left ``running`` (or ``error``),
    then starts new runs, three at a time, forever, until it is SIGKILLed. Every checkpoint appends
    ``run_id revision_id`` to COMMITS after its commit returned.

``python -m tests.mcp._crash_worker once DB LOG TOOL``
    Starts one run whose first step calls TOOL (``charge`` or ``put``) slowly, prints ``ready``
    and the run id, and drives it until it is SIGKILLed during that call.

The tools are the test server's (``servers/tools_server.py``, a child of this process, logging
every call it receives to LOG): ``charge`` has no annotations (not idempotent), ``put`` says
``idempotentHint: true``. Every call carries a reference unique to its run and step, so the log
says how often the server received each call.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from typing import Any

from repertory import Agent, ModelMessage, RunState, Session, SqliteSessionStore, ToolSpec
from repertory.testing import ScriptedModel
from tests.mcp.helpers import tools_server

STEPS = 4


def _append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def loop_step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """Three steps of calls, then a reply; references come from the run's first message."""
    run = messages[0].text
    n = sum(1 for m in messages if m.role == "assistant")
    if n == 0:
        return {
            "tools": [
                {"tool": "charge", "args": {"amount": 1, "delay": 0.01, "ref": f"{run}/c1"}},
                {"tool": "put", "args": {"key": f"{run}/p1", "value": "a", "delay": 0.01}},
            ]
        }
    if n == 1:
        return {"tool": "charge", "args": {"amount": 2, "delay": 0.005, "ref": f"{run}/c2"}}
    if n == 2:
        return {
            "tools": [
                {"tool": "put", "args": {"key": f"{run}/p2", "value": "b", "delay": 0.01}},
                {"tool": "put", "args": {"key": f"{run}/p3", "value": "c"}},
            ]
        }
    return {"text": "done"}


def once_step(tool: str) -> Any:
    """One slow call of ``tool``, then a reply that quotes its result."""

    def step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        run = messages[0].text
        if not any(m.role == "assistant" for m in messages):
            if tool == "charge":
                return {"tool": "charge", "args": {"amount": 7, "delay": 60, "ref": f"{run}/once"}}
            return {"tool": "put", "args": {"key": f"{run}/once", "value": "v", "delay": 60}}
        last = messages[-1].tool_results[0]
        return {"text": f"{'error' if last.is_error else 'ok'}: {last.result}"}

    return step


def build_agent(log: str, step: Any = loop_step) -> Agent:
    """The agent the worker and the parent (for recovery) both use."""
    return Agent(name="mcp-crashy", model=ScriptedModel(step, delay=0.001), tools=[tools_server(log)])


async def loop(db: str, log: str, commits: str) -> None:
    store = await SqliteSessionStore.open(db)
    print("ready", flush=True)
    agent = build_agent(log)

    def on_checkpoint(state: RunState) -> None:
        _append(commits, f"{state.run_id} {state.history_revision_id}")

    leftovers = [r for r in await store.list_runs() if r.status in ("running", "error")]
    await asyncio.gather(
        *(Session.recover(store=store, agent=agent, run_id=r.run_id, on_checkpoint=on_checkpoint) for r in leftovers)
    )
    while True:
        await asyncio.gather(
            *(
                Session(store=store, agent=agent, on_checkpoint=on_checkpoint).start(f"run-{uuid.uuid4().hex[:12]}")
                for _ in range(3)
            )
        )


async def once(db: str, log: str, tool: str) -> None:
    store = await SqliteSessionStore.open(db)
    agent = build_agent(log, once_step(tool))
    first = asyncio.Event()
    sess = Session(store=store, agent=agent, on_checkpoint=lambda state: first.set())
    task = asyncio.ensure_future(sess.start(f"once-{uuid.uuid4().hex[:12]}"))
    await first.wait()  # the run row is committed before the first model call
    assert sess.state is not None
    print("ready", sess.state.run_id, flush=True)
    await task


def main() -> None:
    mode, *args = sys.argv[1:]
    if mode == "loop":
        asyncio.run(loop(*args))
    elif mode == "once":
        asyncio.run(once(*args))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
