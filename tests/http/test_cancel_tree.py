"""``POST /threads/{id}/cancel?tree=true``: the kill switch over HTTP, with the keys and tenancy of every route."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from langgraph_sdk.client import LangGraphClient

from repertory import SqliteSessionStore
from tests.http.agents import gate
from tests.http.conftest import ALICE, BOB, ServerThread, human


async def _turns(path: Path, session_id: str) -> dict[str, list[str]]:
    """The status of each turn of a session and of its children, by session id."""
    async with await SqliteSessionStore.open(path) as store:
        ids = [session_id, *(c.session_id for c in await store.list_children(session_id))]
        return {sid: [t.status for t in await store.list_turns(sid)] for sid in ids}


async def _child_running(path: Path, session_id: str) -> None:
    """Wait until the thread's delegated child runs its turn (spawned by the model: no stream to await)."""
    async with asyncio.timeout(10):
        while True:
            statuses = await _turns(path, session_id)
            if len(statuses) == 2 and all(s == ["running"] for s in statuses.values()):
                return
            await asyncio.sleep(0.02)


async def test_cancel_with_tree_stops_the_thread_and_its_delegated_child(
    client: LangGraphClient, sqlite_server: ServerThread
) -> None:
    path = Path(sqlite_server.store.removeprefix("sqlite:///"))
    thread = await client.threads.create(graph_id="lead")
    tid = thread["thread_id"]
    name = f"cancel-tree-{tid}"
    await client.runs.create(tid, "lead", input=human(f"block {name}"))
    await _child_running(path, tid)
    url = f"{sqlite_server.url}/threads/{tid}/cancel"

    async with httpx.AsyncClient(timeout=30) as http:
        assert (await http.post(url, params={"tree": "true"})).status_code == 401
        refused = await http.post(url, params={"tree": "true"}, headers={"x-api-key": BOB})
        assert refused.status_code == 404  # another owner's thread is one that does not exist
        assert all(s == ["running"] for s in (await _turns(path, tid)).values())  # refused: nothing stopped
        done = await http.post(url, params={"tree": "true"}, headers={"x-api-key": ALICE})
        assert done.status_code == 204, done.text

        statuses = await _turns(path, tid)
        assert len(statuses) == 2 and all(s == ["cancelled"] for s in statuses.values()), statuses
        gate(name).set()  # a drive that survived the cancel would now reply
        [run] = await client.runs.list(tid)
        assert run["status"] == "interrupted"
        again = await http.post(url, headers={"x-api-key": ALICE})  # nothing left: a plain cancel is a no-op
        assert again.status_code == 204
        assert await _turns(path, tid) == statuses
        missing = await http.post(f"{sqlite_server.url}/threads/no-such-thread/cancel", headers={"x-api-key": ALICE})
        assert missing.status_code == 404
