"""Human in the loop over HTTP: interrupts as agent-chat-ui reads them, resumed with decisions or values."""

from __future__ import annotations

import re
from typing import Any

import httpx
from langgraph_sdk.client import LangGraphClient

from repertory import SqliteSessionStore
from tests.http.conftest import ALICE, ServerThread, human, obj, refused


async def interrupted(client: LangGraphClient, prompt: str) -> tuple[str, dict[str, Any]]:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    values = obj(await client.runs.wait(tid, "assistant", input=human(prompt)))
    [interrupt] = values["__interrupt__"]
    return tid, interrupt


async def test_approval_is_an_interrupt_agent_chat_ui_can_render(client: LangGraphClient) -> None:
    tid, interrupt = await interrupted(client, "delete acct_1")
    request = interrupt["value"]
    [action] = request["action_requests"]
    assert action["name"] == "delete_account" and action["args"] == {"account_id": "acct_1"}
    assert action["description"]
    [config] = request["review_configs"]
    assert config["action_name"] == "delete_account"
    assert config["allowed_decisions"] == ["approve", "edit", "reject"]
    assert config["args_schema"]["properties"]["account_id"]["type"] == "string"
    assert interrupt["id"] == action["tool_call_id"]

    thread = await client.threads.get(tid)
    assert thread["status"] == "interrupted" and thread["interrupts"] == {interrupt["id"]: [interrupt]}
    state = await client.threads.get_state(tid)
    assert state["next"] == ["tools"] and state["tasks"][0]["interrupts"] == [interrupt]
    history = await client.threads.get_history(tid, limit=1)
    assert history[0]["tasks"][0]["interrupts"][0]["value"] == request
    # The assistant's call is in the history, waiting for its result.
    assert obj(history[0]["values"])["messages"][-1]["tool_calls"][0]["name"] == "delete_account"
    # No resume token (48 hex digits) ever leaves the server.
    for text in (str(thread), str(state), str(history)):
        assert re.search(r"[0-9a-f]{48}", text) is None


async def test_approve_over_a_stream(client: LangGraphClient) -> None:
    tid, _ = await interrupted(client, "delete acct_2")
    parts = [
        p
        async for p in client.runs.stream(
            tid,
            "assistant",
            command={"resume": {"decisions": [{"type": "approve"}]}},
            stream_mode=["values", "updates"],
        )
    ]
    final = [p.data for p in parts if p.event == "values"][-1]
    assert "__interrupt__" not in final
    tool, reply = final["messages"][-2:]
    assert tool["type"] == "tool" and tool["content"] == "deleted acct_2 (approved by alice)"
    assert reply["content"] == "finished: deleted acct_2 (approved by alice)"
    assert (await client.threads.get(tid))["status"] == "idle"


async def test_a_decision_is_on_record_with_who_took_it(client: LangGraphClient, sqlite_server: ServerThread) -> None:
    tid, _ = await interrupted(client, "delete acct_9")
    edit = {"type": "edit", "edited_action": {"name": "delete_account", "args": {"account_id": "acct_99"}}}
    await client.runs.wait(tid, "assistant", command={"resume": {"decisions": [edit]}})
    async with await SqliteSessionStore.open(sqlite_server.store.removeprefix("sqlite:///")) as store:
        [run] = await store.list_runs(tid)
        [record] = run.approvals
        assert (record.decision, record.decided_by, record.args_replaced) == ("approved", "user:alice", True)
        [decided] = [e for e in await store.load_events(tid) if e.type == "approval.decided"]
    assert decided.data == {
        "tool_call_id": record.tool_call_id,
        "decision": "approved",
        "decided_by": "user:alice",  # the key's principal, whatever the payload said
        "args_replaced": True,
    }


