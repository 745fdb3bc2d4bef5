"""Agents and waits shared by the durable-time tests: a tool that sleeps, and waits that never sleep.

Time is a ``ManualClock``: a test moves it and then awaits what must follow (an event, a turn at
rest), so nothing here sleeps for real beyond what the event loop needs to run the scheduler.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from repertory import Agent, ModelMessage, Runtime, SessionEvent, SessionHandle, sleep, tool
from repertory.core.timing import TimedStore
from repertory.testing import ScriptedModel

__all__ = [
    "HOUR",
    "WAIT",
    "after_event",
    "messages_of",
    "nap_agent",
    "quiet_after",
    "timed",
    "tool_results",
    "until",
    "within",
]

WAIT = 10.0
HOUR = 3600.0


async def within(awaitable: Any, seconds: float = WAIT) -> Any:
    """Await with a deadline, so a hang fails one assertion instead of the test run."""
    async with asyncio.timeout(seconds):
        return await awaitable


def nap_agent(seconds: float = HOUR, reply: str = "awake", calls: list[str] | None = None) -> Agent:
    """An agent whose first step calls ``nap`` (which sleeps ``seconds``), then replies ``reply``."""

    @tool
    def nap(seconds: float) -> str:
        """Sleep a while."""
        if calls is not None:
            calls.append("nap")
        sleep(seconds=seconds)

    @tool
    def nap_until(at_ms: int) -> str:
        """Sleep until a moment."""
        sleep(until_ms=at_ms)

    def step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        last = messages[-1]
        if last.role == "user":
            text = last.text
            if text.startswith("until "):
                return {"tool": "nap_until", "args": {"at_ms": int(text.split()[1])}}
            if text.startswith("nap"):
                return {"tool": "nap", "args": {"seconds": seconds}}
            return {"text": f"heard: {text}"}
        return {"text": reply}

    return Agent(name="napper", model=ScriptedModel(step), tools=[nap, nap_until])


async def after_event(
    handle: SessionHandle, after_seq: int, match: Callable[[SessionEvent], bool], seconds: float = WAIT
) -> SessionEvent:
    """The first event after ``after_seq`` that ``match`` accepts (stored or live)."""

    async def find() -> SessionEvent:
        async for event in handle.events(after_seq):
            if match(event):
                return event
        raise AssertionError("the event stream ended")

    result: SessionEvent = await within(find(), seconds)
    return result


async def until(check: Callable[[], Any], seconds: float = WAIT) -> None:
    """Yield to the loop until ``check()`` (maybe async) is true: for what no event announces (a row deleted)."""

    async def poll() -> None:
        while True:
            value = check()
            if asyncio.iscoroutine(value):
                value = await value
            if value:
                return
            await asyncio.sleep(0.001)

    await within(poll(), seconds)


async def quiet_after(rt: Runtime, move: Callable[[], object]) -> None:
    """Move the clock with ``move()``, then wait for the scheduler's next full pass and its wakes to end.

    What "nothing more happens" is checked against: a pass that saw the new time has finished.
    """
    keeper = rt.host.timekeeper  # type: ignore[attr-defined]
    before = keeper.passes
    move()
    await until(lambda: keeper.passes > before and keeper.idle)


def tool_results(history: list[ModelMessage]) -> list[Any]:
    """Every tool result's value, in order."""
    return [p.result for m in history for p in m.tool_results]


async def messages_of(rt: Runtime, session_id: str) -> list[ModelMessage]:
    """The session's conversation as stored."""
    thread = await rt.store.load_thread(session_id)
    assert thread is not None and thread.history_revision_id is not None
    history = await rt.store.load_history(thread.history_revision_id)
    assert history is not None
    return history.messages


def timed(rt: Runtime) -> TimedStore:
    """The runtime's store as the time tables' protocol."""
    assert isinstance(rt.store, TimedStore)
    return rt.store
