"""Webhooks cannot be pointed inside the server's network, and one bad delivery row stops nothing.

Issue 39 found a tenant could make the server POST, signed and retried, to its own loopback
(``http://127.0.0.1:<port>/internal-admin/...``, ``http://0x7f000001/``, ``[::1]``), and that
``169.254.169.254`` and ``metadata.google.internal`` passed the check; a URL with a CR/LF passed
the request and then killed its delivery, leaving the row ``pending`` forever; and one delivery
row the store could not read stopped the server from starting. Here each of those is tried
through the HTTP API (or, for rows written before the checks, straight into the store) against
a server whose allow list is empty, and against one that allows loopback explicitly.
"""

from __future__ import annotations

import ipaddress
import json
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from repertory import SqliteSessionStore
from repertory.core.ids import new_id
from repertory.core.timing import WebhookRecord
from repertory.http.webhook_targets import (
    MAX_URL_LENGTH,
    HostPolicy,
    WebhookRefused,
    address_refusal,
    check_webhook_url,
    resolve_target,
    system_resolver,
)
from repertory.http.webhooks import WebhookSettings
from tests.http.conftest import ALICE, KEYS, ServerThread, human, obj, refused
from tests.http.receiver import Receiver
from tests.runtime.time.helpers import until

SECRET = "webhook-secret-for-tests"
NOBODY = HostPolicy()

# Every spelling of a non-public place the probe used, and their neighbours: each resolves (without
# DNS: numeric forms are read by the system's resolver, names are refused before any lookup) to
# an address that is not public, or names the cloud's metadata service.
INSIDE = [
    "http://127.0.0.1:8080/internal-admin/delete-everything?confirm=yes",
    "http://0x7f000001/",
    "http://2130706433/",
    "http://017700000001/",
    "http://127.1/",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[::127.0.0.1]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[2002:7f00:1::]/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[fe80::1]/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://METADATA.google.internal./",
    "http://metadata/",
    "http://localhost:9/",
    "http://api.localhost/",
    "http://10.0.0.1/",
    "http://172.16.5.4/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",
    "http://[fc00::1]/",
    "http://0.0.0.0/",
    "http://0/",
    "http://[::]/",
    "http://224.0.0.1/",
    "http://255.255.255.255/",
    "https://user:pw@127.0.0.1:443/",
]


@pytest.mark.parametrize("url", INSIDE)
async def test_no_spelling_of_an_inside_address_passes(url: str) -> None:
    with pytest.raises(WebhookRefused, match="webhook host"):
        await resolve_target(url, NOBODY, system_resolver, 5)


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("http://example.com/a\r\nX-Injected: 1", "control character"),
        ("http://example.com/\n", "control character"),
        ("http://exa\x00mple.com/", "control character"),
        ("http://example.com/\x7f", "control character"),
        ("http://us\x01er:pw@example.com/", "control character"),
        ("http://example.com/a b", "whitespace"),
        ("http://example.com:0/", "port"),
        ("http://example.com:65536/", "port"),
        ("http://example.com:http/", "port"),
        ("http://:80/path", "needs a host"),
        ("ftp://example.com/", "absolute http(s) URL"),
        ("example.com/hook", "absolute http(s) URL"),
        ("http://example.com/" + "a" * MAX_URL_LENGTH, "longer than"),
    ],
)
def test_a_malformed_url_is_refused_naming_the_field(url: str, needle: str) -> None:
    with pytest.raises(WebhookRefused, match="webhook") as caught:
        check_webhook_url(url)
    assert needle in str(caught.value)


async def test_public_addresses_pass_and_are_what_the_post_goes_to() -> None:
    target = await resolve_target("https://user@8.8.8.8:8443/hook?x=1", NOBODY, system_resolver, 5)
    url, headers, extensions = target.pinned(target.addresses[0])
    assert (str(url), headers, extensions) == ("https://user@8.8.8.8:8443/hook?x=1", {"Host": "8.8.8.8:8443"}, {})
    assert (await resolve_target("http://[2606:4700::1111]/", NOBODY, system_resolver, 5)).addresses == (
        "2606:4700::1111",
    )
    assert address_refusal(ipaddress.ip_address("::ffff:8.8.8.8")) is None


