"""Runs from a checkpoint through ``langgraph-sdk``: agent-chat-ui's edit and regenerate.

agent-chat-ui finds a message's ``parent_checkpoint`` in the thread's history (the parent of the
oldest state holding the message) and submits from it: with the edited human message to edit,
with no input to regenerate. The thread goes back to that checkpoint and branches from there, as
in LangGraph; nothing is deleted (the old branch is still in the store). The thread state of a
compacting assistant shows the whole conversation, its summaries marked so agent-chat-ui hides them.
"""

from __future__ import annotations

import itertools
from typing import Any, cast

import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import Checkpoint, ThreadState

from repertory import open_store
from repertory.http.convert import BOUNDARY_ID_PREFIX
from repertory.http.views import EMPTY_CHECKPOINT
from tests.http.agents import DELETED, gate
from tests.http.conftest import ServerThread, human, obj, refused

Dict = dict[str, Any]


async def _states(client: LangGraphClient, tid: str) -> list[ThreadState]:
    return list(await client.threads.get_history(tid, limit=1000))


def _parent_checkpoint(states: list[ThreadState], message_id: str) -> Checkpoint:
    """What agent-chat-ui submits from: the parent checkpoint of the oldest state holding the message."""
    holding = [s for s in states if any(m["id"] == message_id for m in obj(s["values"])["messages"])]
    assert holding, f"no state holds message {message_id}"
    parent = holding[-1]["parent_checkpoint"]
    assert parent is not None
    return parent


def _contents(values: object) -> list[str]:
    return [m["content"] for m in obj(values)["messages"]]


async def test_editing_a_message_branches_the_thread_from_before_it(
    client: LangGraphClient, sqlite_server: ServerThread
) -> None:
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "assistant", input=human("hello one"))
    await client.runs.wait(tid, "assistant", input=human("hello two"))
    states = await _states(client, tid)
    old_head = states[0]["checkpoint"]["checkpoint_id"]
    assert old_head is not None
    second = next(m for m in obj(states[0]["values"])["messages"] if m["content"] == "hello two")

    edited = await client.runs.wait(
        tid, "assistant", input=human("hello edited"), checkpoint=_parent_checkpoint(states, second["id"])
    )
    reply = "Hello! How can I help?"
    assert _contents(edited) == ["hello one", reply, "hello edited", reply]
    state = await client.threads.get_state(tid)
    assert _contents(state["values"]) == ["hello one", reply, "hello edited", reply]
    # The history is the new branch, each state on its parent.
    states = await _states(client, tid)
    assert [len(obj(s["values"])["messages"]) for s in states] == [4, 3, 2, 1, 0]
    for newer, older in itertools.pairwise(states):
        parent = newer["parent_checkpoint"]
        assert parent is not None and parent["checkpoint_id"] == older["checkpoint"]["checkpoint_id"]
    # Nothing was deleted: the old branch is still in the store, whole.
    async with await open_store(sqlite_server.store) as store:
        old = await store.load_history(old_head)
        assert old is not None and [m.text for m in old.messages] == ["hello one", reply, "hello two", reply]


async def test_editing_the_first_message_starts_the_thread_over(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "assistant", input=human("hello first"))
    states = await _states(client, tid)
    first = obj(states[0]["values"])["messages"][0]
    checkpoint = _parent_checkpoint(states, first["id"])
    assert checkpoint["checkpoint_id"] == EMPTY_CHECKPOINT
    edited = await client.runs.wait(tid, "assistant", input=human("hello again"), checkpoint=checkpoint)
    assert _contents(edited) == ["hello again", "Hello! How can I help?"]


async def test_regenerating_a_reply_after_tool_calls_makes_only_the_reply_again(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "assistant", input=human("hello before"))
    first = obj(await client.runs.wait(tid, "assistant", input=human("research owls")))["messages"]
    states = await _states(client, tid)
    last_ai = first[-1]
    assert last_ai["type"] == "ai" and last_ai["content"] == "research done"

    again = obj(
        await client.runs.wait(tid, "assistant", input=None, checkpoint=_parent_checkpoint(states, last_ai["id"]))
    )["messages"]
    assert [m["content"] for m in again] == [m["content"] for m in first]
    # Everything up to the checkpoint stands (the lookups' calls and results are the same messages);
    # only the final reply was made afresh.
    assert [m["id"] for m in again[:-1]] == [m["id"] for m in first[:-1]]
    assert again[-1]["id"] != first[-1]["id"]


