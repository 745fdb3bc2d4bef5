"""Resources (the caller's sessions), keys and tenancy on /mcp, with the official client and raw HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import httpx
import mcp_types as t
import pytest
from mcp.shared.exceptions import MCPError

from tests.http.agents import gate
from tests.http.conftest import ADMIN, ADMINS, ALICE, BOB, KEYS, ServerThread, sse_events
from tests.http.mcp_server.conftest import connect

_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/list",
    "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    },
}
_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/list",
}


async def _session(url: str, key: str, agent: str = "second", task: str = "hi") -> str:
    async with connect(url, key) as client:
        result = await client.call_tool(agent, {"task": task})
    assert result.structured_content is not None
    session_id: str = result.structured_content["session_id"]
    return session_id


async def test_resources_list_read_and_templates(sqlite_server: ServerThread) -> None:
    session_id = await _session(sqlite_server.url, ALICE, "assistant", "hello resources")
    bobs = await _session(sqlite_server.url, BOB)
    uri = f"repertory://sessions/{session_id}"
    async with connect(sqlite_server.url, ALICE) as client:
        listed = await client.list_resources()
        uris = [r.uri for r in listed.resources]
        read = await client.read_resource(uri)
        templates = await client.list_resource_templates()
    assert uri in uris and f"repertory://sessions/{bobs}" not in uris
    text, meta = read.contents
    assert isinstance(text, t.TextResourceContents) and isinstance(meta, t.TextResourceContents)
    assert text.mime_type == "text/plain" and meta.mime_type == "application/json"
    assert text.text == "user: hello resources\nassistant: Hello! How can I help?\n"
    metadata = json.loads(meta.text)
    assert metadata["session_id"] == session_id and metadata["agent"] == "assistant"
    assert metadata["resource"] == uri and metadata["status"] == "idle" and metadata["messages"] == 2
    assert [x.uri_template for x in templates.resource_templates] == [
        "repertory://sessions/{session_id}",
        "repertory://sessions/{session_id}/turns/{submission_id}",
    ]


async def test_a_turn_reads_as_a_resource(sqlite_server: ServerThread) -> None:
    async with connect(sqlite_server.url, ALICE) as client:
        made = await client.call_tool("second", {"task": "turn as resource"})
        assert made.structured_content is not None
        session_id = made.structured_content["session_id"]
        read = await client.read_resource(f"repertory://sessions/{session_id}")
        meta = read.contents[1]
        assert isinstance(meta, t.TextResourceContents)
        [turn] = json.loads(meta.text)["turns"]
        assert turn["status"] == "done"
        assert turn["resource"] == f"repertory://sessions/{session_id}/turns/{turn['submission_id']}"
        body = (await client.read_resource(turn["resource"])).contents[0]
        with pytest.raises(MCPError) as missing:
            await client.read_resource(f"repertory://sessions/{session_id}/turns/no-such-turn")
    assert isinstance(body, t.TextResourceContents) and body.mime_type == "application/json"
    got = json.loads(body.text)
    assert (got["status"], got["message"], got["reply"]) == ("done", "turn as resource", "second here")
    assert missing.value.message == "Resource not found"


async def test_another_owners_session_is_not_found(sqlite_server: ServerThread) -> None:
    alices = await _session(sqlite_server.url, ALICE)
    uri = f"repertory://sessions/{alices}"
    async with connect(sqlite_server.url, BOB) as bob:
        with pytest.raises(MCPError) as foreign:
            await bob.read_resource(uri)
        with pytest.raises(MCPError) as unknown:
            await bob.read_resource("repertory://sessions/nobody-has-this")
        with pytest.raises(MCPError) as nonsense:
            await bob.read_resource("https://example.com/x")
    for error in (foreign, unknown, nonsense):
        assert error.value.code == -32602 and error.value.message == "Resource not found"
    assert foreign.value.data == {"uri": uri}
    async with connect(sqlite_server.url, ADMIN) as admin:  # an admin key sees every owner's sessions
        read = await admin.read_resource(uri)
    assert read.contents


async def test_a_key_is_required_and_checked(sqlite_server: ServerThread) -> None:
    async with httpx.AsyncClient(base_url=sqlite_server.url) as http:
        missing = await http.post("/mcp", json=_INIT, headers=_HEADERS)
        wrong = await http.post("/mcp", json=_INIT, headers={**_HEADERS, "authorization": "Bearer not-a-key-at-all"})
        bearer = await http.post("/mcp", json=_INIT, headers={**_HEADERS, "authorization": f"Bearer {ALICE}"})
        api_key = await http.post("/mcp", json=_INIT, headers={**_HEADERS, "x-api-key": ALICE})
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert wrong.status_code == 403
    assert bearer.status_code == 200 and api_key.status_code == 200
    with pytest.RaisesGroup(pytest.RaisesGroup(MCPError)):  # the official client cannot even connect
        async with connect(sqlite_server.url, None) as client:
            await client.list_tools()


async def test_dns_rebinding_is_refused_on_loopback(sqlite_server: ServerThread) -> None:
    async with httpx.AsyncClient(base_url=sqlite_server.url) as http:
        rebound = await http.post("/mcp", json=_INIT, headers={**_HEADERS, "x-api-key": ALICE, "host": "evil.example"})
        origin = await http.post(
            "/mcp", json=_INIT, headers={**_HEADERS, "x-api-key": ALICE, "origin": "http://evil.example"}
        )
        local = await http.post(
            "/mcp", json=_INIT, headers={**_HEADERS, "x-api-key": ALICE, "origin": "http://localhost:3000"}
        )
    assert rebound.status_code == 421 and origin.status_code == 403 and local.status_code == 200


async def test_json_guard_and_body_bound_apply(sqlite_server: ServerThread) -> None:
    deep: object = "x"
    for _ in range(200):
        deep = [deep]
    async with httpx.AsyncClient(base_url=sqlite_server.url, headers={**_HEADERS, "x-api-key": ALICE}) as http:
        too_deep = await http.post("/mcp", content=json.dumps({**_INIT, "params": {"deep": deep}}))
        too_big = await http.post("/mcp", content=b'{"x": "' + b"a" * (70 * 1024) + b'"}')
    assert too_deep.status_code == 422 and too_big.status_code == 413


@pytest.fixture(scope="module")
def two_streams() -> Iterator[ServerThread]:
    """A memory-store server whose keys hold at most two streams each."""
    server = ServerThread("memory://", api_keys=KEYS, admin_keys=ADMINS, max_streams_per_key=2).start()
    yield server
    server.stop()


async def test_each_request_holds_one_of_its_keys_stream_slots(two_streams: ServerThread) -> None:
    async with httpx.AsyncClient(base_url=two_streams.url, headers={"x-api-key": BOB}) as rest:
        made = [(await rest.post("/threads", json={"metadata": {"graph_id": "assistant"}})).json() for _ in "ab"]
        ids = [thread["thread_id"] for thread in made]
        async with asyncio.TaskGroup() as calls:
            running = [
                calls.create_task(_call(two_streams.url, BOB, {"task": f"block mcp-slot-{i}", "session_id": i}))
                for i in ids
            ]
            for i in ids:  # each call is in flight once its turn has started (read with the admin's own slots)
                await sse_events(two_streams.url, f"/threads/{i}/events", ADMIN, "turn.started")
            one_more = await rest.post("/mcp", json=_INIT, headers=_HEADERS)
            other_key = await rest.post("/mcp", json=_INIT, headers={**_HEADERS, "x-api-key": ALICE})
            for i in ids:
                gate(f"mcp-slot-{i}").set()
        after = await rest.post("/mcp", json=_INIT, headers=_HEADERS)
    assert one_more.status_code == 429
    assert other_key.status_code == 200 and after.status_code == 200
    assert [task.result() for task in running] == [f"unblocked mcp-slot-{i}" for i in ids]


async def _call(url: str, key: str, arguments: dict[str, str]) -> str:
    async with connect(url, key) as client:
        result = await client.call_tool("assistant", arguments)
    assert result.structured_content is not None
    text: str = result.structured_content["text"]
    return text
