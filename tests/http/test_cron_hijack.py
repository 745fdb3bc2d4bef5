"""Another tenant cannot catch a stateless cron's firings by creating its thread id first.

Issue 39 (finding 4): ``POST /threads`` let bob create ``cron-<alice's cron>-<fire ms>``, and the
firing sent alice's message into bob's thread, where bob read it and its reply. Both ends are shut:
the server's id prefixes are refused at ``POST /threads`` (422 naming ``thread_id``), and a thread
made under the id some other way (here straight into the store, as a bug elsewhere might) is
not the firing's, so the firing is refused there and alice's next one runs in a thread of hers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client

from repertory import SqliteSessionStore
from repertory.core.timing import firing_submission_id
from repertory.core.tree import SessionRecord
from repertory.testing import ManualClock
from tests.http.conftest import ALICE, BOB, KEYS, ServerThread, human, obj, refused
from tests.runtime.time.helpers import until

START = int(datetime(2026, 1, 1, 8, 59, tzinfo=UTC).timestamp() * 1000)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def server(tmp_path: Path, clock: ManualClock) -> Iterator[ServerThread]:
    path = tmp_path / "hijack.db"
    thread = ServerThread(f"sqlite:///{path}", runtime_options={"clock": clock, "poll_interval": 3600}, api_keys=KEYS)
    yield thread.start()
    thread.stop()


async def _thread_ready(url: str, key: str, thread_id: str) -> dict[str, object]:
    """``thread_id``'s one run once it rests (polled: the server is another thread)."""
    async with get_client(url=url, api_key=key) as c, asyncio.timeout(10):
        while True:
            try:
                runs = [obj(r) for r in await c.runs.list(thread_id)]
            except httpx.HTTPStatusError:
                runs = []  # the firing's thread is not there yet
            if runs and runs[0]["status"] in ("success", "error"):
                return runs[0]
            await asyncio.sleep(0.01)


async def test_a_tenant_cannot_create_a_thread_under_a_server_made_id(server: ServerThread) -> None:
    async with get_client(url=server.url, api_key=BOB) as bob:
        for tid in ("cron-01J0000000000000000000000-1767258000000", "cron-anything"):
            status, detail = await refused(bob.threads.create(thread_id=tid))
            assert status == 422 and "thread_id" in detail and "cron-" in detail, detail
        assert (await bob.threads.create(thread_id="my-cron-notes"))["thread_id"] == "my-cron-notes"


async def test_a_thread_made_under_a_firing_id_by_another_tenant_never_gets_the_firing(
    server: ServerThread, clock: ManualClock, tmp_path: Path
) -> None:
    async with get_client(url=server.url, api_key=ALICE) as alice:
        cron = obj(await alice.crons.create("assistant", schedule="0 * * * *", input=human("alice's secret")))
    first_at = int(datetime.fromisoformat(cron["next_run_date"]).timestamp() * 1000)
    trap = firing_submission_id(cron["cron_id"], first_at)
    async with await SqliteSessionStore.open(tmp_path / "hijack.db") as store:  # past the HTTP check
        await store.create_session(SessionRecord(session_id=trap, agent="assistant", root_id=trap, owner="bob",
                                                 metadata={"schedule_id": cron["cron_id"]}))  # fmt: skip
    server.call_soon(clock.set, first_at)
    async with get_client(url=server.url, api_key=ALICE) as alice:

        async def moved_on() -> bool:  # the firing is passed once the cron points at the next one
            return bool((await alice.crons.search())[0]["next_run_date"] != cron["next_run_date"])

        await until(moved_on, 10)
    second_at = first_at + 3600_000
    server.call_soon(clock.set, second_at)
    run = await _thread_ready(server.url, ALICE, firing_submission_id(cron["cron_id"], second_at))
    assert run["status"] == "success"
    async with get_client(url=server.url, api_key=BOB) as bob:
        assert await bob.runs.list(trap) == []  # bob's thread never received alice's firing
        state = await bob.threads.get_state(trap)
        assert obj(state["values"]).get("messages", []) == []
