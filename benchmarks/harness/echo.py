"""The echo agent the server benchmarks serve (``--agents benchmarks.harness.echo:agents``) and run directly.

A face's overhead is read as its call's time minus a direct ``handle.run()`` of the same agent, so
the agent does as little as a turn can: a zero-delay scripted model that answers at once, no tools.
"""

from __future__ import annotations

from benchmarks.harness.interleaved import Call
from repertory import Agent, SessionHandle
from repertory.testing import ScriptedModel

__all__ = ["AGENTS", "NAME", "PROMPT", "REPLY", "agents", "direct"]

AGENTS = "benchmarks.harness.echo:agents"
"""The ``--agents`` spec that serves it."""
NAME = "echo"
PROMPT = "ping"
REPLY = "pong"


def agents() -> dict[str, Agent]:
    """``echo``: a zero-delay scripted model that answers every turn at once, no tools."""
    return {NAME: Agent(name=NAME, model=ScriptedModel(lambda messages, tools: {"text": REPLY}))}


def direct(handle: SessionHandle) -> Call:
    """The baseline every face is read against: ``await handle.run(PROMPT)`` on ``handle``, checked."""

    async def call() -> None:
        result = await handle.run(PROMPT)
        if result.status != "done" or result.text != REPLY:
            raise RuntimeError(f"a direct turn ended {result.status}: {result.text!r}")

    return call