async def test_regenerate_after_an_approved_tool_runs_it_once_and_asks_no_second_approval(
    client: LangGraphClient, sqlite_server: ServerThread
) -> None:
    """agent-chat-ui's Regenerate on the final reply of a turn that ran an approved, non-idempotent tool."""
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "assistant", input=human("delete acct_regen"))
    assert (await client.threads.get(tid))["status"] == "interrupted"
    done = obj(await client.runs.wait(tid, "assistant", command={"resume": {"decisions": [{"type": "approve"}]}}))
    first = done["messages"]
    assert first[-1]["content"] == "finished: deleted acct_regen (approved by alice)"
    assert DELETED["acct_regen"] == 1

    states = await _states(client, tid)
    again = await client.runs.wait(tid, "assistant", input=None, checkpoint=_parent_checkpoint(states, first[-1]["id"]))
    messages = obj(again)["messages"]
    assert "__interrupt__" not in obj(again)  # no second approval asked
    assert (await client.threads.get(tid))["status"] == "idle"
    assert DELETED["acct_regen"] == 1  # the side effect happened once
    assert [m["id"] for m in messages[:-1]] == [m["id"] for m in first[:-1]]
    assert messages[-1]["content"] == "finished: deleted acct_regen (approved by alice)"
    async with await open_store(sqlite_server.store) as store:
        events = await store.load_events(tid)  # type: ignore[attr-defined]
    assert [e.type for e in events].count("approval.requested") == 1
    assert [e.type for e in events].count("tool.result") == 1


async def test_regenerating_needs_a_human_message_at_or_before_the_checkpoint(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "assistant", input=human("hello"))
    status, detail = await refused(
        client.runs.wait(tid, "assistant", input=None, checkpoint=cast(Checkpoint, {"checkpoint_id": EMPTY_CHECKPOINT}))
    )
    assert status == 422 and "human message" in detail


async def test_a_checkpoint_of_another_thread_is_not_found(client: LangGraphClient) -> None:
    one = (await client.threads.create())["thread_id"]
    two = (await client.threads.create())["thread_id"]
    await client.runs.wait(one, "assistant", input=human("hello one"))
    await client.runs.wait(two, "assistant", input=human("hello two"))
    foreign = (await _states(client, two))[0]["checkpoint"]
    status, _ = await refused(client.runs.wait(one, "assistant", input=human("hello x"), checkpoint=foreign))
    assert status == 404
    assert _contents((await client.threads.get_state(one))["values"]) == ["hello one", "Hello! How can I help?"]


async def test_a_busy_thread_goes_back_only_when_the_run_in_progress_may_be_interrupted(
    client: LangGraphClient,
) -> None:
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "assistant", input=human("hello zero"))
    checkpoint = (await _states(client, tid))[0]["checkpoint"]
    running = await client.runs.create(tid, "assistant", input=human("block cp1"))
    try:
        for strategy in ("enqueue", "reject"):
            status, _ = await refused(
                client.runs.wait(
                    tid, "assistant", input=human("hello edit"), checkpoint=checkpoint, multitask_strategy=strategy
                )
            )
            assert status == 409
        edited = await client.runs.wait(
            tid, "assistant", input=human("hello edit"), checkpoint=checkpoint, multitask_strategy="interrupt"
        )
        assert _contents(edited)[-2:] == ["hello edit", "Hello! How can I help?"]
        assert (await client.runs.get(tid, running["run_id"]))["status"] == "interrupted"
    finally:
        gate("cp1").set()


async def test_a_compacting_thread_shows_the_whole_conversation(client: LangGraphClient) -> None:
    tid = (await client.threads.create(graph_id="compacting"))["thread_id"]
    for i in range(30):
        await client.runs.wait(tid, "compacting", input=human(f"message {i}"))
    messages = obj((await client.threads.get_state(tid))["values"])["messages"]
    said = [m for m in messages if not m["id"].startswith(BOUNDARY_ID_PREFIX)]
    assert [m["content"] for m in said if m["type"] == "human"] == [f"message {i}" for i in range(30)]
    summaries = [m for m in messages if m["id"].startswith(BOUNDARY_ID_PREFIX)]
    assert summaries and all(m["type"] == "system" and m["additional_kwargs"]["repertory_boundary"] for m in summaries)
    # An edit before the latest summary goes back past it: the branch holds no summary yet.
    states = await _states(client, tid)
    third = next(m for m in said if m["content"] == "message 2")
    edited = await client.runs.wait(
        tid, "compacting", input=human("message 2 edited"), checkpoint=_parent_checkpoint(states, third["id"])
    )
    contents = _contents(edited)
    assert [c for c in contents if c.startswith("message")] == ["message 0", "message 1", "message 2 edited"]


@pytest.mark.slow
async def test_edit_on_the_ray_backend(ray_client: LangGraphClient) -> None:
    tid = (await ray_client.threads.create())["thread_id"]
    await ray_client.runs.wait(tid, "assistant", input=human("hello one"))
    await ray_client.runs.wait(tid, "assistant", input=human("hello two"))
    states = await _states(ray_client, tid)
    second = next(m for m in obj(states[0]["values"])["messages"] if m["content"] == "hello two")
    edited = await ray_client.runs.wait(
        tid, "assistant", input=human("hello edited"), checkpoint=_parent_checkpoint(states, second["id"])
    )
    assert _contents(edited)[-2:] == ["hello edited", "Hello! How can I help?"]
