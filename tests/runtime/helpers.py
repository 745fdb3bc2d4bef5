"""Shared helpers for the engine tests: the pairing invariant, a checking scripted model, a store spy."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from repertory import (
    MessageHistory,
    ModelMessage,
    RunState,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from repertory.errors import ModelError
from repertory.storage import SessionStore
from repertory.testing import ScriptedModel
from repertory.testing.conformance.backend.compacting import assert_paired as assert_paired

WAIT = 10.0
"""Seconds a handshake may take before the test fails (a deadlock must fail, not hang)."""

StepLike = dict[str, Any] | Callable[[list[ModelMessage]], Any]


# -- the pairing invariant (``assert_paired``: the shipped suite's, re-exported) ----------------------


def tool_calls(messages: Sequence[ModelMessage]) -> list[ToolCallPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolCallPart)]


def tool_results(messages: Sequence[ModelMessage]) -> list[ToolResultPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolResultPart)]


def result_for(messages: Sequence[ModelMessage], call_id: str) -> ToolResultPart:
    found = [p for p in tool_results(messages) if p.tool_call_id == call_id]
    assert len(found) == 1, f"call {call_id} has {len(found)} results"
    return found[0]


async def history_at(store: SessionStore, revision_id: str | None) -> list[ModelMessage]:
    if revision_id is None:
        return []
    history: MessageHistory | None = await store.load_history(revision_id)
    assert history is not None, f"store lacks revision {revision_id}"
    return history.messages


async def run_history(store: SessionStore, run_id: str) -> list[ModelMessage]:
    """The messages at the run's own committed revision."""
    run = await store.load_run(run_id)
    assert run is not None, f"no run {run_id}"
    return await history_at(store, run.history_revision_id)


async def thread_history(store: SessionStore, thread_id: str) -> list[ModelMessage]:
    """The messages at the thread's head."""
    thread = await store.load_thread(thread_id)
    assert thread is not None, f"no thread {thread_id}"
    return await history_at(store, thread.history_revision_id)


async def assert_run_paired(store: SessionStore, run_id: str) -> list[ModelMessage]:
    """The run is finished and its history pairs every call with exactly one result."""
    run = await store.load_run(run_id)
    assert run is not None
    assert run.status in ("done", "cancelled", "error"), f"run {run_id} is {run.status}, not finished"
    messages = await history_at(store, run.history_revision_id)
    assert_paired(messages)
    return messages


async def stored(store: SessionStore, run_id: str) -> RunState:
    run = await store.load_run(run_id)
    assert run is not None, f"no run {run_id}"
    return run


# -- a scripted model that checks every request -----------------------------------------------------


class Script:
    """ScriptedModel's step function: ``steps[n]`` for a request holding n assistant messages.

    A step may be a dict, or a function ``(messages) -> dict`` (sync or async) for steps that
    inspect or block. Every request is recorded and must pair each call with one result.
    """

    def __init__(self, steps: Sequence[StepLike]) -> None:
        self.steps = list(steps)
        self.seen: list[list[ModelMessage]] = []
        self.tools_seen: list[list[ToolSpec]] = []

    async def __call__(self, messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        assert_paired(messages)
        self.seen.append(list(messages))
        self.tools_seen.append(list(tools))
        n = sum(1 for m in messages if m.role == "assistant")
        if n >= len(self.steps):
            raise ModelError(f"script ran out of steps at {n}")
        step = self.steps[n]
        if callable(step):
            step = step(messages)
            if inspect.isawaitable(step):
                step = await step
        assert isinstance(step, dict)
        return step


class CheckedModel(ScriptedModel):
    """A ``ScriptedModel`` over a ``Script``: records requests and checks the pairing invariant."""

    def __init__(self, steps: Sequence[StepLike], delay: float = 0.0) -> None:
        self.script = Script(steps)
        super().__init__(self.script, delay=delay)

    @property
    def seen(self) -> list[list[ModelMessage]]:
        return self.script.seen


# -- a store spy ----------------------------------------------------------------------------------

Hook = Callable[..., Awaitable[None]]


class StoreSpy:
    """Wraps a store, records the methods called and lets a test hook in before or after any of them.

    ``dead = True`` makes every call raise, as if the process had died: nothing more is written.
    """

    def __init__(self, inner: SessionStore) -> None:
        self.inner = inner
        self.calls: list[str] = []
        self.before: dict[str, Hook] = {}
        self.after: dict[str, Hook] = {}
        self.dead = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name.startswith("_") or not inspect.iscoroutinefunction(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            if self.dead:
                from repertory.errors import StoreError

                raise StoreError("simulated crash: the process is gone")
            hook = self.before.get(name)
            if hook is not None:
                await hook(*args, **kwargs)
            self.calls.append(name)
            out = await attr(*args, **kwargs)
            hook = self.after.get(name)
            if hook is not None:
                await hook(*args, **kwargs)
            return out

        return call


async def wait(event: asyncio.Event) -> None:
    """Await a handshake event, failing the test (not hanging it) if it never comes."""
    await asyncio.wait_for(event.wait(), WAIT)


def text_step(text: str) -> dict[str, Any]:
    return {"text": text}


def call(tool: str, **args: Any) -> dict[str, Any]:
    return {"tool": tool, "args": args}


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tools": [{"tool": name, "args": args} for name, args in pairs]}