async def test_a_name_is_posted_to_at_the_address_checked_with_its_name_kept() -> None:
    async def resolver(host: str, port: int) -> list[str]:
        assert (host, port) == ("hooks.example", 443)
        return ["93.184.216.34"]

    target = await resolve_target("https://Hooks.Example/hook", NOBODY, resolver, 5)
    url, headers, extensions = target.pinned(target.addresses[0])
    assert str(url) == "https://93.184.216.34/hook"
    assert headers == {"Host": "hooks.example"} and extensions == {"sni_hostname": "hooks.example"}


async def test_a_name_with_any_inside_address_is_refused() -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return ["93.184.216.34", "10.1.2.3"]

    with pytest.raises(WebhookRefused, match=r"10\.1\.2\.3.*private"):
        await resolve_target("http://split.example/", NOBODY, resolver, 5)


async def test_the_allow_list_lifts_the_rule_for_what_it_names_only() -> None:
    policy = HostPolicy.parse(["127.0.0.1", "10.0.0.0/8", "Hooks.LAN.", "[::1]"])
    assert policy.names == frozenset({"hooks.lan"})
    for url in ("http://127.0.0.1:9/", "http://[::ffff:127.0.0.1]/", "http://10.9.9.9/", "http://[::1]/"):
        await resolve_target(url, policy, system_resolver, 5)
    for url in ("http://127.0.0.2/", "http://192.168.0.1/", "http://169.254.169.254/", "http://localhost/"):
        with pytest.raises(WebhookRefused):
            await resolve_target(url, policy, system_resolver, 5)

    async def lan(host: str, port: int) -> list[str]:
        return ["192.168.7.7"]

    assert (await resolve_target("http://hooks.lan/", policy, lan, 5)).addresses == ("192.168.7.7",)
    anything = HostPolicy.parse([], allow_private=True)
    await resolve_target("http://169.254.169.254/", anything, system_resolver, 5)
    for bad in ("", "http://x/", "a b", "user@host"):
        with pytest.raises(ValueError, match="allowed webhook host"):
            WebhookSettings(allow_hosts=(bad,))


# -- through the server -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def strict_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """A server with a secret and no allowed hosts: what ``repertory serve`` runs by default."""
    path = tmp_path_factory.mktemp("ssrf") / "hooks.db"
    settings = WebhookSettings(secret=SECRET, base_delay=0.01, max_attempts=3, poll=0.05)
    server = ServerThread(f"sqlite:///{path}", api_keys=KEYS, webhooks=settings).start()
    yield server
    server.stop()


@pytest.fixture
async def alice(strict_server: ServerThread) -> AsyncIterator[LangGraphClient]:
    async with get_client(url=strict_server.url, api_key=ALICE) as c:
        yield c


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = await Receiver().start()
    yield r
    await r.close()


async def _settled(store_url: str, thread_id: str) -> WebhookRecord:
    """The thread's one webhook row once it has left ``pending``."""
    async with await SqliteSessionStore.open(store_url.removeprefix("sqlite:///")) as store:
        submission_id = (await store.list_turns(thread_id))[0].submission_id

        async def done() -> bool:
            (row,) = await store.list_webhooks(submission_id=submission_id)
            return row.status != "pending"

        await until(done, 10)
        (row,) = await store.list_webhooks(submission_id=submission_id)
    return row


