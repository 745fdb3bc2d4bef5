"""The tasks extension with the official client over HTTP and stdio: a task per call, polled, answered, cancelled.

The client declares ``io.modelcontextprotocol/tasks`` through a ``ClientExtension``
(``tasks_client.Tasks``); the server answers every call of such a client with a task whose id is
the turn's submission id. Also: the checks every task method makes (era, extension, ``Mcp-Name``,
owner), and status notifications on a ``subscriptions/listen`` stream read as raw SSE (the
official client's ``listen`` knows no ``taskIds``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as t
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.http.agents import DELETED, gate
from tests.http.conftest import ALICE, BOB, ServerThread
from tests.http.mcp_server import tasks_client as tc
from tests.http.mcp_server.conftest import connect

ROOT = Path(__file__).resolve().parents[3]
AGENTS = "tests.http.agents:make_agents"
MODERN = "2026-07-28"
_DECLARED = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {tc.TASKS: {}}},
}


async def test_a_declared_call_is_a_task_polled_to_its_result(sqlite_server: ServerThread) -> None:
    async with connect(sqlite_server.url, ALICE, extensions=[tc.Tasks()]) as client:
        assert tc.TASKS in (client.server_capabilities.extensions or {})
        created = await tc.start(client, "assistant", {"task": "research tides"})
        assert created.status == "working" and created.ttl_ms is None and created.poll_interval_ms == 1000
        assert "result" not in (created.model_extra or {})
        first = await tc.get(client.session, created.task_id)  # durable before the answer: resolves at once
        assert first.task_id == created.task_id and first.created_at == created.created_at
        done = await tc.until(client.session, created.task_id, "completed")
        assert done.result is not None and done.result["content"] == [{"type": "text", "text": "research done"}]
        session_id = done.result["structuredContent"]["session_id"]
        assert done.result["structuredContent"] == {"session_id": session_id, "text": "research done"}
        # The client's own call_tool claims the task and polls it to the same kind of result.
        again = await client.call_tool("assistant", {"task": "hello again", "session_id": session_id})
        assert not again.is_error and again.structured_content == {
            "session_id": session_id,
            "text": "Hello! How can I help?",
        }
        # A finished turn's task is still there (a task lives as long as its session).
        assert (await tc.get(client.session, created.task_id)).status == "completed"


async def test_a_failed_turn_is_a_completed_task_with_an_error_result(sqlite_server: ServerThread) -> None:
    async with connect(sqlite_server.url, ALICE, extensions=[tc.Tasks()]) as client:
        created = await tc.start(client, "assistant", {"task": "fail now"})
        done = await tc.until(client.session, created.task_id, "completed")
    assert done.result is not None and done.result["isError"] is True
    assert "the model is down" in done.result["content"][0]["text"]
    assert done.error is None


async def test_input_required_is_answered_once_through_tasks_update(sqlite_server: ServerThread) -> None:
    async with connect(sqlite_server.url, ALICE, extensions=[tc.Tasks()]) as client:
        created = await tc.start(client, "assistant", {"task": "delete mcp-task-approve"})
        waiting = await tc.until(client.session, created.task_id, "input_required")
        assert waiting.input_requests is not None and len(waiting.input_requests) == 1
        key, request = next(iter(waiting.input_requests.items()))
        assert key.startswith("approval-") and request["method"] == "elicitation/create"
        assert "delete_account" in request["params"]["message"]
        assert request["params"]["requestedSchema"]["properties"]["decision"]["enum"] == ["approve", "reject", "edit"]
        approve = t.ElicitResult(action="accept", content={"decision": "approve"})
        ack = await tc.update(client.session, created.task_id, {key: approve})
        assert ack.model_extra == {"resultType": "complete"}  # an empty ack
        with pytest.raises(MCPError) as second:
            await tc.update(client.session, created.task_id, {key: approve})
        assert second.value.error.code == t.INVALID_PARAMS and second.value.error.message == "already answered"
        done = await tc.until(client.session, created.task_id, "completed")
        assert done.result is not None
        assert done.result["structuredContent"]["text"] == "finished: deleted mcp-task-approve (approved by alice)"
        with pytest.raises(MCPError) as late:  # the turn has ended: nothing is live to answer
            await tc.update(client.session, created.task_id, {key: approve})
        assert late.value.error.message == "already answered"
    assert DELETED["mcp-task-approve"] == 1


async def test_a_delegated_childs_approval_is_the_tasks_input_and_answered_in_the_child(
    sqlite_server: ServerThread,
) -> None:
    async with connect(sqlite_server.url, ALICE, extensions=[tc.Tasks()]) as client:
        created = await tc.start(client, "lead", {"task": "delete mcp-task-nested"})
        waiting = await tc.until(client.session, created.task_id, "input_required")
        assert waiting.input_requests is not None
        [(key, request)] = waiting.input_requests.items()
        assert '"account_id": "mcp-task-nested"' in request["params"]["message"]
        await tc.update(
            client.session, created.task_id, {key: t.ElicitResult(action="accept", content={"decision": "approve"})}
        )
        done = await tc.until(client.session, created.task_id, "completed")
        assert done.result is not None
        assert done.result["structuredContent"]["text"] == "lead: finished: deleted mcp-task-nested (approved by alice)"
    assert DELETED["mcp-task-nested"] == 1


async def test_a_suspend_is_answered_through_tasks_update(sqlite_server: ServerThread) -> None:
    async with connect(sqlite_server.url, ALICE, extensions=[tc.Tasks()]) as client:
        created = await tc.start(client, "assistant", {"task": "ask me"})
        waiting = await tc.until(client.session, created.task_id, "input_required")
        assert waiting.input_requests is not None
        [(key, request)] = waiting.input_requests.items()
        assert key.startswith("suspend-") and "which color?" in request["params"]["message"]
        await tc.update(
            client.session, created.task_id, {key: t.ElicitResult(action="accept", content={"value": "teal"})}
        )
        done = await tc.until(client.session, created.task_id, "completed")
    assert done.result is not None and done.result["structuredContent"]["text"] == "you said teal"


async def test_cancel_ends_a_running_task_and_acks_a_finished_one(sqlite_server: ServerThread) -> None:
    name = "mcp-task-cancel"
    try:
        async with connect(sqlite_server.url, ALICE, extensions=[tc.Tasks()]) as client:
            created = await tc.start(client, "assistant", {"task": f"block {name}"})
            assert (await tc.get(client.session, created.task_id)).status == "working"
            ack = await tc.cancel(client.session, created.task_id)
            assert ack.model_extra == {"resultType": "complete"}  # no task fields
            cancelled = await tc.until(client.session, created.task_id, "cancelled")
            assert cancelled.result is None and cancelled.status_message == "the turn was cancelled"
            await tc.cancel(client.session, created.task_id)  # idempotent on a terminal task
            assert (await tc.get(client.session, created.task_id)).status == "cancelled"
    finally:
        gate(name).set()


async def test_another_owners_task_is_not_found_and_unknown_ids_alike(sqlite_server: ServerThread) -> None:
    async with connect(sqlite_server.url, ALICE, extensions=[tc.Tasks()]) as alice:
        created = await tc.start(alice, "assistant", {"task": "hello there"})
        await tc.until(alice.session, created.task_id, "completed")
        async with connect(sqlite_server.url, BOB, extensions=[tc.Tasks()]) as bob:
            for call in (tc.get, tc.cancel):
                for task_id in (created.task_id, "no-such-task"):
                    with pytest.raises(MCPError) as refused:
                        await call(bob.session, task_id)
                    assert refused.value.error.code == t.INVALID_PARAMS
                    assert refused.value.error.message == "Task not found"
            with pytest.raises(MCPError) as foreign_update:
                await tc.update(bob.session, created.task_id, {})
            assert foreign_update.value.error.message == "Task not found"


async def test_no_task_without_the_extension_and_the_task_methods_refuse(sqlite_server: ServerThread) -> None:
    async with connect(sqlite_server.url, ALICE) as plain:  # a 2026-07-28 client that declares nothing
        result = await plain.call_tool("assistant", {"task": "hello there"})
        assert not result.is_error and result.structured_content is not None  # answered, not a task
        with pytest.raises(MCPError) as undeclared:
            await tc.get(plain.session, "anything")
        assert undeclared.value.error.code == t.MISSING_REQUIRED_CLIENT_CAPABILITY
    async with connect(sqlite_server.url, ALICE, mode="legacy") as legacy:  # 2025-11-25: no tasks at all
        result = await legacy.call_tool("assistant", {"task": "hello there"})
        assert not result.is_error and result.structured_content is not None
    async with connect(sqlite_server.url, ALICE, extensions=[tc.Tasks()]) as client:
        for removed in ("tasks/result", "tasks/list"):  # the first draft's methods are gone
            with pytest.raises(MCPError) as gone:
                await client.session.send_request(
                    tc.GetTaskRequest.model_validate({"method": "tasks/get", "params": {"taskId": "x"}}).model_copy(
                        update={"method": removed}
                    ),
                    tc.Ack,
                )
            assert gone.value.error.code == t.METHOD_NOT_FOUND


def _headers(key: str, method: str, name: str | None) -> dict[str, str]:
    headers = {
        "x-api-key": key,
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN,
        "mcp-method": method,
    }
    if name is not None:
        headers["mcp-name"] = name
    return headers


def _body(method: str, params: dict[str, Any], request_id: int | str = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": _DECLARED}}


async def test_the_mcp_name_header_must_name_the_task(sqlite_server: ServerThread) -> None:
    async with connect(sqlite_server.url, ALICE, extensions=[tc.Tasks()]) as client:
        created = await tc.start(client, "assistant", {"task": "hello there"})
    task_id = created.task_id
    async with httpx.AsyncClient(base_url=sqlite_server.url, timeout=30) as raw:
        body = _body("tasks/get", {"taskId": task_id})
        ok = await raw.post("/mcp", json=body, headers=_headers(ALICE, "tasks/get", task_id))
        assert ok.status_code == 200 and ok.json()["result"]["taskId"] == task_id
        for name in ("another-task", None):
            wrong = await raw.post("/mcp", json=body, headers=_headers(ALICE, "tasks/get", name))
            assert wrong.status_code == 400 and wrong.json()["error"]["code"] == t.HEADER_MISMATCH


async def _listen(url: str, key: str, task_ids: list[str]) -> AsyncIterator[dict[str, Any]]:
    """The JSON-RPC messages of one ``subscriptions/listen`` stream for ``task_ids``, as they arrive."""
    body = _body("subscriptions/listen", {"notifications": {"taskIds": task_ids}}, request_id="listen-1")
    async with (
        httpx.AsyncClient(base_url=url, timeout=60) as raw,
        raw.stream("POST", "/mcp", json=body, headers=_headers(key, "subscriptions/listen", None)) as response,
    ):
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                yield json.loads(line.removeprefix("data:").strip())


async def test_status_notifications_follow_a_task_to_its_end(sqlite_server: ServerThread) -> None:
    name = "mcp-task-notify"
    try:
        async with connect(sqlite_server.url, ALICE, extensions=[tc.Tasks()]) as client:
            created = await tc.start(client, "assistant", {"task": f"block {name}"})
            async with connect(sqlite_server.url, BOB, extensions=[tc.Tasks()]) as bob:
                foreign = await tc.start(bob, "assistant", {"task": "hello there"})
        seen: list[dict[str, Any]] = []
        with anyio.fail_after(60):
            async for message in _listen(sqlite_server.url, ALICE, [created.task_id, foreign.task_id, "unknown"]):
                seen.append(message)
                if message.get("method") == "notifications/tasks" and message["params"]["status"] == "working":
                    gate(name).set()  # the stream is following the task: let the turn finish
                if "result" in message or "error" in message:
                    break
    finally:
        gate(name).set()
    ack, *notes, end = seen
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["notifications"] == {
        "taskIds": [created.task_id]
    }  # bob's task and the unknown id: not honoured
    assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen-1"
    assert [n["method"] for n in notes] == ["notifications/tasks"] * len(notes)
    assert [n["params"]["status"] for n in notes] == ["working", "completed"]
    assert {n["params"]["taskId"] for n in notes} == {created.task_id}
    assert notes[-1]["params"]["result"]["structuredContent"]["text"] == f"unblocked {name}"
    assert all(n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen-1" for n in notes)
    assert end["id"] == "listen-1" and "result" in end  # every task ended: the stream closes gracefully


async def test_tasks_over_stdio_with_an_approval(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "repertory", "mcp", "--store", f"sqlite:///{tmp_path / 'stdio.db'}", "--agents", AGENTS],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )
    async with Client(params, extensions=[tc.Tasks()]) as client:
        assert client.protocol_version == MODERN and tc.TASKS in (client.server_capabilities.extensions or {})
        created = await tc.start(client, "assistant", {"task": "delete mcp-stdio-task"})
        waiting = await tc.until(client.session, created.task_id, "input_required")
        assert waiting.input_requests is not None
        [key] = waiting.input_requests
        reject = t.ElicitResult(action="accept", content={"decision": "reject", "reason": "not today"})
        await tc.update(client.session, created.task_id, {key: reject})
        with pytest.raises(MCPError) as second:
            await tc.update(client.session, created.task_id, {key: reject})
        assert second.value.error.message == "already answered"
        done = await tc.until(client.session, created.task_id, "completed")
    assert done.result is not None
    assert done.result["structuredContent"]["text"] == "finished: not today (error)"
