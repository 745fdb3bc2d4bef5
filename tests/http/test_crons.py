"""LangGraph's cron routes through ``langgraph-sdk``'s own ``crons`` client, and completion webhooks.

The cron server runs on a ``ManualClock`` (moved on the server's loop), so a firing happens when the
test says and nothing waits a minute. Webhooks go to a loopback receiver in the test: delivered once
with a valid signature, retried after 5xx answers, never sent twice (however often the run is
waited for, and not again by a restarted server).
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from repertory import SqliteSessionStore
from repertory.http.webhooks import WebhookSettings, signature
from repertory.testing import ManualClock
from tests.http.conftest import ALICE, BOB, KEYS, ServerThread, human, obj, refused
from tests.http.receiver import Receiver
from tests.runtime.time.helpers import until

START = int(datetime(2026, 1, 1, 8, 59, tzinfo=UTC).timestamp() * 1000)
SECRET = "webhook-secret-for-tests"
LOOPBACK = ("127.0.0.1",)  # the receiver's host: allowed explicitly, as --allow-webhook-host 127.0.0.1 does


@pytest.fixture(scope="module")
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture(scope="module")
def cron_server(tmp_path_factory: pytest.TempPathFactory, clock: ManualClock) -> Iterator[ServerThread]:
    path: Path = tmp_path_factory.mktemp("crons") / "crons.db"
    settings = WebhookSettings(secret=SECRET, base_delay=0.01, max_attempts=3, poll=0.05, allow_hosts=LOOPBACK)
    server = ServerThread(
        f"sqlite:///{path}", runtime_options={"clock": clock, "poll_interval": 3600}, api_keys=KEYS, webhooks=settings
    ).start()
    yield server
    server.stop()


@pytest.fixture
async def alice(cron_server: ServerThread) -> AsyncIterator[LangGraphClient]:
    async with get_client(url=cron_server.url, api_key=ALICE) as c:
        yield c


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = await Receiver().start()
    yield r
    await r.close()


async def _runs(client: LangGraphClient, thread_id: str, count: int) -> list[dict[str, Any]]:
    """The thread's runs once ``count`` of them are at rest (polled over HTTP: the server is another thread)."""
    async with asyncio.timeout(10):
        while True:
            runs = [obj(r) for r in await client.runs.list(thread_id)]
            if len(runs) >= count and all(r["status"] in ("success", "error", "interrupted") for r in runs):
                return runs
            await asyncio.sleep(0.01)


async def test_a_thread_cron_fires_through_the_sdk(alice: LangGraphClient, cron_server: ServerThread,
                                                   clock: ManualClock) -> None:  # fmt: skip
    thread = await alice.threads.create(metadata={"graph_id": "assistant"})
    cron = obj(
        await alice.crons.create_for_thread(
            thread["thread_id"], "assistant", schedule="0 * * * *", input=human("hello cron"), metadata={"k": "v"}
        )
    )
    assert cron["thread_id"] == thread["thread_id"] and cron["schedule"] == "0 * * * *"
    assert cron["next_run_date"] == "2026-01-01T09:00:00+00:00" and cron["enabled"] is True
    assert cron["timezone"] == "UTC" and cron["metadata"] == {"k": "v"} and cron["user_id"] == "alice"
    found = await alice.crons.search(thread_id=thread["thread_id"])
    assert [c["cron_id"] for c in found] == [cron["cron_id"]]
    assert await alice.crons.count(thread_id=thread["thread_id"]) == 1
    cron_server.call_soon(clock.set, START + 60_000)  # 09:00
    (run,) = await _runs(alice, thread["thread_id"], 1)
    assert run["status"] == "success"
    state = await alice.threads.get_state(thread["thread_id"])
    texts = [m["content"] for m in obj(state["values"])["messages"]]
    assert texts[0] == "hello cron" and texts[-1] == "Hello! How can I help?"
    (after,) = await alice.crons.search(thread_id=thread["thread_id"])
    assert after["next_run_date"] == "2026-01-01T10:00:00+00:00"
    await alice.crons.delete(cron["cron_id"])
    assert await alice.crons.search(thread_id=thread["thread_id"]) == []
    assert (await refused(alice.crons.delete(cron["cron_id"])))[0] == 404