async def test_a_run_webhook_to_loopback_is_refused_before_the_run_starts(
    alice: LangGraphClient, strict_server: ServerThread, receiver: Receiver
) -> None:
    thread = await alice.threads.create()
    hook = receiver.url.replace("/hook", "/internal-admin/delete-everything?confirm=yes")
    status, detail = await refused(
        alice.runs.wait(thread["thread_id"], "assistant", input=human("hello"), webhook=hook)
    )
    assert status == 422 and "loopback" in detail and "--allow-webhook-host" in detail
    async with await SqliteSessionStore.open(strict_server.store.removeprefix("sqlite:///")) as store:
        assert await store.list_turns(thread["thread_id"]) == []  # nothing ran: a retry starts nothing twice
        assert await store.list_webhooks() == []
    assert receiver.got == []


@pytest.mark.parametrize("url", [u for u in INSIDE if "8080" not in u][:16])
async def test_a_cron_webhook_inside_is_refused_at_the_request(alice: LangGraphClient, url: str) -> None:
    status, detail = await refused(alice.crons.create("assistant", schedule="0 0 * * *", input=human("x"), webhook=url))
    assert status == 422 and detail.startswith("webhook"), detail


async def test_a_cron_webhook_cannot_be_moved_inside_by_an_update(alice: LangGraphClient) -> None:
    cron = obj(await alice.crons.create("assistant", schedule="0 0 * * *", input=human("x")))
    try:
        for url in ("http://169.254.169.254/", "http://[::1]:80/", "http://h/\r\nHost: evil"):
            status, detail = await refused(alice.crons.update(cron["cron_id"], webhook=url))
            assert status == 422 and detail.startswith("webhook"), detail
        assert (await alice.crons.search())[0]["cron_id"] == cron["cron_id"]
    finally:
        await alice.crons.delete(cron["cron_id"])


async def test_a_run_webhook_with_crlf_is_refused_at_the_request(alice: LangGraphClient) -> None:
    thread = await alice.threads.create()
    for url in ("http://example.com/\r\nX: y", "http://example.com:0/", "http://example.com/" + "a" * 2100):
        status, detail = await refused(
            alice.runs.create(thread["thread_id"], "assistant", input=human("x"), webhook=url)
        )
        assert status == 422 and "webhook" in detail, detail
    assert await alice.runs.list(thread["thread_id"]) == []  # refused before anything ran


async def test_delivery_goes_to_the_checked_address_under_the_name_given(tmp_path: Path, receiver: Receiver) -> None:
    """A name no DNS knows reaches the receiver only through the address the check resolved it to."""
    port = int(receiver.url.rsplit(":", 1)[1].split("/")[0])
    asked: list[str] = []

    async def resolver(host: str, port: int) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"]

    settings = WebhookSettings(secret=SECRET, allow_hosts=("127.0.0.1",), resolver=resolver)
    server = ServerThread(f"sqlite:///{tmp_path / 'pin.db'}", webhooks=settings).start()
    try:
        async with get_client(url=server.url, api_key=None) as c:
            thread = await c.threads.create()
            await c.runs.wait(thread["thread_id"], "assistant", input=human("hi"),
                              webhook=f"http://hooks.invalid:{port}/hook")  # fmt: skip
            delivery = await receiver.next()
    finally:
        server.stop()
    assert delivery.headers["host"] == f"hooks.invalid:{port}" and delivery.path == "/hook"
    # Checked at the request and again at the delivery, whose POST went where its own check said.
    assert asked == ["hooks.invalid", "hooks.invalid"]


async def test_redirects_are_not_followed(tmp_path: Path, receiver: Receiver) -> None:
    elsewhere = await Receiver().start()
    receiver.statuses, receiver.headers = [307], {"Location": elsewhere.url}
    settings = WebhookSettings(secret=SECRET, allow_hosts=("127.0.0.1",), max_attempts=1)
    url = f"sqlite:///{tmp_path / 'redirect.db'}"
    server = ServerThread(url, webhooks=settings).start()
    try:
        async with get_client(url=server.url, api_key=None) as c:
            thread = await c.threads.create()
            await c.runs.wait(thread["thread_id"], "assistant", input=human("hi"), webhook=receiver.url)
            assert (await receiver.next()).status == 307
            row = await _settled(url, thread["thread_id"])
    finally:
        server.stop()
        await elsewhere.close()
    assert (row.status, row.last_error) == ("failed", "HTTP 307")
    assert elsewhere.got == []


