"""Child process for ``test_responses_crash.py``: turns against a background Responses server until SIGKILLed.

``python -m tests.models._responses_crash_worker DB URL``
    Opens a ``Runtime`` on the SQLite file DB (which re-drives the runs a killed incarnation left
    running: their calls re-attach), prints ``ready``, then runs turns two at a time, forever. Each
    turn is two model steps (a reasoned tool call, then a long reply) of an ``OpenAIResponsesModel``
    with ``background=True`` aimed at URL. Once a new response's id is committed (the drive reads
    on after the first ``ModelCall``), it prints ``committed <response id>``: from then on a kill
    lands mid-reply, never between the ``POST`` and the commit.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import Any

from repertory import Agent, ModelMessage, ModelSettings, Runtime, ToolSpec, tool
from repertory.core.model import ModelCall, ModelEvent
from repertory.models import OpenAIResponsesModel


class Announcing:
    """The adapter under test, passed through, saying when a new response's id is durable."""

    def __init__(self, inner: OpenAIResponsesModel) -> None:
        self.inner = inner
        self.model = inner.model

    async def request(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        fresh = settings.attach is None
        pending: str | None = None
        async for event in self.inner.request(messages, tools, settings):
            if pending is not None:  # the drive asked for more: the commit of the id returned
                print(f"committed {pending}", flush=True)
                pending = None
            yield event
            if fresh and isinstance(event, ModelCall):
                fresh, pending = False, str(event.state["response_id"])

    async def cancel_call(self, state: dict[str, Any]) -> None:
        await self.inner.cancel_call(state)


def build_agent(url: str, *, announce: bool) -> Agent:
    """The agent the worker and the parent's final recovery both run."""

    @tool(idempotent=True)
    async def note(n: int) -> str:
        """Note a number."""
        return f"noted {n}"

    model = OpenAIResponsesModel("gpt-test", api_key="sk-test", base_url=url, background=True, timeout=30.0)
    return Agent(name="a", model=Announcing(model) if announce else model, tools=[note])


async def main(db: str, url: str) -> None:
    async with await Runtime.start(store=f"sqlite:///{db}", agents={"a": build_agent(url, announce=True)}) as rt:
        print("ready", flush=True)

        async def one() -> None:
            await (await rt.create_session(agent="a")).run("go")

        while True:
            await asyncio.gather(one(), one())


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
