"""One model conformance suite, run against every adapter through its official SDK and a loopback server.

What the engine relies on from any model: deltas stream in order and end with exactly one
``ModelResponse`` holding the whole message; parallel tool calls come back whole and in order; usage
counts one request's tokens; a stream that is cut, stalls, ends unfinished or turns malformed is a
``ModelError`` (never a half message, never retried once it showed text); and a run cancelled while
its reply streams commits nothing of that reply. Each adapter's wire format is in ``adapters.py``.
"""

from __future__ import annotations

import asyncio

import pytest

from repertory import (
    Agent,
    InMemorySessionStore,
    ModelMessage,
    ModelSettings,
    Runtime,
    SessionEvent,
    ToolCallPart,
    Usage,
)
from repertory.core.model import ModelEvent
from repertory.errors import ModelError

from .adapters import ADAPTERS, Adapter
from .helpers import LOOKUP, WAIT, collect, deltas


@pytest.fixture(params=sorted(ADAPTERS))
def adapter(request: pytest.FixtureRequest) -> Adapter:
    server, factory, wire = ADAPTERS[request.param]
    return Adapter(request.param, request.getfixturevalue(server), request.getfixturevalue(factory), wire)


async def test_text_streams_in_order_and_ends_with_one_response(adapter: Adapter) -> None:
    adapter.fake.add(adapter.wire.text(["Hel", "lo, ", "world"], prompt=12, output=4))
    events, response = await collect(adapter.make())
    assert deltas(events) == [("text", "Hel"), ("text", "lo, "), ("text", "world")]
    assert response.message.role == "assistant" and response.message.text == "Hello, world"
    assert response.message.tool_calls == []
    assert response.usage == Usage(input_tokens=12, output_tokens=4, total_tokens=16, requests=1)


async def test_parallel_tool_calls_come_back_whole_and_in_order(adapter: Adapter) -> None:
    adapter.fake.add(adapter.wire.calls([("c1", "lookup", {"q": "a"}), ("c2", "lookup", {"q": "b"})]))
    _, response = await collect(adapter.make(), tools=[LOOKUP])
    assert response.message.tool_calls == [
        ToolCallPart(tool_call_id="c1", tool_name="lookup", args={"q": "a"}),
        ToolCallPart(tool_call_id="c2", tool_name="lookup", args={"q": "b"}),
    ]
    assert response.usage.requests == 1


async def test_a_stream_cut_mid_way_is_a_model_error_and_not_retried(adapter: Adapter) -> None:
    adapter.fake.add(adapter.wire.cut(["Half a", " sentence"]))
    with pytest.raises(ModelError, match="broke off"):
        await collect(adapter.make(max_retries=3))
    assert len(adapter.fake.requests) == 1


async def test_a_stream_that_ends_unfinished_is_a_model_error(adapter: Adapter) -> None:
    """The body closes cleanly but early: whatever it held, it is not a whole reply."""
    adapter.fake.add(adapter.wire.unfinished(["Half a", " sentence"]))
    with pytest.raises(ModelError, match="before the model finished its reply"):
        await collect(adapter.make(max_retries=3))
    assert len(adapter.fake.requests) == 1


async def test_a_stream_that_stalls_mid_way_is_a_model_error(adapter: Adapter) -> None:
    adapter.fake.add(adapter.wire.stall(["Once upon"]))
    model = adapter.make(timeout=0.2, max_retries=3)
    events: list[ModelEvent] = []
    with pytest.raises(ModelError, match="stalled"):
        async for event in model.request([ModelMessage.user("hi")], [], ModelSettings()):
            events.append(event)
    assert deltas(events) == [("text", "Once upon")]
    assert len(adapter.fake.requests) == 1  # a started stream is not retried


async def test_a_malformed_event_is_a_model_error(adapter: Adapter) -> None:
    adapter.fake.add(adapter.wire.malformed(["fine so far"]))
    with pytest.raises(ModelError, match="malformed") as info:
        await collect(adapter.make())
    assert str(info.value).startswith("model '")


async def test_a_run_cancelled_mid_stream_commits_nothing_of_the_reply(adapter: Adapter) -> None:
    adapter.fake.add(adapter.wire.stall(["I was about to"]))
    store = InMemorySessionStore()
    streamed = asyncio.Event()

    def seen(event: SessionEvent) -> None:
        if event.type == "text.delta":
            streamed.set()

    agent = Agent(name="a", model=adapter.make())
    async with await Runtime.start(store=store, agents={"a": agent}) as rt:
        handle = await rt.create_session(agent="a")
        listener = handle.on_progress(seen)
        turn = await handle.send("hi")
        await asyncio.wait_for(streamed.wait(), WAIT)
        await turn.cancel()
        await asyncio.wait_for(turn.wait(), WAIT)
        listener.dispose()
        assert await turn.status() == "cancelled"
        thread = await store.load_thread(handle.id)
        assert thread is not None and thread.history_revision_id is not None
        history = await store.load_history(thread.history_revision_id)
        assert history is not None and [m.role for m in history.messages] == ["user"]
    await store.close()
    assert len(adapter.fake.requests) == 1
