"""Runs over HTTP through ``langgraph-sdk``: wait, stream modes, background runs, join, cancel, multitask."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError
from langgraph_sdk.schema import StreamPart

from tests.http.agents import gate
from tests.http.conftest import human, obj, refused


async def collect(stream: Any) -> list[StreamPart]:
    return [part async for part in stream]


async def test_wait_returns_langchain_messages(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    values = obj(await client.runs.wait(thread["thread_id"], "assistant", input=human("research bees")))
    messages = values["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai", "tool", "ai"]
    assert messages[0]["content"] == "research bees"
    call = messages[1]["tool_calls"][0]
    assert call["name"] == "lookup" and call["args"] == {"q": "bees"}
    assert messages[2]["tool_call_id"] == call["id"] and messages[2]["content"] == "facts about bees"
    assert messages[3]["additional_kwargs"]["reasoning_content"] == "one more look"
    assert messages[-1]["content"] == "research done"
    # Provenance over HTTP: the human message is stamped with the API key's principal.
    assert messages[0]["additional_kwargs"]["origin"] == {"kind": "user", "id": "alice"}
    assert len({m["id"] for m in messages}) == len(messages)


async def test_stream_values_and_updates(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    parts = await collect(
        client.runs.stream(
            thread["thread_id"], "assistant", input=human("research ants"), stream_mode=["values", "updates"]
        )
    )
    events = [p.event for p in parts]
    assert events[0] == "metadata" and events[-1] == "end"
    assert set(events) == {"metadata", "values", "updates", "end"}
    assert all(p.id for p in parts)
    final = [p for p in parts if p.event == "values"][-1].data
    assert final["messages"][-1]["content"] == "research done"
    updates = [p.data for p in parts if p.event == "updates"]
    assert [next(iter(u)) for u in updates] == ["model", "tools", "model", "tools", "model"]
    assert updates[-1]["model"]["messages"][0]["content"] == "research done"
    run_id = parts[0].data["run_id"]
    run = await client.runs.get(thread["thread_id"], run_id)
    assert run["status"] == "success" and run["assistant_id"] == "assistant"


async def test_stream_messages_tuple_and_custom(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    parts = await collect(
        client.runs.stream(
            thread["thread_id"], "assistant", input=human("research moths"), stream_mode=["messages-tuple", "custom"]
        )
    )
    chunks = [p.data for p in parts if p.event == "messages"]
    assert all(isinstance(c, list) and len(c) == 2 and c[1]["langgraph_node"] in ("model", "tools") for c in chunks)
    streamed = "".join(c[0]["content"] for c in chunks if c[0]["type"] == "AIMessageChunk")
    assert streamed == "research done"
    tools = [c[0] for c in chunks if c[0]["type"] == "tool"]
    assert [t["content"] for t in tools] == ["facts about moths", "facts about moths again"]
    # A repertory tool writes no custom graph output: repertory's own events have their own route.
    assert [p for p in parts if p.event == "custom"] == []


async def test_stream_legacy_messages_mode(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    parts = await collect(
        client.runs.stream(thread["thread_id"], "assistant", input=human("hello legacy"), stream_mode="messages")
    )
    events = [p.event for p in parts]
    assert "messages/partial" in events and "messages/complete" in events and "messages/metadata" in events
    complete = [p.data for p in parts if p.event == "messages/complete"][-1]
    assert complete[0]["content"] == "Hello! How can I help?"


async def test_background_run_join_list_and_stateless(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "assistant", input=human("hello background"), metadata={"k": "v"})
    assert run["status"] in ("pending", "running", "success") and run["metadata"] == {"k": "v"}
    values = await client.runs.join(tid, run["run_id"])
    assert values["messages"][-1]["content"] == "Hello! How can I help?"
    listed = await client.runs.list(tid)
    assert [r["run_id"] for r in listed] == [run["run_id"]] and listed[0]["status"] == "success"
    with pytest.raises(NotFoundError):
        await client.runs.get(tid, "no-such-run")

    stateless = obj(await client.runs.wait(None, "assistant", input=human("hello stateless")))
    assert stateless["messages"][-1]["content"] == "Hello! How can I help?"
    streamed = await collect(client.runs.stream(None, "second", input=human("hi")))
    assert [p.data for p in streamed if p.event == "values"][-1]["messages"][-1]["content"] == "second here"


async def test_error_run(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    parts = await collect(client.runs.stream(tid, "assistant", input=human("fail now")))
    errors = [p.data for p in parts if p.event == "error"]
    assert errors == [{"error": "ModelError", "message": "the model is down"}] and parts[-1].event == "end"
    assert (await client.threads.get(tid))["status"] == "error"
    waited = await client.runs.wait(tid, "assistant", input=human("fail again"), raise_error=False)
    assert waited == {"__error__": {"error": "ModelError", "message": "the model is down"}}
    with pytest.raises(Exception, match="ModelError: the model is down"):  # the SDK's own reading of it
        await client.runs.wait(tid, "assistant", input=human("fail once more"))
    state = await client.threads.get_state(tid)
    error = state["tasks"][0]["error"]
    assert error is not None and "the model is down" in error


async def test_bad_input_is_422(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]

    def wait(assistant: str = "assistant", thread_id: str = tid, **kwargs: Any) -> Any:
        return client.runs.wait(thread_id, assistant, **kwargs)

    two = {"messages": [human("a")["messages"][0]] * 2}
    assert await refused(wait(input=two)) == (
        422,
        "body: input takes exactly one human message per run (a run is one turn), got 2",
    )
    before = len(await client.threads.search(limit=1000))
    assert (await refused(client.runs.wait(None, "assistant", input=two)))[0] == 422
    assert len(await client.threads.search(limit=1000)) == before  # a refused stateless run leaves no thread
    status, detail = await refused(wait(input={"messages": [{"role": "assistant", "content": "x"}]}))
    assert status == 422 and "must be human messages" in detail
    status, detail = await refused(wait(input={"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}))
    assert status == 422 and "'image_url'" in detail
    status, detail = await refused(wait(command={"resume": "x"}, input=human("y")))
    assert status == 422 and "input or command, not both" in detail
    with pytest.raises(UnprocessableEntityError, match="stream_mode 'debug' is not supported"):
        await collect(client.runs.stream(tid, "assistant", input=human("hello"), stream_mode="debug"))
    with pytest.raises(UnprocessableEntityError, match="webhook secret"):
        await client.runs.create(tid, "assistant", input=human("hello"), webhook="http://127.0.0.1:9/")
    status, detail = await refused(wait("nobody", input=human("hello")))
    assert status == 404 and "no assistant 'nobody'" in detail
    assert (await refused(wait(thread_id="no-such-thread", input=human("hello"))))[0] == 404
    created = await wait(thread_id="made-on-demand-" + tid, input=human("hello"), if_not_exists="create")
    assert created["messages"][-1]["content"] == "Hello! How can I help?"


async def test_a_run_from_the_head_checkpoint_continues_the_thread(client: LangGraphClient) -> None:
    # Runs from earlier checkpoints (edit, regenerate) are in test_checkpoints.py.
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "assistant", input=human("hello one"))
    head = (await client.threads.get_history(tid, limit=1))[0]
    ok = obj(await client.runs.wait(tid, "assistant", input=human("hello two"), checkpoint=head["checkpoint"]))
    assert [m["content"] for m in ok["messages"]][-4:] == [
        "hello one",
        "Hello! How can I help?",
        "hello two",
        "Hello! How can I help?",
    ]


async def test_multitask_reject_enqueue_interrupt(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    first = await client.runs.create(tid, "assistant", input=human("block mt1"))
    with pytest.raises(ConflictError):
        await client.runs.create(tid, "assistant", input=human("hello rejected"), multitask_strategy="reject")
    queued = await client.runs.create(tid, "assistant", input=human("hello queued"), multitask_strategy="enqueue")
    assert queued["status"] == "pending"
    gate("mt1").set()
    await client.runs.join(tid, queued["run_id"])
    runs = {r["run_id"]: r["status"] for r in await client.runs.list(tid)}
    assert runs == {first["run_id"]: "success", queued["run_id"]: "success"}

    blocked = await client.runs.create(tid, "assistant", input=human("block mt2"))
    interrupting = await client.runs.create(tid, "assistant", input=human("hello now"), multitask_strategy="interrupt")
    values = await client.runs.join(tid, interrupting["run_id"])
    assert values["messages"][-1]["content"] == "Hello! How can I help?"
    assert (await client.runs.get(tid, blocked["run_id"]))["status"] == "interrupted"
    gate("mt2").set()


async def test_cancel_a_running_run(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "assistant", input=human("block cancel1"))
    await client.runs.cancel(tid, run["run_id"], wait=True)
    assert (await client.runs.get(tid, run["run_id"]))["status"] == "interrupted"
    assert (await client.threads.get(tid))["status"] == "idle"
    gate("cancel1").set()
    after = obj(await client.runs.wait(tid, "assistant", input=human("hello after cancel")))
    assert after["messages"][-1]["content"] == "Hello! How can I help?"


async def test_concurrent_waits_on_many_threads(memory_client: LangGraphClient) -> None:
    threads = [await memory_client.threads.create() for _ in range(8)]
    results = await asyncio.gather(
        *(
            memory_client.runs.wait(t["thread_id"], "assistant", input=human(f"hello {i}"))
            for i, t in enumerate(threads)
        )
    )
    assert all(obj(r)["messages"][-1]["content"] == "Hello! How can I help?" for r in results)


async def test_a_refused_input_leaves_the_thread(client: LangGraphClient) -> None:
    """An input the agent's input guardrail refuses is not in the thread afterwards (its run is ``error``)."""
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "second", input=human("hello"))
    refused = await client.runs.create(tid, "second", input=human("my forbidden-secret is 42"))
    await client.runs.join(tid, refused["run_id"])
    assert (await client.runs.get(tid, refused["run_id"]))["status"] == "error"
    values = obj(await client.runs.wait(tid, "second", input=human("and now")))
    texts = [m["content"] for m in values["messages"]]
    assert texts == ["hello", "second here", "and now", "second here"]
    state = await client.threads.get_state(tid)
    assert "forbidden-secret" not in str(state["values"])