async def test_edit_runs_the_tool_with_the_edited_arguments(client: LangGraphClient) -> None:
    tid, _ = await interrupted(client, "delete acct_3")
    edit = {"type": "edit", "edited_action": {"name": "delete_account", "args": {"account_id": "acct_33"}}}
    values = obj(await client.runs.wait(tid, "assistant", command={"resume": {"decisions": [edit]}}))
    tool = values["messages"][-2]
    assert tool["content"] == "deleted acct_33 (approved by alice)" and tool["status"] == "success"
    # The thread shows the call as it ran; the model's request is kept beside it, and in the history.
    call = values["messages"][-3]
    assert call["tool_calls"][0]["args"] == {"account_id": "acct_33"}
    assert call["additional_kwargs"]["repertory_requested_args"] == {
        call["tool_calls"][0]["id"]: {"account_id": "acct_3"}
    }
    state = await client.threads.get_state(tid)
    assert obj(state["values"])["messages"][-3]["tool_calls"][0]["args"] == {"account_id": "acct_33"}


async def test_reject_with_a_message(client: LangGraphClient) -> None:
    tid, _ = await interrupted(client, "delete acct_4")
    values = obj(
        await client.runs.wait(
            tid, "assistant", command={"resume": {"decisions": [{"type": "reject", "message": "not this one"}]}}
        )
    )
    tool = values["messages"][-2]
    assert tool["status"] == "error" and tool["content"] == "not this one"
    assert values["messages"][-1]["content"] == "finished: not this one (error)"


async def test_bad_decisions_leave_the_interrupt_live(client: LangGraphClient) -> None:
    tid, interrupt = await interrupted(client, "delete acct_5")

    def resume(value: Any) -> Any:
        return client.runs.wait(tid, "assistant", command={"resume": value})

    bad_args = {"type": "edit", "edited_action": {"name": "delete_account", "args": {"account": 5}}}
    status, detail = await refused(resume({"decisions": [bad_args]}))
    assert status == 422 and "do not validate" in detail
    renamed = {"type": "edit", "edited_action": {"name": "lookup", "args": {"q": "x"}}}
    assert await refused(resume({"decisions": [renamed]})) == (
        422,
        "an edit may change the arguments of 'delete_account', not call another tool ('lookup')",
    )
    status, detail = await refused(resume("yes"))
    assert status == 422 and "decisions" in detail
    status, detail = await refused(resume({"decisions": [{"type": "approve"}] * 2}))
    assert (status, detail) == (422, "2 decisions for 1 pending approval(s)")
    assert obj((await client.threads.get(tid))["values"])["__interrupt__"] == [interrupt]
    # The older agent-inbox answer still works.
    values = await resume([{"type": "accept", "args": None}])
    assert values["messages"][-1]["content"] == "finished: deleted acct_5 (approved by alice)"
    status, detail = await refused(resume({"decisions": [{"type": "approve"}]}))
    assert status == 409 and "no interrupt" in detail


async def test_plain_suspension_resumes_with_its_value(client: LangGraphClient) -> None:
    tid, interrupt = await interrupted(client, "ask")
    assert interrupt["value"] == {"question": "which color?"}
    run = await client.runs.create(tid, "assistant", command={"resume": "blue"})
    values = await client.runs.join(tid, run["run_id"])
    assert values["messages"][-1]["content"] == "you said blue"
    answer = values["messages"][-2]
    assert answer["type"] == "human" and answer["additional_kwargs"]["origin"] == {"kind": "user", "id": "alice"}
    assert (await client.runs.get(tid, run["run_id"]))["status"] == "success"


async def test_a_new_message_supersedes_the_interrupt(client: LangGraphClient) -> None:
    tid, _ = await interrupted(client, "delete acct_6")
    values = obj(await client.runs.wait(tid, "assistant", input=human("hello instead")))
    assert "__interrupt__" not in values and values["messages"][-1]["content"] == "Hello! How can I help?"
    superseded = [m for m in values["messages"] if m["type"] == "tool"]
    assert superseded and superseded[-1]["status"] == "error"


