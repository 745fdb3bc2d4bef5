"""Test doubles and readers of the backend suite (``repertory.testing.conformance.backend``).

``Script`` is a ``ScriptedModel`` step function that answers by prompt, records every request, and
can hold a request at a ``Gate`` the test opens when it chooses: a "long turn" is a turn whose
model request waits at a gate, never a sleep. A ``Recorder`` is the list a tool appends its runs to.
Scripts, gates and recorders keep their state on the active board (``board.py``): in this process
on the local backend, on the fixture's shared board where models and tools run in another process
(the Ray backend's hosts work on unpickled copies of the agent, and the doubles bring the board along).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from pydantic import BaseModel

from repertory.core.messages import ModelMessage
from repertory.core.model import ToolSpec
from repertory.core.tree import SessionEvent
from repertory.runtime.agent import Agent
from repertory.runtime.tools import Tool
from repertory.testing.conformance.backend.board import active_board, adopt_board, carried_board
from repertory.testing.scripted import ScriptedModel, Step
from repertory.tree.handle import SessionHandle
from repertory.tree.runtime import Runtime

__all__ = [
    "WAIT",
    "Answer",
    "Carried",
    "Gate",
    "Recorder",
    "Script",
    "Sink",
    "collect",
    "completed",
    "dumps",
    "history",
    "prompt_of",
    "texts",
    "within",
]

WAIT = 10.0
"""Seconds any single awaited thing may take before the test fails (far below the per-test timeout)."""


class Answer(BaseModel):
    """The structured output the ``run(..., output=Answer)`` tests ask for (importable: module level)."""

    city: str
    population: int


async def within(awaitable: Any, seconds: float = WAIT) -> Any:
    """Await with a deadline, so a hang fails one assertion instead of the whole test run."""
    async with asyncio.timeout(seconds):
        return await awaitable


class Carried:
    """A double that may be pickled into a backend's host: it takes the active board along.

    Unpickled where no board is switched in (a host process), it makes that board the process's
    (``adopt_board``), so the copy in the host and the original in the test share one state.
    """

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_board": carried_board()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        board = state.pop("_board", None)
        if board is not None:
            adopt_board(board)
        self.__dict__.update(state)


class Gate(Carried):
    """A point a model request stops at until the test releases it (its state is on the board)."""

    def __init__(self) -> None:
        self.key = f"gate/{uuid.uuid4().hex}"

    async def pass_through(self) -> None:
        """Called by the model: mark the gate reached, then wait until it is released."""
        await active_board().enter(self.key)

    async def reached(self, seconds: float = WAIT) -> None:
        """Wait until a request is held at this gate."""
        await within(active_board().reached(self.key), seconds)

    @property
    def is_reached(self) -> bool:
        return active_board().is_reached(self.key)

    def release(self) -> None:
        """Let the held request (and any later one) go on."""
        active_board().release(self.key)


class Recorder(Carried):
    """A list tools append to, readable by the test whichever process the tools ran in.

    A module-level recorder is named (``Recorder("approvals.ran")``) so that the copy a host process
    imports with the suite's module writes to the same list; an unnamed one gets a unique key.
    """

    def __init__(self, name: str | None = None) -> None:
        self.key = f"list/{name or uuid.uuid4().hex}"

    def append(self, item: Any) -> None:
        active_board().append(self.key, item)

    def clear(self) -> None:
        active_board().clear(self.key)

    def items(self) -> list[Any]:
        return active_board().items(self.key)

    def __iter__(self) -> Any:
        return iter(self.items())

    def __len__(self) -> int:
        return len(self.items())

    def __getitem__(self, index: int) -> Any:
        return self.items()[index]

    def __eq__(self, other: object) -> bool:
        return self.items() == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Recorder({self.items()!r})"


def prompt_of(messages: Sequence[ModelMessage]) -> tuple[str, int]:
    """The prompt a request answers and how many assistant messages followed it.

    The prompt is the latest user or system message (a turn's message, a notification, a resume
    value); output-validation feedback (a user-role message stamped ``system``) does not count.
    """
    after = 0
    for message in reversed(messages):
        if message.role == "assistant":
            after += 1
        elif message.role == "user" and message.origin is not None and message.origin.kind == "system":
            continue
        elif message.role in ("user", "system"):
            return message.text, after
    return "", after


class Script(Carried):
    """A step function ``(messages, tools) -> step`` that answers by prompt.

    ``plans[prompt]`` lists the steps of that prompt's turn (step k answers the request with k
    assistant messages after the prompt); a step may be an exception to raise (a model failure).
    Without a plan the reply is ``{"text": "re: <prompt>"}``.
    """

    def __init__(self, plans: dict[str, list[Step | BaseException]] | None = None) -> None:
        self.plans: dict[str, list[Step | BaseException]] = dict(plans or {})
        self.key = f"script/{uuid.uuid4().hex}"

    @property
    def log(self) -> list[tuple[str, int]]:
        """``(prompt, step)`` of every request, in request order."""
        return [(p, k) for p, k, _, _ in active_board().items(self.key)]

    @property
    def requests(self) -> list[list[ModelMessage]]:
        """The messages of every request, in request order."""
        return [messages for _, _, messages, _ in active_board().items(self.key)]

    @property
    def requests_tools(self) -> list[list[ToolSpec]]:
        """The tools each request offered the model, in request order."""
        return [tools for _, _, _, tools in active_board().items(self.key)]

    def hold(self, prompt: str, step: int = 0) -> Gate:
        """Hold the next request answering ``prompt`` at ``step`` until the gate is released."""
        gate = Gate()
        active_board().put(self._gate_slot(prompt, step), gate.key)
        return gate

    def hold_midway(self, prompt: str, step: int = 0, *, chunks: int = 8) -> Gate:
        """Hold the next reply to ``prompt`` at ``step`` halfway through its ``chunks`` deltas."""
        gate = Gate()
        active_board().put(self._gate_slot(prompt, step, "midway"), f"{gate.key} {chunks}")
        return gate

    def _gate_slot(self, prompt: str, step: int, kind: str = "hold") -> str:
        return f"{self.key}/{kind}/{step}/{prompt}"

    def count(self, prompt: str) -> int:
        """How many model requests answered ``prompt`` (any step)."""
        return sum(1 for p, _ in self.log if p == prompt)

    def prompts(self) -> list[str]:
        """The prompt of every request, in request order."""
        return [p for p, _ in self.log]

    def model(self, delay: float = 0.0) -> ScriptedModel:
        return ScriptedModel(self, delay=delay)

    def agent(self, name: str = "assistant", tools: Sequence[Tool | Callable[..., Any]] = (), **kw: Any) -> Agent:
        return Agent(name=name, model=self.model(), tools=tools, **kw)

    async def __call__(self, messages: list[ModelMessage], tools: list[ToolSpec]) -> Step:
        prompt, k = prompt_of(messages)
        board = active_board()
        await board.append_async(self.key, (prompt, k, list(messages), list(tools)))
        gate_key = await board.pop_async(self._gate_slot(prompt, k))
        if gate_key is not None:
            await board.enter(gate_key)
        plan = self.plans.get(prompt)
        step: Step | BaseException = plan[k] if plan is not None and k < len(plan) else {"text": f"re: {prompt}"}
        if isinstance(step, BaseException):
            raise step
        midway = await board.pop_async(self._gate_slot(prompt, k, "midway"))
        if midway is not None:
            key, chunks = midway.split(" ")
            step = {**step, "chunks": int(chunks), "midway": functools.partial(board.enter, key)}
        return step


async def collect(
    events: AsyncIterator[SessionEvent],
    until: Callable[[SessionEvent], bool],
    seconds: float = WAIT,
    sink: list[SessionEvent] | None = None,
) -> list[SessionEvent]:
    """Read ``events`` until ``until(event)`` holds (that event included), then close the stream.

    ``sink`` receives each event as it arrives, so a caller sees what was read even if it times out.
    """
    out: list[SessionEvent] = [] if sink is None else sink
    async with asyncio.timeout(seconds), contextlib.aclosing(events) as stream:  # type: ignore[type-var]
        async for event in stream:
            out.append(event)
            if until(event):
                break
    return out


class Sink(list[SessionEvent]):
    """A list of events that can be awaited until an event matching a predicate arrives."""

    def __init__(self) -> None:
        super().__init__()
        self._changed = asyncio.Event()

    def append(self, event: SessionEvent) -> None:
        super().append(event)
        self._changed.set()

    async def wait_for(self, predicate: Callable[[SessionEvent], bool], seconds: float = WAIT) -> None:
        async with asyncio.timeout(seconds):
            while not any(predicate(e) for e in self):
                self._changed.clear()
                await self._changed.wait()


def completed(submission_id: str) -> Callable[[SessionEvent], bool]:
    """``until`` for ``collect``: the ``turn.completed`` of one submission."""
    return lambda e: e.type == "turn.completed" and e.submission_id == submission_id


async def history(rt: Runtime, handle: SessionHandle | str) -> list[ModelMessage]:
    """The messages on a session's thread, oldest first, as the store holds them."""
    session_id = handle if isinstance(handle, str) else handle.id
    thread = await rt.store.load_thread(session_id)
    if thread is None or thread.history_revision_id is None:
        return []
    loaded = await rt.store.load_history(thread.history_revision_id)
    assert loaded is not None
    return loaded.messages


async def entries(rt: Runtime, handle: SessionHandle) -> list[tuple[str, ModelMessage]]:
    """``(entry id, message)`` of each message on a session's thread, oldest first."""
    thread = await rt.store.load_thread(handle.id)
    if thread is None or thread.history_revision_id is None:
        return []
    loaded = await rt.store.load_history(thread.history_revision_id)
    assert loaded is not None
    out = []
    for rev in reversed(loaded.walk_back(None)):
        entry = loaded.entry(rev.entry_id)
        assert entry is not None
        out.append((entry.id, entry.message))
    return out


def texts(messages: Sequence[ModelMessage], role: str | None = None) -> list[str]:
    """The text of each message (optionally of one role)."""
    return [m.text for m in messages if role is None or m.role == role]


def dumps(event: SessionEvent) -> str:
    """An event as the JSON a client would receive."""
    return json.dumps(event.model_dump(mode="json"))
