"""Thread search and count read only the caller's sessions, through the store's index by owner (issue 39, finding 8).

Before: ``/threads/search`` and ``/threads/count`` listed every session of every tenant and kept
the caller's, so another tenant's 3,000 threads took one tenant's search from 3 to 32 ms. Here the
statements a tenant's searches send to SQLite are recorded: none reads the whole sessions table,
and none names one of the other tenant's sessions, whatever the filters (``values`` loads state).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from repertory import Principal, Runtime
from repertory.http.auth import Caller
from repertory.http.gateway import Gateway
from repertory.storage import SqliteSessionStore
from tests.http.agents import make_agents

ALICE = Caller(Principal.user("alice"), "alice", owner="alice")
ADMIN = Caller(Principal.user("root"), "root", owner="root", admin=True)


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    runtime = await Runtime.start(store=f"sqlite:///{tmp_path / 'search.db'}", agents=make_agents())
    try:
        yield Gateway(runtime)
    finally:
        await runtime.close()


async def test_a_tenants_search_never_reads_another_tenants_sessions(gateway: Gateway) -> None:
    rt = gateway.runtime
    bobs = [(await rt.create_session("assistant", owner="bob", metadata={"n": i})).id for i in range(30)]
    alices = [(await rt.create_session("assistant", owner="alice", metadata={"n": i})).id for i in range(3)]
    store = gateway.store
    assert isinstance(store, SqliteSessionStore)
    await store.page_sessions(owner="alice")  # opens the reader connection listings run on
    sent: list[str] = []
    for conn in store.connections:
        conn.set_trace_callback(sent.append)
    try:
        found = await gateway.search(
            ALICE,
            metadata=None,
            values={"messages": []},
            ids=None,
            status="idle",
            sort_by="updated_at",
            descending=True,
            offset=0,
            limit=10,
        )
        counted = await gateway.count(ALICE, metadata={"n": 1}, values=None, status=None)
        by_id = await gateway.search(
            ALICE,
            metadata=None,
            values=None,
            ids=[bobs[0], alices[0]],
            status=None,
            sort_by="created_at",
            descending=False,
            offset=0,
            limit=10,
        )
    finally:
        for conn in store.connections:
            conn.set_trace_callback(None)
    assert sorted(t["thread_id"] for t in found) == sorted(alices)
    assert counted == 1
    assert [t["thread_id"] for t in by_id] == [alices[0]]
    whole_table = [q for q in sent if " FROM sessions" in q and "WHERE" not in q.partition(" FROM sessions")[2][:40]]
    assert whole_table == [], whole_table
    # The one id of bob's that alice named is looked up by key (and refused); no other is ever read.
    assert [q for q in sent if any(b in q for b in bobs[1:])] == []


async def test_an_admin_still_searches_every_tenant(gateway: Gateway) -> None:
    rt = gateway.runtime
    ids = {(await rt.create_session("assistant", owner=o)).id for o in ("alice", "bob", None)}
    found = await gateway.search(
        ADMIN,
        metadata=None,
        values=None,
        ids=None,
        status=None,
        sort_by="created_at",
        descending=True,
        offset=0,
        limit=10,
    )
    assert {t["thread_id"] for t in found} == ids
    assert await gateway.count(ADMIN, metadata=None, values=None, status=None) == 3
    assert await gateway.count(ALICE, metadata=None, values=None, status=None) == 1


async def test_a_tenant_with_more_sessions_than_a_page_gets_them_all(gateway: Gateway) -> None:
    rt = gateway.runtime
    made = [(await rt.create_session("assistant", owner="alice")).id for _ in range(1_005)]
    assert await gateway.count(ALICE, metadata=None, values=None, status=None) == 1_005
    oldest = await gateway.search(
        ALICE,
        metadata=None,
        values=None,
        ids=None,
        status=None,
        sort_by="thread_id",
        descending=False,
        offset=0,
        limit=2,
    )
    assert [t["thread_id"] for t in oldest] == sorted(made)[:2]