async def _post(url: str, path: str, body: dict[str, Any]) -> httpx.Response:
    """A request body sent exactly as given (the SDK drops ``input`` when it is empty; agent-chat-ui's does not)."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as raw:
        return await raw.post(path, json=body, headers={"x-api-key": ALICE})


async def test_an_empty_input_beside_a_command_is_no_input(
    client: LangGraphClient, sqlite_server: ServerThread
) -> None:
    for decision, expected in (
        ({"type": "approve"}, "finished: deleted acct_7 (approved by alice)"),
        ({"type": "reject", "message": "not that one"}, "finished: not that one (error)"),
        (
            {"type": "edit", "edited_action": {"name": "delete_account", "args": {"account_id": "acct_8"}}},
            "finished: deleted acct_8 (approved by alice)",
        ),
    ):
        tid, _ = await interrupted(client, "delete acct_7")
        body = {"assistant_id": "assistant", "input": {}, "command": {"resume": {"decisions": [decision]}}}
        answer = await _post(sqlite_server.url, f"/threads/{tid}/runs/wait", body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["messages"][-1]["content"] == expected
    tid, _ = await interrupted(client, "delete acct_9")
    both = {"assistant_id": "assistant", "input": human("also this"), "command": {"resume": "x"}}
    refused_both = await _post(sqlite_server.url, f"/threads/{tid}/runs/wait", both)
    assert refused_both.status_code == 422 and "not both" in refused_both.text


async def test_goto_end_ends_the_waiting_run(client: LangGraphClient, sqlite_server: ServerThread) -> None:
    tid, interrupt = await interrupted(client, "delete acct_10")
    body = {"assistant_id": "assistant", "input": {}, "command": {"goto": "__end__"}}
    answer = await _post(sqlite_server.url, f"/threads/{tid}/runs/wait", body)
    assert answer.status_code == 200, answer.text
    values = answer.json()
    assert "__interrupt__" not in values
    # The model did not run again: the last messages are its call and the call's error result.
    call, result = values["messages"][-2:]
    assert call["type"] == "ai" and call["tool_calls"][0]["id"] == interrupt["id"]
    assert result["type"] == "tool" and result["status"] == "error"
    thread = await client.threads.get(tid)
    assert thread["status"] == "idle" and thread["interrupts"] == {}
    [run, *_] = await client.runs.list(tid)
    assert run["status"] == "interrupted"
    again = await _post(sqlite_server.url, f"/threads/{tid}/runs/wait", body)
    assert again.status_code == 409 and "no interrupt" in again.text
    for goto in ("model", {"node": "tools"}):
        other = {"assistant_id": "assistant", "command": {"goto": goto}}
        wrong = await _post(sqlite_server.url, f"/threads/{tid}/runs/wait", other)
        assert wrong.status_code == 422 and "__end__" in wrong.text
    mixed = {"assistant_id": "assistant", "command": {"goto": "__end__", "resume": "x"}}
    assert (await _post(sqlite_server.url, f"/threads/{tid}/runs/wait", mixed)).status_code == 422
    # The thread goes on with the next message.
    values = obj(await client.runs.wait(tid, "assistant", input=human("hello after")))
    assert values["messages"][-1]["content"] == "Hello! How can I help?"


async def test_made_up_tool_results_ahead_of_a_message_are_dropped(client: LangGraphClient) -> None:
    tid, interrupt = await interrupted(client, "delete acct_11")
    made_up = {
        "type": "tool",
        "tool_call_id": interrupt["id"],
        "id": "do-not-render-1",
        "name": "delete_account",
        "content": "Successfully handled tool call.",
    }
    values = obj(await client.runs.wait(tid, "assistant", input={"messages": [made_up, human("hello")["messages"][0]]}))
    tools = [m for m in values["messages"] if m["type"] == "tool"]
    assert [t["content"] for t in tools] != ["Successfully handled tool call."]
    assert tools[-1]["status"] == "error"  # the superseded call's result, as the runtime wrote it
    status, detail = await refused(
        client.runs.wait(
            tid, "assistant", input={"messages": [{"type": "tool", "content": "x"}, human("hi")["messages"][0]]}
        )
    )
    assert status == 422 and "tool_call_id" in detail