async def test_a_stateless_cron_runs_on_new_threads(alice: LangGraphClient, cron_server: ServerThread,
                                                    clock: ManualClock) -> None:  # fmt: skip
    cron = obj(await alice.crons.create("assistant", schedule="30 * * * *", input=human("hello stateless"),
                                        timezone="Europe/Berlin"))  # fmt: skip
    assert cron["thread_id"] is None and cron["timezone"] == "Europe/Berlin" and cron["on_run_completed"] == "keep"
    fire = datetime.fromisoformat(cron["next_run_date"])
    cron_server.call_soon(clock.set, int(fire.timestamp() * 1000))
    thread_id = f"cron-{cron['cron_id']}-{int(fire.timestamp() * 1000)}"
    async with asyncio.timeout(10):
        while True:
            try:
                (run,) = await _runs(alice, thread_id, 1)
                break
            except httpx.HTTPStatusError:
                await asyncio.sleep(0.01)  # the firing's thread is not there yet
    assert run["status"] == "success"
    await alice.crons.delete(cron["cron_id"])


async def test_crons_are_their_creators_and_bad_ones_are_refused(alice: LangGraphClient,
                                                                 cron_server: ServerThread) -> None:  # fmt: skip
    cron = obj(await alice.crons.create("assistant", schedule="0 0 * * *", input=human("hello")))
    async with get_client(url=cron_server.url, api_key=BOB) as bob:
        assert await bob.crons.search() == []
        assert (await refused(bob.crons.delete(cron["cron_id"])))[0] == 404
    cases: list[tuple[dict[str, Any], str]] = [
        ({"schedule": "not a cron"}, "invalid cron"),
        ({"schedule": "* * * * *", "timezone": "Mars/Base"}, "unknown time zone"),
        ({"schedule": "* * * * *", "webhook": "ftp://127.0.0.1/x"}, "absolute http(s) URL"),
        ({"schedule": "* * * * *", "on_run_completed": "delete"}, "keeps every"),
    ]
    for kwargs, needle in cases:
        status, detail = await refused(alice.crons.create("assistant", input=human("hello"), **kwargs))
        assert status == 422 and needle in detail, detail
    assert (await refused(alice.crons.create("nobody", schedule="* * * * *", input=human("x"))))[0] == 404
    async with httpx.AsyncClient() as plain:
        assert (await plain.get(f"{cron_server.url}/info")).json()["flags"]["crons"] is True
    await alice.crons.delete(cron["cron_id"])


async def test_a_cron_is_updated_through_the_sdk(alice: LangGraphClient, cron_server: ServerThread,
                                                clock: ManualClock) -> None:  # fmt: skip
    thread = await alice.threads.create(metadata={"graph_id": "assistant"})
    tid = thread["thread_id"]
    cron = obj(await alice.crons.create_for_thread(tid, "assistant", schedule="0 0 * * *", input=human("old"),
                                                   metadata={"k": "v"}))  # fmt: skip
    cid = cron["cron_id"]
    hour = clock.now_ms() // 3_600_000 * 3_600_000
    at = hour + 30 * 60_000 if clock.now_ms() < hour + 30 * 60_000 else hour + 90 * 60_000
    changed = obj(await alice.crons.update(cid, schedule="30 * * * *", input=human("new"), metadata={"k": "w"}))
    assert (changed["cron_id"], changed["thread_id"], changed["schedule"]) == (cid, tid, "30 * * * *")
    assert changed["metadata"] == {"k": "w"} and changed["payload"]["input"] == human("new")
    assert datetime.fromisoformat(changed["next_run_date"]) == datetime.fromtimestamp(at / 1000, UTC)
    off = obj(await alice.crons.update(cid, enabled=False))
    assert off["enabled"] is False and off["schedule"] == "30 * * * *"  # the rest stays
    assert [c["cron_id"] for c in await alice.crons.search(thread_id=tid, enabled=False)] == [cid]
    ends = datetime.fromtimestamp(at / 1000 + 86_400, UTC)
    assert obj(await alice.crons.update(cid, end_time=ends, enabled=True))["end_time"] == ends.isoformat()
    assert obj(await alice.crons.update(cid, end_time=None))["end_time"] is None
    bad: list[tuple[dict[str, Any], str]] = [
        ({"schedule": "not a cron"}, "invalid cron"),
        ({"timezone": "Mars/Base"}, "unknown time zone"),
        ({"webhook": "not a url"}, "absolute http(s) URL"),
        ({"end_time": datetime(2000, 1, 1, tzinfo=UTC)}, "end_at"),
        ({"input": {"messages": []}}, "exactly one human message"),
    ]
    for kwargs, needle in bad:
        status, detail = await refused(alice.crons.update(cid, **kwargs))
        assert status == 422 and needle in detail, detail
    async with get_client(url=cron_server.url, api_key=BOB) as bob:
        assert (await refused(bob.crons.update(cid, enabled=False)))[0] == 404
    assert (await refused(alice.crons.update("no-such-cron", enabled=False)))[0] == 404
    # The firing sends the new input, at the new fire time.
    cron_server.call_soon(clock.set, at)
    (run,) = await _runs(alice, tid, 1)
    state = await alice.threads.get_state(tid)
    assert run["status"] == "success" and obj(state["values"])["messages"][0]["content"] == "new"
    await alice.crons.delete(cid)


