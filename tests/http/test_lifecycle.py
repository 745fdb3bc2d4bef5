"""Threads over HTTP after they are made: PATCH, DELETE (forks survive), prune, states at a checkpoint, events."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from langgraph_sdk.client import LangGraphClient

from tests.http.agents import gate
from tests.http.conftest import ALICE, ServerThread, human, obj, refused, sse_events


async def test_patch_merges_metadata_and_keeps_the_assistant(client: LangGraphClient) -> None:
    thread = await client.threads.create(metadata={"a": 1, "b": 2})
    tid = thread["thread_id"]
    patched = await client.threads.update(tid, metadata={"b": 3, "c": [1, "x"]})
    assert patched["metadata"] == {"a": 1, "b": 3, "c": [1, "x"]}
    assert obj((await client.threads.get(tid))["metadata"]) == {"a": 1, "b": 3, "c": [1, "x"]}
    # The assistant is the first run's choice, not the metadata's.
    status, detail = await refused(client.threads.update(tid, metadata={"graph_id": "second"}))
    assert status == 422 and "graph_id" in detail
    await client.runs.wait(tid, "assistant", input=human("hello"))
    same = await client.threads.update(tid, metadata={"graph_id": "assistant", "d": None})
    assert same["metadata"] == {
        "a": 1,
        "b": 3,
        "c": [1, "x"],
        "d": None,
        "graph_id": "assistant",
        "assistant_id": "assistant",
    }
    status, _ = await refused(client.threads.update(tid, metadata={"assistant_id": "second"}))
    assert status == 422
    status, detail = await refused(client.threads.update(tid, metadata={"repertory:unbound": False}))
    assert status == 422 and "server's" in detail
    status, _ = await refused(client.threads.update(tid, metadata={}, ttl=5))
    assert status == 422
    status, _ = await refused(client.threads.update("no-such-thread", metadata={"a": 1}))
    assert status == 404


async def test_delete_removes_the_thread_and_its_fork_survives_whole(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "assistant", input=human("research moths"))
    fork = obj(await client.threads.copy(tid))  # type: ignore[func-returns-value]  # the SDK says None
    fid = fork["thread_id"]
    await client.runs.wait(fid, "assistant", input=human("hello fork"))
    before = obj((await client.threads.get_state(fid))["values"])["messages"]

    await client.threads.delete(tid)

    status, _ = await refused(client.threads.get(tid))
    assert status == 404
    status, _ = await refused(client.threads.delete(tid))
    assert status == 404
    assert tid not in {t["thread_id"] for t in await client.threads.search(limit=1000)}
    after = obj((await client.threads.get_state(fid))["values"])["messages"]
    assert after == before and after[0]["content"] == "research moths"
    # One state per message, plus the empty state before the first (as LangGraph lists them).
    assert len(await client.threads.get_history(fid, limit=100)) == len(before) + 1
    values = obj(await client.runs.wait(fid, "assistant", input=human("hello again")))
    assert values["messages"][-1]["content"] == "Hello! How can I help?"


async def test_deleting_a_running_thread_cancels_its_run_first(client: LangGraphClient) -> None:
    name = f"delete-{uuid.uuid4().hex}"
    thread = await client.threads.create()
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "assistant", input=human(f"block {name}"))
    try:
        await client.threads.delete(tid)
        status, _ = await refused(client.runs.get(tid, run["run_id"]))
        assert status == 404
        status, _ = await refused(client.threads.get(tid))
        assert status == 404
    finally:
        gate(name).set()


async def test_prune_and_count(client: LangGraphClient) -> None:
    tag = str(uuid.uuid4())
    made = [(await client.threads.create(metadata={"tag": tag}))["thread_id"] for _ in range(3)]
    assert await client.threads.count(metadata={"tag": tag}) == 3
    pruned = await client.threads.prune([made[0], made[1], "no-such-thread"])
    assert pruned == {"pruned_count": 2}
    assert [t["thread_id"] for t in await client.threads.search(metadata={"tag": tag})] == [made[2]]
    status, detail = await refused(client.threads.prune([made[2]], strategy="keep_latest"))
    assert status == 422 and "keep_latest" in detail


async def test_state_at_a_checkpoint(client: LangGraphClient, sqlite_server: ServerThread) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "assistant", input=human("research bats"))
    history = await client.threads.get_history(tid, limit=100)
    middle = history[2]
    at = await client.threads.get_state(tid, checkpoint_id=middle["checkpoint"]["checkpoint_id"])
    assert at == middle
    by_body = await client.threads.get_state(tid, checkpoint=middle["checkpoint"])
    assert by_body == middle
    status, _ = await refused(client.threads.get_state(tid, checkpoint_id="not-a-checkpoint"))
    assert status == 404
    # A checkpoint of another thread is not one of this thread's states.
    other = await client.threads.create()
    await client.runs.wait(other["thread_id"], "assistant", input=human("hello"))
    status, _ = await refused(
        client.threads.get_state(other["thread_id"], checkpoint_id=middle["checkpoint"]["checkpoint_id"])
    )
    assert status == 404
    # history with before: the states below a checkpoint, as the JS client asks with a checkpoint object.
    config: Any = {"configurable": middle["checkpoint"]}  # a config holding the checkpoint, as LangGraph's are
    below = await client.threads.get_history(tid, limit=2, before=config)
    assert [s["checkpoint"] for s in below] == [s["checkpoint"] for s in history[3:5]]


async def test_the_events_route_replays_then_resumes_by_seq(
    client: LangGraphClient, sqlite_server: ServerThread
) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "assistant", input=human("research newts"))

    events = await sse_events(sqlite_server.url, f"/threads/{tid}/events", ALICE, "turn.completed")

    kinds = [name for name, _, _ in events]
    assert kinds[0] == "turn.started" and kinds[-1] == "turn.completed"
    assert {"tool.call", "tool.result", "checkpoint"} <= set(kinds)
    seqs = [int(ident) for _, ident, _ in events]
    assert seqs == list(range(1, len(events) + 1))
    assert all(data["seq"] == int(ident) and data["session_id"] == tid for _, ident, data in events)
    # A second turn, read from where the first ended (Last-Event-ID, or after_seq).
    await client.runs.wait(tid, "assistant", input=human("hello"))
    rest = await sse_events(
        sqlite_server.url, f"/threads/{tid}/events", ALICE, "turn.completed", **{"Last-Event-ID": str(seqs[-1])}
    )
    assert rest[0][0] == "turn.started" and int(rest[0][1]) == seqs[-1] + 1
    same = await sse_events(sqlite_server.url, f"/threads/{tid}/events?after_seq={seqs[-1]}", ALICE, "turn.completed")
    assert same == rest
    async with httpx.AsyncClient(base_url=sqlite_server.url) as raw:
        bad = await raw.get(f"/threads/{tid}/events", headers={"x-api-key": ALICE, "Last-Event-ID": "3-1"})
        assert bad.status_code == 422
