"""A tool source that listed once and then cannot list (its server is down) does not fail the next turn."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from repertory import Agent, Session, tool
from repertory.runtime.tools import Tool, ToolSource
from repertory.storage.memory import InMemorySessionStore
from repertory.testing import ScriptedModel


@tool(idempotent=True)
def remote_echo(text: str) -> str:
    """Echo, as a remote server would."""
    return text


class FlakySource:
    """Lists ``remote_echo`` until ``down`` is set, then raises as an unreachable server does."""

    name = "flaky"

    def __init__(self) -> None:
        self.down = False
        self.listing: Sequence[Tool] = (remote_echo,)

    async def list_tools(self) -> Sequence[Tool]:
        if self.down:
            raise ConnectionError("server flaky is not reachable")
        return self.listing

    async def aclose(self) -> None:
        return None


async def test_a_source_down_after_listing_keeps_its_tools_and_the_run_goes_on() -> None:
    source = FlakySource()
    assert isinstance(source, ToolSource)
    model = ScriptedModel(
        [
            {"tool": "remote_echo", "args": {"text": "a"}},
            {"text": "one"},
            {"tool": "remote_echo", "args": {"text": "b"}},
            {"text": "two"},
        ]
    )
    session = Session(store=InMemorySessionStore(), agent=Agent(name="a", model=model, tools=[source]))
    assert (await session.start("first")).text == "one"
    source.down = True
    second = await session.start("second")
    assert second.status == "done" and second.text == "two"
    assert "remote_echo" in session.agent.tools  # its last listing


async def test_a_source_that_never_listed_fails_the_start_before_anything_is_written() -> None:
    source = FlakySource()
    source.down = True
    store = InMemorySessionStore()
    session = Session(store=store, agent=Agent(name="a", model=ScriptedModel([{"text": "x"}]), tools=[source]))
    with pytest.raises(ConnectionError, match="not reachable"):
        await session.start("hello")
    assert await store.list_runs() == []