# -- webhooks -------------------------------------------------------------------------------------


async def test_a_cron_webhook_is_posted_once_for_each_firing(
    alice: LangGraphClient, cron_server: ServerThread, clock: ManualClock, receiver: Receiver
) -> None:
    thread = await alice.threads.create(metadata={"graph_id": "assistant"})
    tid = thread["thread_id"]
    cron = obj(await alice.crons.create_for_thread(tid, "assistant", schedule="15 * * * *", input=human("tick"),
                                                   webhook=receiver.url, metadata={"team": "ops"}))  # fmt: skip
    first = datetime.fromisoformat(cron["next_run_date"])
    cron_server.call_soon(clock.set, int(first.timestamp() * 1000))
    delivery = await receiver.next()
    body = delivery.json()
    (run,) = await _runs(alice, tid, 1)
    assert (body["thread_id"], body["run_id"], body["status"]) == (tid, run["run_id"], "success")
    assert body["assistant_id"] == "assistant" and body["metadata"] == {"team": "ops"}
    assert body["values"]["messages"][0]["content"] == "tick"
    stamp, sig = delivery.headers["x-repertory-timestamp"], delivery.headers["x-repertory-signature"]
    assert hmac.compare_digest(sig, signature(SECRET.encode(), stamp, delivery.body))
    # The next firing gets its own delivery; the first is never sent again.
    after = obj((await alice.crons.search(thread_id=tid))[0])
    cron_server.call_soon(clock.set, int(datetime.fromisoformat(after["next_run_date"]).timestamp() * 1000))
    second = await receiver.next()
    assert second.headers["x-repertory-delivery"] != delivery.headers["x-repertory-delivery"]
    assert len({d.json()["run_id"] for d in receiver.got}) == len(receiver.got) == 2
    # Removed with an update (raw HTTP: the SDK drops a null), the next firing posts nothing.
    async with httpx.AsyncClient(base_url=cron_server.url, headers={"x-api-key": ALICE}) as raw:
        patched = await raw.patch(f"/runs/crons/{cron['cron_id']}", json={"webhook": None})
    assert patched.status_code == 200, patched.text
    after = obj((await alice.crons.search(thread_id=tid))[0])
    cron_server.call_soon(clock.set, int(datetime.fromisoformat(after["next_run_date"]).timestamp() * 1000))
    await _runs(alice, tid, 3)
    await asyncio.sleep(0.3)  # six polls: a delivery would have been found and sent by now
    assert len(receiver.got) == 2
    await alice.crons.delete(cron["cron_id"])


