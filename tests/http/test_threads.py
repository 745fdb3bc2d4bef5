"""Threads over HTTP through ``langgraph-sdk``: create, get, search, state, history, copy."""

from __future__ import annotations

import uuid

import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

from tests.http.conftest import human, obj, refused


async def test_create_with_id_and_metadata_then_get(client: LangGraphClient) -> None:
    tid = str(uuid.uuid4())
    thread = await client.threads.create(thread_id=tid, metadata={"user": "u1"})
    assert thread["thread_id"] == tid and thread["status"] == "idle"
    assert thread["metadata"] == {"user": "u1"}  # no assistant yet: its first run chooses one
    assert thread["values"] == {"messages": []}
    again = await client.threads.get(tid)
    assert again["thread_id"] == tid and obj(again["metadata"])["user"] == "u1"
    await client.runs.wait(tid, "assistant", input=human("hello"))
    bound = await client.threads.get(tid)
    assert bound["metadata"] == {"user": "u1", "graph_id": "assistant", "assistant_id": "assistant"}


async def test_if_exists_raise_and_do_nothing(client: LangGraphClient) -> None:
    tid = str(uuid.uuid4())
    await client.threads.create(thread_id=tid, metadata={"n": 1})
    with pytest.raises(ConflictError):
        await client.threads.create(thread_id=tid)
    same = await client.threads.create(thread_id=tid, if_exists="do_nothing", metadata={"n": 2})
    assert obj(same["metadata"])["n"] == 1


async def test_graph_id_picks_the_assistant(client: LangGraphClient) -> None:
    thread = await client.threads.create(graph_id="second")
    assert obj(thread["metadata"])["graph_id"] == "second"
    values = obj(await client.runs.wait(thread["thread_id"], "second", input=human("hi")))
    assert values["messages"][-1]["content"] == "second here"
    with pytest.raises(NotFoundError):
        await client.threads.create(graph_id="nobody")
    status, detail = await refused(client.runs.wait(thread["thread_id"], "assistant", input=human("hello")))
    assert status == 409 and "runs assistant 'second'" in detail


async def test_unknown_thread_is_404(client: LangGraphClient) -> None:
    with pytest.raises(NotFoundError):
        await client.threads.get("no-such-thread")
    with pytest.raises(NotFoundError):
        await client.threads.get_history("no-such-thread")


async def test_unsupported_fields_are_422_with_a_reason(client: LangGraphClient) -> None:
    with pytest.raises(UnprocessableEntityError, match="TTL"):
        await client.threads.create(ttl=5)


async def test_search_by_metadata_and_status(client: LangGraphClient) -> None:
    tag = str(uuid.uuid4())
    idle = await client.threads.create(metadata={"tag": tag, "kind": "idle"})
    waiting = await client.threads.create(metadata={"tag": tag, "kind": "waiting"})
    await client.runs.wait(waiting["thread_id"], "assistant", input=human("delete acct_s"))

    found = await client.threads.search(metadata={"tag": tag})
    assert {t["thread_id"] for t in found} == {idle["thread_id"], waiting["thread_id"]}
    interrupted = await client.threads.search(metadata={"tag": tag}, status="interrupted")
    assert [t["thread_id"] for t in interrupted] == [waiting["thread_id"]]
    assert obj(interrupted[0]["values"])["__interrupt__"]
    by_kind = await client.threads.search(metadata={"tag": tag, "kind": "idle"})
    assert [t["thread_id"] for t in by_kind] == [idle["thread_id"]]
    # agent-chat-ui lists a user's threads by graph_id.
    assert waiting["thread_id"] in {
        t["thread_id"] for t in await client.threads.search(metadata={"graph_id": "assistant", "tag": tag}, limit=100)
    }
    oldest_first = await client.threads.search(metadata={"tag": tag}, sort_by="created_at", sort_order="asc")
    assert [t["thread_id"] for t in oldest_first] == [idle["thread_id"], waiting["thread_id"]]


