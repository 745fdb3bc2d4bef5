"""A stored world to build evals from: real sessions of a real runtime on a SQLite file.

The ``ops`` agent has four tools: ``lookup`` (idempotent: a price), ``ledger`` (not idempotent:
every invocation appends a line to ``ledger.log``, so a test counts them), ``refund`` (needs an
approval) and ``clerk`` (``agent_tool``: delegates to the ``clerk`` agent, a child session per call).
Its model is a ``ScriptedModel`` whose step depends on the last user message and the results
that came after it, so any fork of a conversation gets the answer its point calls for.

``build_world`` makes four sessions:

- ``booking`` (owner alice, metadata channel=web): "book 3 apples" (lookup, ledger, reply), then
  "refund it" (refund, approved, reply);
- ``delegating`` (owner bob): "ask the clerk about pears" (clerk delegates, the child answers, reply);
- ``rejected`` (owner alice): "refund 100" (refund, rejected, reply);
- ``greeting`` (agent clerk, owner bob): one turn, no tool.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repertory import Agent, ModelMessage, Runtime, ToolResultPart, ToolSpec, agent_tool, tool
from repertory.testing import ScriptedModel

Script = Callable[[list[ModelMessage], list[ToolSpec]], dict[str, Any]]


def _append(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def count_lines(path: Path) -> int:
    """How many lines ``path`` holds (0 when it does not exist)."""
    return len(path.read_text().splitlines()) if path.exists() else 0


def turn_of(messages: list[ModelMessage]) -> tuple[str, list[ToolResultPart]]:
    """The last user message's text and the tool results that came after it."""
    last = max(i for i, m in enumerate(messages) if m.role == "user")
    return messages[last].text, [p for m in messages[last + 1 :] for p in m.tool_results]


def ops_script(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """The original model: what the stored sessions were made with."""
    said, results = turn_of(messages)
    if said.startswith("book"):
        if not results:
            return {"tool": "lookup", "args": {"item": "apples"}, "usage": {"input_tokens": 10, "output_tokens": 2}}
        if len(results) == 1:
            return {"tool": "ledger", "args": {"entry": "3 apples"}, "usage": {"input_tokens": 12, "output_tokens": 3}}
        return {"text": f"booked 3 apples at {results[0].result}", "usage": {"input_tokens": 14, "output_tokens": 5}}
    if said.startswith("refund"):
        amount = 6 if said == "refund it" else 100
        if not results:
            return {"tool": "refund", "args": {"amount": amount}}
        outcome = "refused" if results[0].is_error else "done"
        return {"text": f"refund {outcome}"}
    if said.startswith("ask the clerk"):
        if not results:
            return {"tool": "clerk", "args": {"task": "price of pears"}}
        return {"text": f"the clerk says: {results[0].result}"}
    return {"text": "hello"}


def careless_script(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """A variant's model: books with other ledger arguments (a call never recorded); the rest as the original."""
    said, results = turn_of(messages)
    if said.startswith("book"):
        if not results:
            return {"tool": "lookup", "args": {"item": "apples"}}
        if len(results) == 1:
            return {"tool": "ledger", "args": {"entry": "three apples"}}
        return {"text": f"could not book: {results[1].result}"}
    return ops_script(messages, tools)


def ops_model() -> ScriptedModel:
    """``ops_script`` as a variant's model (``--model tests.evals.world:ops_model``)."""
    return ScriptedModel(ops_script, name="same-model")


def careless_model() -> ScriptedModel:
    """``careless_script`` as a model (``repertory eval run --model tests.evals.world:careless_model``)."""
    return ScriptedModel(careless_script, name="careless")


def world_agents() -> dict[str, Agent]:
    """``make_agents`` logging into the folder ``$REPERTORY_TEST_WORLD`` names (for ``--agents``)."""
    return make_agents(Path(os.environ["REPERTORY_TEST_WORLD"]))


def make_agents(folder: Path, script: Script = ops_script) -> dict[str, Agent]:
    """The agents of the world; ``ledger``, ``lookup`` and ``refund`` log every invocation into ``folder``."""

    @tool(idempotent=True)
    def lookup(item: str) -> int:
        """The price of an item."""
        _append(folder / "lookup.log", item)
        return 2

    @tool
    def ledger(entry: str) -> str:
        """Write an entry into the ledger (a side effect: never run twice, never by an eval)."""
        _append(folder / "ledger.log", entry)
        return f"entry {count_lines(folder / 'ledger.log')}: {entry}"

    @tool(requires_approval=True)
    def refund(amount: int) -> str:
        """Refund an amount (needs an approval)."""
        _append(folder / "refund.log", str(amount))
        return f"refunded {amount}"

    ops = Agent(
        name="ops",
        model=ScriptedModel(script, name="ops-model"),
        instructions="You run the shop.",
        tools=[lookup, ledger, refund, agent_tool("clerk")],
    )
    clerk = Agent(name="clerk", model=ScriptedModel([{"text": "pears cost 3"}], name="clerk-model"))
    return {"ops": ops, "clerk": clerk}


@dataclass(frozen=True)
class World:
    """The ids of the stored sessions."""

    booking: str
    delegating: str
    rejected: str
    greeting: str


async def build_world(rt: Runtime) -> World:
    """Make the four sessions (see the module's docstring), approvals and rejection decided."""
    booking = await rt.create_session(agent="ops", owner="alice", metadata={"channel": "web"})
    assert (await booking.run("book 3 apples")).status == "done"
    turn = await booking.send("refund it")
    await turn.wait()
    [pending] = await booking.pending_approvals()
    assert (await booking.approve(pending.token)).status == "done"

    delegating = await rt.create_session(agent="ops", owner="bob")
    assert (await delegating.run("ask the clerk about pears")).status == "done"

    rejected = await rt.create_session(agent="ops", owner="alice")
    turn = await rejected.send("refund 100")
    await turn.wait()
    [pending] = await rejected.pending_approvals()
    assert (await rejected.reject(pending.token, "too much")).status == "done"

    greeting = await rt.create_session(agent="clerk", owner="bob")
    assert (await greeting.run("hi")).status == "done"
    return World(booking.id, delegating.id, rejected.id, greeting.id)