# -- rows written before these checks ---------------------------------------------------------------


async def test_bad_rows_fail_alone_and_the_good_one_is_delivered(tmp_path: Path, receiver: Receiver) -> None:
    """A CR/LF URL, a thread that is gone, a refused host: each ends ``failed`` with why; the good row arrives."""
    url = f"sqlite:///{tmp_path / 'rows.db'}"
    first = ServerThread(url).start()
    try:
        async with get_client(url=first.url, api_key=None) as c:
            thread = await c.threads.create()
            await c.runs.wait(thread["thread_id"], "assistant", input=human("hi"))
    finally:
        first.stop()
    async with await SqliteSessionStore.open(tmp_path / "rows.db") as store:
        (turn,) = await store.list_turns(thread["thread_id"])

        def row(hook: str, session_id: str = turn.session_id) -> WebhookRecord:
            return WebhookRecord(delivery_id=new_id(), session_id=session_id, submission_id=turn.submission_id,
                                 run_id=turn.run_id, url=hook)  # fmt: skip

        rows = {
            "crlf": row(receiver.url + "\r\nX-Injected: 1"),
            "gone": row(receiver.url, session_id="no-such-thread"),
            "inside": row("http://169.254.169.254/latest/meta-data/"),
            "good": row(receiver.url),
        }
        for record in rows.values():
            await store.add_webhook(record)
    settings = WebhookSettings(secret=SECRET, allow_hosts=("127.0.0.1",), base_delay=0.01, max_attempts=2)
    second = ServerThread(url, webhooks=settings).start()
    try:
        delivered = await receiver.next()
        async with await SqliteSessionStore.open(tmp_path / "rows.db") as store:

            async def settled() -> bool:
                return all(w.status != "pending" for w in await store.list_webhooks())

            await until(settled, 10)
            final = {name: await store.load_webhook(r.delivery_id) for name, r in rows.items()}
    finally:
        second.stop()
    assert delivered.headers["x-repertory-delivery"] == rows["good"].delivery_id and len(receiver.got) == 1
    status = {name: (r.status, r.last_error) for name, r in final.items() if r is not None}
    assert status["good"] == ("delivered", None)
    assert status["crlf"][0] == "failed" and "control character" in (status["crlf"][1] or "")
    assert status["gone"][0] == "failed" and "no-such-thread" in (status["gone"][1] or "")
    assert status["inside"][0] == "failed" and "link-local" in (status["inside"][1] or "")


async def test_a_row_the_store_cannot_read_does_not_stop_the_server_starting(tmp_path: Path) -> None:
    """A pending row nested deeper than the JSON reader goes: the server starts and serves anyway."""
    path = tmp_path / "deep.db"
    async with await SqliteSessionStore.open(path):
        pass  # the schema
    deep: object = []
    for _ in range(300):
        deep = [deep]
    record = json.loads(WebhookRecord(delivery_id="deep", session_id="s", submission_id="t", run_id="r",
                                      url="http://127.0.0.1:9/").model_dump_json())  # fmt: skip
    record["metadata"] = {"run_metadata": deep}
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.execute(
                "INSERT INTO webhooks (delivery_id, submission_id, status, attempts, due_at, record) "
                "VALUES ('deep', 't', 'pending', 0, 0, ?)",
                (json.dumps(record),),
            )
    finally:
        conn.close()
    settings = WebhookSettings(secret=SECRET, allow_hosts=("127.0.0.1",), poll=0.05)
    server = ServerThread(f"sqlite:///{path}", webhooks=settings).start()
    try:
        async with httpx.AsyncClient() as plain:
            assert (await plain.get(f"{server.url}/ok")).status_code == 200
    finally:
        server.stop()
