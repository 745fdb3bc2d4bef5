"""The HTTP server on the Ray backend: the same routes, with the sessions in a Ray host process."""

from __future__ import annotations

from langgraph_sdk.client import LangGraphClient

from tests.http.conftest import human, obj


async def test_wait_and_stream_over_ray(ray_client: LangGraphClient) -> None:
    thread = await ray_client.threads.create(metadata={"team": "ray"})
    values = obj(await ray_client.runs.wait(thread["thread_id"], "assistant", input=human("research owls")))
    assert [m["type"] for m in values["messages"]] == ["human", "ai", "tool", "ai", "tool", "ai"]
    parts = [
        p
        async for p in ray_client.runs.stream(
            thread["thread_id"], "assistant", input=human("hello again"), stream_mode=["values", "updates"]
        )
    ]
    assert parts[0].event == "metadata" and parts[-1].event == "end"
    final = [p.data for p in parts if p.event == "values"][-1]
    assert final["messages"][0]["content"] == "research owls" and len(final["messages"]) == 8
    found = await ray_client.threads.search(metadata={"team": "ray"})
    assert [t["thread_id"] for t in found] == [thread["thread_id"]]


async def test_an_approval_over_ray(ray_client: LangGraphClient) -> None:
    thread = await ray_client.threads.create()
    tid = thread["thread_id"]
    values = obj(await ray_client.runs.wait(tid, "assistant", input=human("delete acct_9")))
    [interrupt] = values["__interrupt__"]
    assert interrupt["value"]["action_requests"][0]["args"] == {"account_id": "acct_9"}
    assert (await ray_client.threads.get(tid))["status"] == "interrupted"
    done = obj(await ray_client.runs.wait(tid, "assistant", command={"resume": {"decisions": [{"type": "approve"}]}}))
    assert done["messages"][-1]["content"].startswith("finished: deleted acct_9")
    copy = obj(await ray_client.threads.copy(tid))  # type: ignore[func-returns-value]  # the SDK says None
    state = await ray_client.threads.get_state(copy["thread_id"])
    assert obj(state["values"])["messages"] == done["messages"]


async def test_bind_patch_and_delete_over_ray(ray_client: LangGraphClient) -> None:
    thread = await ray_client.threads.create()  # unbound: the first run's assistant takes it
    tid = thread["thread_id"]
    values = obj(await ray_client.runs.wait(tid, "second", input=human("hi")))
    assert values["messages"][-1]["content"] == "second here"
    patched = await ray_client.threads.update(tid, metadata={"team": "ray"})
    assert patched["metadata"] == {"team": "ray", "graph_id": "second", "assistant_id": "second"}
    copy = obj(await ray_client.threads.copy(tid))  # type: ignore[func-returns-value]  # the SDK says None
    await ray_client.threads.delete(tid)
    assert tid not in {t["thread_id"] for t in await ray_client.threads.search(limit=1000)}
    state = await ray_client.threads.get_state(copy["thread_id"])
    assert obj(state["values"])["messages"] == values["messages"]