async def test_a_run_webhook_is_delivered_once_and_signed(alice: LangGraphClient, receiver: Receiver) -> None:
    thread = await alice.threads.create()
    result = await alice.runs.wait(thread["thread_id"], "assistant", input=human("hello hook"), webhook=receiver.url)
    assert obj(result)["messages"][-1]["content"] == "Hello! How can I help?"
    delivery = await receiver.next()
    body = delivery.json()
    assert body["thread_id"] == thread["thread_id"] and body["status"] == "success"
    assert body["values"]["messages"][-1]["content"] == "Hello! How can I help?"
    stamp, sig = delivery.headers["x-repertory-timestamp"], delivery.headers["x-repertory-signature"]
    assert hmac.compare_digest(sig, signature(SECRET.encode(), stamp, delivery.body))
    (run,) = await alice.runs.list(thread["thread_id"])
    await alice.runs.join(thread["thread_id"], run["run_id"])  # waiting again sends nothing more
    assert len(receiver.got) == 1


async def test_a_failing_receiver_is_retried_with_backoff(alice: LangGraphClient, receiver: Receiver,
                                                          cron_server: ServerThread) -> None:  # fmt: skip
    receiver.statuses = [500, 503]
    thread = await alice.threads.create()
    await alice.runs.wait(thread["thread_id"], "assistant", input=human("hello retry"), webhook=receiver.url)
    first, second, third = [await receiver.next() for _ in range(3)]
    assert [d.status for d in (first, second, third)] == [500, 503, 200]
    ids = {d.headers["x-repertory-delivery"] for d in (first, second, third)}
    assert len(ids) == 1  # one delivery, three attempts
    # The receiver has answered the third attempt; the server writes ``delivered`` just after, so
    # read the row until it leaves ``pending`` rather than race that write.
    store = await SqliteSessionStore.open(cron_server.store.removeprefix("sqlite:///"))
    async with store:
        submission_id = (await store.list_turns(thread["thread_id"]))[0].submission_id

        async def settled() -> bool:
            (row,) = await store.list_webhooks(submission_id=submission_id)
            return row.status != "pending"

        await until(settled, 10)
        (record,) = await store.list_webhooks(submission_id=submission_id)
    assert (record.status, record.attempts) == ("delivered", 3)


async def test_a_webhook_without_a_secret_is_refused(memory_client: LangGraphClient) -> None:
    thread = await memory_client.threads.create()
    status, detail = await refused(
        memory_client.runs.create(
            thread["thread_id"], "assistant", input=human("hello"), webhook="http://127.0.0.1:9/x"
        )
    )
    assert status == 422 and "webhook secret" in detail
    status, detail = await refused(
        memory_client.runs.create(thread["thread_id"], "assistant", input=human("hello"), webhook="ftp://nowhere")
    )
    assert status == 422 and "http(s)" in detail


async def test_a_restarted_server_delivers_what_is_pending_and_never_repeats(tmp_path: Path,
                                                                             receiver: Receiver) -> None:  # fmt: skip
    url = f"sqlite:///{tmp_path / 'hooks.db'}"
    settings = WebhookSettings(secret=SECRET, base_delay=0.01, max_attempts=5, allow_hosts=LOOPBACK)
    receiver.statuses = [500]
    first = ServerThread(
        url, webhooks=WebhookSettings(secret=SECRET, base_delay=3600, max_attempts=5, allow_hosts=LOOPBACK)
    ).start()
    try:
        async with get_client(url=first.url, api_key=None) as c:
            thread = await c.threads.create()
            await c.runs.wait(thread["thread_id"], "assistant", input=human("hello restart"), webhook=receiver.url)
            assert (await receiver.next()).status == 500  # the next attempt is an hour away
    finally:
        first.stop()
    async with await SqliteSessionStore.open(tmp_path / "hooks.db") as store:  # the hour passes while down
        (pending,) = await store.list_webhooks(status="pending")
        assert pending.attempts == 1
        await store.finish_webhook(pending.delivery_id, "pending", 0, pending.last_error, pending.updated_at)
    second = ServerThread(url, webhooks=settings).start()  # finds the pending delivery at start
    try:
        delivered = await receiver.next()
        assert delivered.status == 200 and delivered.json()["thread_id"] == thread["thread_id"]
    finally:
        second.stop()
    third = ServerThread(url, webhooks=settings).start()  # nothing pending: nothing sent
    try:
        async with get_client(url=third.url, api_key=None) as c:
            assert (await c.threads.get(thread["thread_id"]))["thread_id"] == thread["thread_id"]
    finally:
        third.stop()
    assert [d.status for d in receiver.got] == [500, 200]
