"""A delegated child's approval over HTTP: shown on the parent's thread, answered there (agent-chat-ui's view)."""

from __future__ import annotations

from langgraph_sdk.client import LangGraphClient

from tests.http.conftest import human, obj


async def test_a_childs_approval_is_the_parents_interrupt_and_is_resumed_on_the_parents_thread(
    client: LangGraphClient,
) -> None:
    thread = await client.threads.create(graph_id="lead")
    tid = thread["thread_id"]

    # The lead's turn waits in its delegation while the child waits for a human: the run rests there.
    values = obj(await client.runs.wait(tid, "lead", input=human("delete acct_9")))
    [interrupt] = values["__interrupt__"]
    [action] = interrupt["value"]["action_requests"]
    assert action["name"] == "delete_account" and action["args"] == {"account_id": "acct_9"}
    assert interrupt["id"] == action["tool_call_id"]
    assert values["messages"][-1]["tool_calls"][0]["name"] == "delegate"  # the parent's own call, waiting

    got = await client.threads.get(tid)
    assert got["status"] == "interrupted" and got["interrupts"] == {interrupt["id"]: [interrupt]}
    state = await client.threads.get_state(tid)
    assert state["next"] == ["tools"] and state["tasks"][0]["interrupts"] == [interrupt]

    parts = [
        p
        async for p in client.runs.stream(
            tid, "lead", command={"resume": {"decisions": [{"type": "approve"}]}}, stream_mode=["values"]
        )
    ]
    final = [p.data for p in parts if p.event == "values"][-1]
    assert "__interrupt__" not in final
    assert final["messages"][-1]["content"] == "lead: finished: deleted acct_9 (approved by alice)"
    assert (await client.threads.get(tid))["status"] == "idle"


async def test_a_stream_of_the_parents_run_ends_when_a_child_waits_and_the_history_holds_the_card(
    client: LangGraphClient,
) -> None:
    thread = await client.threads.create(graph_id="lead")
    tid = thread["thread_id"]
    # The stream ends by itself (the run rests: a human is awaited); the last values show the parent's call.
    parts = [p async for p in client.runs.stream(tid, "lead", input=human("delete acct_10"), stream_mode=["values"])]
    last = [p.data for p in parts if p.event == "values"][-1]
    assert last["messages"][-1]["tool_calls"][0]["name"] == "delegate"
    # What agent-chat-ui reads once the stream is over: the head state's task and its interrupt.
    [head] = await client.threads.get_history(tid, limit=1)
    [task] = head["tasks"]
    [interrupt] = task["interrupts"]
    assert interrupt["value"]["action_requests"][0]["args"] == {"account_id": "acct_10"}
    assert obj(head["values"])["__interrupt__"] == [interrupt]

    values = obj(await client.runs.wait(tid, "lead", command={"resume": {"decisions": [{"type": "reject"}]}}))
    assert values["messages"][-1]["content"].startswith("lead: finished: User rejected the tool call")
