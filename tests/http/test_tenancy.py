"""Tenancy over HTTP: a thread is its owner's; another owner gets 404 everywhere, an admin key sees all."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
from langgraph_sdk.client import LangGraphClient

from tests.http.conftest import ADMIN, ALICE, BOB, ServerThread, human, obj, refused, sse_events


async def _drain(stream: AsyncIterator[Any]) -> None:
    async for _ in stream:
        pass


async def test_another_owner_gets_404_for_everything_about_a_thread(
    client: LangGraphClient, bob: LangGraphClient, sqlite_server: ServerThread
) -> None:
    thread = await client.threads.create(metadata={"tag": "alice's"})
    tid = thread["thread_id"]
    await client.runs.wait(tid, "assistant", input=human("hello secret"))
    [run] = await client.runs.list(tid)
    rid = run["run_id"]

    refusals = [
        bob.threads.get(tid),
        bob.threads.get_state(tid),
        bob.threads.get_history(tid),
        bob.threads.copy(tid),
        bob.threads.update(tid, metadata={"taken": True}),
        bob.threads.delete(tid),
        bob.runs.list(tid),
        bob.runs.get(tid, rid),
        bob.runs.join(tid, rid),
        bob.runs.cancel(tid, rid),
        bob.runs.wait(tid, "assistant", input=human("hello from bob")),
        bob.runs.create(tid, "assistant", input=human("hello from bob")),
        _drain(bob.runs.stream(tid, "assistant", input=human("hello from bob"))),
        _drain(bob.runs.join_stream(tid, rid)),
    ]
    for refusal in refusals:
        status, detail = await refused(refusal)
        assert status == 404 and "alice" not in detail, detail
    async with httpx.AsyncClient(base_url=sqlite_server.url) as raw:
        events = await raw.get(f"/threads/{tid}/events", headers={"x-api-key": BOB})
        assert events.status_code == 404
    # Nothing bob tried changed or ran anything.
    assert [r["run_id"] for r in await client.runs.list(tid)] == [rid]
    assert obj((await client.threads.get(tid))["metadata"]) == {
        "tag": "alice's",
        "graph_id": "assistant",
        "assistant_id": "assistant",
    }


async def test_searches_list_only_the_callers_threads_and_an_admin_sees_all(
    client: LangGraphClient, bob: LangGraphClient, admin: LangGraphClient
) -> None:
    tag = str(uuid.uuid4())
    mine = await client.threads.create(metadata={"tag": tag})
    theirs = await bob.threads.create(metadata={"tag": tag})
    stateless = obj(await bob.runs.wait(None, "assistant", input=human("hello stateless")))
    assert stateless["messages"][-1]["content"] == "Hello! How can I help?"

    def ids(found: list[Any]) -> set[str]:
        return {t["thread_id"] for t in found}

    assert ids(await client.threads.search(metadata={"tag": tag})) == {mine["thread_id"]}
    assert ids(await bob.threads.search(metadata={"tag": tag})) == {theirs["thread_id"]}
    assert ids(await admin.threads.search(metadata={"tag": tag})) == {mine["thread_id"], theirs["thread_id"]}
    assert ids(await client.threads.search(ids=[theirs["thread_id"]])) == set()
    assert await client.threads.count(metadata={"tag": tag}) == 1
    assert await admin.threads.count(metadata={"tag": tag}) == 2
    everything = ids(await client.threads.search(limit=1000))
    assert theirs["thread_id"] not in everything and mine["thread_id"] in everything


async def test_an_admin_acts_on_any_thread_as_itself(client: LangGraphClient, admin: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    values = obj(await admin.runs.wait(tid, "assistant", input=human("hello from the admin")))
    assert values["messages"][0]["additional_kwargs"]["origin"] == {"kind": "user", "id": "root"}
    # alice still owns it: she sees the admin's run, and it is listed as hers.
    assert len(await client.runs.list(tid)) == 1
    assert tid in {t["thread_id"] for t in await client.threads.search(limit=1000)}
    copy = obj(await admin.threads.copy(tid))  # type: ignore[func-returns-value]  # the SDK says None
    assert (await client.threads.get(copy["thread_id"]))["thread_id"] == copy["thread_id"]


async def test_a_copy_inherits_the_owner_and_streams_follow_the_rule(
    client: LangGraphClient, bob: LangGraphClient, sqlite_server: ServerThread
) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    parts = [p async for p in client.runs.stream(tid, "assistant", input=human("research owls"))]
    assert [p.event for p in parts][-2:] == ["values", "end"]
    copy = obj(await client.threads.copy(tid))  # type: ignore[func-returns-value]  # the SDK says None
    status, _ = await refused(bob.threads.get(copy["thread_id"]))
    assert status == 404
    # The events of alice's thread: hers and the admin's to read.
    for key in (ALICE, ADMIN):
        events = await sse_events(sqlite_server.url, f"/threads/{tid}/events", key, "turn.completed")
        assert events[0][0] == "turn.started" and events[-1][0] == "turn.completed"


async def test_a_taken_id_is_refused_without_saying_whose(client: LangGraphClient, bob: LangGraphClient) -> None:
    tid = str(uuid.uuid4())
    await client.threads.create(thread_id=tid)
    # 422, the answer a reserved id gets (http.gateway): never "it exists", never whose.
    status, detail = await refused(bob.threads.create(thread_id=tid))
    assert status == 422 and "alice" not in detail and "exists" not in detail
    status, _ = await refused(bob.threads.create(thread_id=tid, if_exists="do_nothing"))
    assert status == 422  # not alice's thread handed to bob
    status, _ = await refused(bob.runs.wait(tid, "assistant", input=human("hello"), if_not_exists="create"))
    assert status == 422