async def test_history_is_the_checkpoint_chain_newest_first(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "assistant", input=human("research owls"))
    states = await client.threads.get_history(tid, limit=100)
    # human, ai(call), tool, ai(call), tool, ai(reply): one checkpoint per message, then the empty state
    assert len(states) == 7
    head, *older = states
    assert obj(head["values"])["messages"][-1]["content"] == "research done" and head["next"] == []
    for newer, parent in zip(states, older, strict=False):
        parent_checkpoint = newer["parent_checkpoint"]
        assert (
            parent_checkpoint is not None
            and parent_checkpoint["checkpoint_id"] == parent["checkpoint"]["checkpoint_id"]
        )
        assert len(obj(newer["values"])["messages"]) == len(obj(parent["values"])["messages"]) + 1
    assert states[-1]["parent_checkpoint"] is None and obj(states[-1]["values"])["messages"] == []
    state = await client.threads.get_state(tid)
    assert state["checkpoint"] == head["checkpoint"]
    before = await client.threads.get_history(tid, limit=2, before=head["checkpoint"])
    assert [s["checkpoint"] for s in before] == [s["checkpoint"] for s in states[1:3]]
    raw = await client.http.get(f"/threads/{tid}/history", params={"limit": 1})
    assert raw[0]["checkpoint"] == head["checkpoint"]


async def test_copy_is_a_fork_sharing_history(client: LangGraphClient) -> None:
    thread = await client.threads.create(metadata={"origin": "copy-test"})
    tid = thread["thread_id"]
    await client.runs.wait(tid, "assistant", input=human("hello one"))
    copy = obj(await client.threads.copy(tid))  # type: ignore[func-returns-value]  # the SDK says None; it is the thread
    assert copy["thread_id"] != tid and obj(copy["metadata"])["origin"] == "copy-test"
    assert copy["values"]["messages"] == obj((await client.threads.get(tid))["values"])["messages"]

    await client.runs.wait(copy["thread_id"], "assistant", input=human("hello from the copy"))
    await client.runs.wait(tid, "assistant", input=human("hello from the original"))
    original = [m["content"] for m in obj((await client.threads.get(tid))["values"])["messages"]]
    forked = [m["content"] for m in obj((await client.threads.get(copy["thread_id"]))["values"])["messages"]]
    assert original[:2] == forked[:2]
    assert "hello from the copy" in forked and "hello from the copy" not in original
    assert "hello from the original" in original and "hello from the original" not in forked
    # The shared prefix is the same stored messages (same ids), not copies.
    original_ids = [m["id"] for m in obj((await client.threads.get(tid))["values"])["messages"]]
    forked_ids = [m["id"] for m in obj((await client.threads.get(copy["thread_id"]))["values"])["messages"]]
    assert original_ids[:2] == forked_ids[:2]


async def test_memory_store_threads_and_copy(memory_client: LangGraphClient) -> None:
    thread = await memory_client.threads.create()
    values = obj(await memory_client.runs.wait(thread["thread_id"], "assistant", input=human("hello memory")))
    assert [m["type"] for m in values["messages"]] == ["human", "ai"]
    copy = obj(await memory_client.threads.copy(thread["thread_id"]))  # type: ignore[func-returns-value]  # the SDK says None
    assert [m["id"] for m in copy["values"]["messages"]] == [m["id"] for m in values["messages"]]


async def test_a_thread_made_without_an_assistant_is_bound_by_its_first_run(client: LangGraphClient) -> None:
    tag = str(uuid.uuid4())
    thread = await client.threads.create(metadata={"tag": tag})  # as agent-chat-ui creates them
    tid = thread["thread_id"]
    assert thread["metadata"] == {"tag": tag}
    assert await client.threads.search(metadata={"graph_id": "second", "tag": tag}) == []

    values = obj(await client.runs.wait(tid, "second", input=human("hi")))

    assert values["messages"][-1]["content"] == "second here"
    assert obj((await client.threads.get(tid))["metadata"]) == {
        "tag": tag,
        "graph_id": "second",
        "assistant_id": "second",
    }
    found = await client.threads.search(metadata={"graph_id": "second", "tag": tag})
    assert [t["thread_id"] for t in found] == [tid]
    status, detail = await refused(client.runs.wait(tid, "assistant", input=human("hello")))
    assert status == 409 and "runs assistant 'second'" in detail
    [run] = await client.runs.list(tid)
    assert run["assistant_id"] == "second"
