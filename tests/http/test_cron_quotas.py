"""Crons are bounded per tenant: how often one fires, and how many one owner keeps.

Issue 39 (finding 7): ``* * * * * *`` was accepted, 86,400 threads and webhooks a day per cron,
with no bound on how many crons a tenant made. Now two firings of one cron are at least
``ServerLimits.min_cron_interval_s`` apart (60 s by default; 422 naming ``schedule``, on create and
on update), and an owner keeps at most ``max_crons_per_owner`` (422 past it, each owner counted
alone, creations at once never passing it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from repertory.http.crons import shortest_interval_ms
from repertory.http.limits import ServerLimits
from tests.http.conftest import ALICE, BOB, KEYS, ServerThread, human, obj, refused

JAN_1 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


@pytest.fixture(scope="module")
def default_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    path: Path = tmp_path_factory.mktemp("quotas") / "default.db"
    server = ServerThread(f"sqlite:///{path}", api_keys=KEYS).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def tight_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    path: Path = tmp_path_factory.mktemp("quotas") / "tight.db"
    limits = ServerLimits(max_crons_per_owner=3, min_cron_interval_s=3600)
    server = ServerThread(f"sqlite:///{path}", api_keys=KEYS, limits=limits).start()
    yield server
    server.stop()


@pytest.fixture
async def alice(default_server: ServerThread) -> AsyncIterator[LangGraphClient]:
    async with get_client(url=default_server.url, api_key=ALICE) as c:
        yield c


@pytest.mark.parametrize(
    ("cron", "gap_s"),
    [("* * * * * *", 1), ("*/30 * * * * *", 30), ("0,59 * * * * *", 1), ("0 * * * * *", 60), ("* * * * *", 60),
     ("0,1 9 * * *", 60), ("0 0,12 * * *", 43_200), ("0 0 1 1 *", 365 * 86_400)],
)  # fmt: skip
def test_the_shortest_interval_of_an_expression(cron: str, gap_s: int) -> None:
    assert shortest_interval_ms(cron, "UTC", JAN_1) == gap_s * 1000


@pytest.mark.parametrize("cron", ["* * * * * *", "*/30 * * * * *", "0,59 * * * * *", "*/5 * * * * *"])
async def test_a_cron_firing_more_often_than_a_minute_is_refused(alice: LangGraphClient, cron: str) -> None:
    status, detail = await refused(alice.crons.create("assistant", schedule=cron, input=human("tick")))
    assert status == 422 and detail.startswith(f"schedule {cron!r}") and "60 s" in detail, detail
    assert await alice.crons.count() == 0


async def test_a_cron_cannot_be_updated_to_fire_more_often(alice: LangGraphClient) -> None:
    cron = obj(await alice.crons.create("assistant", schedule="0 * * * * *", input=human("tick")))  # 60 s: allowed
    try:
        status, detail = await refused(alice.crons.update(cron["cron_id"], schedule="*/2 * * * * *"))
        assert status == 422 and detail.startswith("schedule"), detail
        (kept,) = await alice.crons.search()
        assert kept["schedule"] == "0 * * * * *"
    finally:
        await alice.crons.delete(cron["cron_id"])


async def test_an_owner_keeps_at_most_its_quota_of_crons(tight_server: ServerThread) -> None:
    async with get_client(url=tight_server.url, api_key=ALICE) as a, get_client(url=tight_server.url, api_key=BOB) as b:
        status, detail = await refused(a.crons.create("assistant", schedule="*/30 * * * *", input=human("x")))
        assert status == 422 and "3600 s" in detail  # this server's own minimum
        thread = await a.threads.create(metadata={"graph_id": "assistant"})
        made = [obj(await a.crons.create_for_thread(thread["thread_id"], "assistant", schedule="0 * * * *",
                                                    input=human("on a thread")))]  # fmt: skip
        results = await asyncio.gather(
            *(a.crons.create("assistant", schedule="0 9 * * *", input=human(f"{i}")) for i in range(4)),
            return_exceptions=True,
        )
        made += [obj(r) for r in results if not isinstance(r, BaseException)]
        assert len(made) == 3  # creations at once never pass the bound
        status, detail = await refused(a.crons.create("assistant", schedule="0 9 * * *", input=human("one more")))
        assert status == 422 and "'alice' keeps 3 crons" in detail and "max_crons_per_owner=3" in detail, detail
        assert await a.crons.count() == 3
        bob_cron = obj(await b.crons.create("assistant", schedule="0 9 * * *", input=human("bob's")))  # bob's own
        await a.crons.delete(made[0]["cron_id"])
        again = obj(await a.crons.create("assistant", schedule="0 9 * * *", input=human("room again")))
        for cron in [*made[1:], again]:
            await a.crons.delete(cron["cron_id"])
        await b.crons.delete(bob_cron["cron_id"])
