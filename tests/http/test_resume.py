"""Streams that drop and resume with ``Last-Event-ID``, and the limits on streams and bodies."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import RateLimitError, UnprocessableEntityError
from langgraph_sdk.schema import StreamMode, StreamPart

from tests.http.agents import gate
from tests.http.conftest import ALICE, BOB, MAX_STREAMS, ServerThread, close, human, refused

MODES: list[StreamMode] = ["values", "updates", "messages-tuple", "custom"]


def durable(parts: list[StreamPart]) -> list[tuple[str | None, str, Any]]:
    """The parts a replay can rebuild: all but metadata, end and the live-only deltas."""
    out = []
    for p in parts:
        if p.event in ("metadata", "end"):
            continue
        if p.event == "custom" and p.data["type"] in ("text.delta", "reasoning.delta"):
            continue
        if p.event == "messages" and p.data[0]["type"] == "AIMessageChunk" and not p.data[0]["tool_calls"]:
            continue
        out.append((p.id, p.event, p.data))
    return out


def order(event_id: str | None) -> tuple[int, int]:
    assert event_id is not None
    seq, n = event_id.split("-")
    return int(seq), int(n)


async def test_join_stream_dropped_then_resumed_by_last_event_id(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "assistant", input=human("stepwise drop1"), stream_mode=MODES)
    rid = run["run_id"]

    first: list[StreamPart] = []
    stream = client.runs.join_stream(tid, rid, stream_mode=MODES)
    async for part in stream:
        first.append(part)
        if part.event == "updates" and "tools" in part.data:
            break  # the first lookup's result arrived; the run now waits at the gate
    await close(stream)  # the connection drops here
    gate("drop1").set()  # the run goes on while nobody listens

    last_id = first[-1].id
    resumed = [p async for p in client.runs.join_stream(tid, rid, stream_mode=MODES, last_event_id=last_id)]
    assert resumed[0].event != "metadata" and resumed[-1].event == "end"
    full = [p async for p in client.runs.join_stream(tid, rid, stream_mode=MODES)]

    assert durable(first) + durable(resumed) == durable(full)  # nothing lost, nothing repeated
    ids = [order(p.id) for p in first + resumed]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    final = [p.data for p in resumed if p.event == "values"][-1]
    assert final["messages"][-1]["content"] == "stepwise done"


async def test_a_stream_resumes_mid_event(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    full = [p async for p in client.runs.stream(tid, "assistant", input=human("research gnus"), stream_mode=MODES)]
    rid = full[0].data["run_id"]
    replay = [p async for p in client.runs.join_stream(tid, rid, stream_mode=MODES)]
    # Resume from the middle of one event's parts (a checkpoint yields several).
    cut = next(i for i, p in enumerate(replay) if p.event == "updates")
    rest = [p async for p in client.runs.join_stream(tid, rid, stream_mode=MODES, last_event_id=replay[cut].id)]
    assert durable(replay[: cut + 1]) + durable(rest) == durable(replay) == durable(full)


async def test_bad_last_event_id_is_422(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    run = await client.runs.create(thread["thread_id"], "assistant", input=human("hello"))
    with pytest.raises(UnprocessableEntityError, match="Last-Event-ID"):
        _ = [p async for p in client.runs.join_stream(thread["thread_id"], run["run_id"], last_event_id="nope")]


async def test_open_streams_per_key_are_limited(sqlite_server: ServerThread) -> None:
    async with get_client(url=sqlite_server.url, api_key=BOB) as bob:
        thread = await bob.threads.create()
        tid = thread["thread_id"]
        run = await bob.runs.create(tid, "assistant", input=human("block limit1"))
        streams = [bob.runs.join_stream(tid, run["run_id"]) for _ in range(MAX_STREAMS)]
        try:
            for s in streams:
                assert (await anext(s)).event == "metadata"  # each stream is open on the server
            with pytest.raises(RateLimitError, match="too many open streams"):
                await anext(bob.runs.join_stream(tid, run["run_id"]))
        finally:
            gate("limit1").set()
            for s in streams:
                await close(s)


async def test_large_bodies_are_refused(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    status, detail = await refused(client.runs.wait(thread["thread_id"], "assistant", input=human("x" * 100_000)))
    assert (status, detail) == (413, "request body larger than 65536 bytes")


async def test_on_disconnect_cancel_stops_the_run(client: LangGraphClient) -> None:
    # agent-chat-ui streams with on_disconnect="cancel": its stop button closes the stream.
    thread = await client.threads.create()
    tid = thread["thread_id"]
    stream = client.runs.stream(tid, "assistant", input=human("block stop1"), on_disconnect="cancel")
    metadata = await anext(stream)
    await close(stream)
    try:
        values = await client.runs.join(tid, metadata.data["run_id"])
    finally:
        gate("stop1").set()
    assert (await client.runs.get(tid, metadata.data["run_id"]))["status"] == "interrupted"
    assert values["messages"][-1]["type"] == "human"
    survivor = client.runs.stream(tid, "assistant", input=human("hello survivor"))  # on_disconnect: continue
    await anext(survivor)
    await close(survivor)
    runs = await client.runs.list(tid)
    done = await client.runs.join(tid, runs[0]["run_id"])
    assert done["messages"][-1]["content"] == "Hello! How can I help?"


async def test_a_waiting_client_that_leaves_cancels_with_on_disconnect_cancel(
    client: LangGraphClient, sqlite_server: ServerThread
) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    body = {"assistant_id": "assistant", "input": human("block leave1"), "on_disconnect": "cancel"}
    async with httpx.AsyncClient(base_url=sqlite_server.url, headers={"x-api-key": ALICE}) as raw:
        with pytest.raises(httpx.ReadTimeout):  # the run is held at its gate, so this client gives up
            await raw.post(f"/threads/{tid}/runs/wait", json=body, timeout=httpx.Timeout(5, read=0.3))
    try:
        [run] = await client.runs.list(tid)
        await client.runs.join(tid, run["run_id"])
    finally:
        gate("leave1").set()
    assert (await client.runs.get(tid, run["run_id"]))["status"] == "interrupted"
