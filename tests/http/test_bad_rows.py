"""Rows the server cannot read back fast, or at all, never stop it (issue 39, finding 1), on SQLite and PostgreSQL.

Before the JSON depth limit a tenant could store values nested 200-254 levels, which pydantic
writes but its JSON parser does not read: a pending webhook delivery holding one failed the
server's start ("Application startup failed"), a cron holding one made cron search, count, patch
and delete 500 for everyone, and a thread holding one made ``/threads/search`` and
``/threads/count`` 500 for every tenant while nothing in the product could delete it. Here such
rows are written straight into the database (as an older server wrote them), with a metadata
nested past what pydantic validates at all and a record that is no JSON, and then: the server
starts and delivers the webhook, every listing answers, and each row is deleted through the
product (its owner's key, an admin key, ``repertory sessions delete``).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from typer.testing import CliRunner, Result

from repertory.cli import app as cli
from repertory.core.timing import WebhookRecord
from repertory.core.tree import SessionRecord
from repertory.http.webhooks import WebhookSettings
from repertory.storage.url import open_store
from repertory.testing.conformance.readback import READ_BACK_DEPTH, UNREADABLE_DEPTH, nested
from repertory.testing.pg_temp import TemporaryPostgres
from tests.conftest import truncate_pg
from tests.http.conftest import ADMIN, ADMINS, ALICE, BOB, KEYS, ServerThread, human
from tests.http.receiver import Receiver

A, B, ROOT = {"x-api-key": ALICE}, {"x-api-key": BOB}, {"x-api-key": ADMIN}
SECRET = "bad-rows-webhook-secret"


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'bad-rows.db'}"
        return
    server: TemporaryPostgres = request.getfixturevalue("pg_server")
    truncate_pg(server.url)
    yield server.url
    truncate_pg(server.url)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = await Receiver().start()
    yield r
    await r.close()


class Rows:
    """Raw access to the server's database, as a hand edit or an older server left it."""

    def __init__(self, url: str) -> None:
        self.url = url

    def _run(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        if self.url.startswith("sqlite:///"):
            with closing(sqlite3.connect(self.url.removeprefix("sqlite:///"))) as conn, conn:
                return conn.execute(sql, params).fetchall()
        with psycopg.connect(self.url, autocommit=True) as pg:
            cur = pg.execute(
                sql.replace("?", "%s").replace(" FROM ", " FROM repertory.").replace("UPDATE ", "UPDATE repertory."),
                params,
            )
            return cur.fetchall() if cur.description else []

    def record(self, table: str, key: str, row_id: str) -> dict[str, Any]:
        [(raw,)] = self._run(f"SELECT record FROM {table} WHERE {key} = ?", (row_id,))
        value = json.loads(raw)
        assert isinstance(value, dict)
        return value

    def write(self, table: str, key: str, row_id: str, raw: str) -> None:
        self._run(f"UPDATE {table} SET record = ? WHERE {key} = ?", (raw, row_id))


async def _post(client: httpx.AsyncClient, path: str, body: Any, headers: dict[str, str]) -> Any:
    sent = await client.post(path, json=body, headers=headers)
    assert sent.status_code == 200, sent.text
    return sent.json()


async def _cli(*args: str) -> Result:
    """``repertory ARGS`` as a user runs it (on a thread of its own: the command runs its own event loop)."""
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args))


def _depth(value: Any) -> int:
    levels = 0
    while isinstance(value, dict) and "a" in value:
        value, levels = value["a"], levels + 1
    return levels


async def test_bad_rows_stop_nothing_and_are_deleted_through_the_product(store_url: str, receiver: Receiver) -> None:
    ids = {name: f"{name}-{uuid.uuid4().hex[:8]}" for name in ("ok", "deep", "lost", "broken", "bobs")}
    first = ServerThread(store_url, api_keys=KEYS, admin_keys=ADMINS).start()
    try:
        async with httpx.AsyncClient(base_url=first.url, timeout=30) as c:
            for name in ("ok", "deep", "lost", "broken"):
                await _post(c, "/threads", {"thread_id": ids[name], "metadata": {"k": name}}, A)
            await _post(c, "/threads", {"thread_id": ids["bobs"]}, B)
            await _post(c, f"/threads/{ids['ok']}/runs/wait", {"assistant_id": "assistant", "input": human("hi")}, A)
            cron = {"assistant_id": "assistant", "schedule": "0 0 1 1 *", "input": human("tick"), "metadata": {"m": 1}}
            deep_cron = (await _post(c, "/runs/crons", cron, A))["cron_id"]
            lost_cron = (await _post(c, "/runs/crons", cron, A))["cron_id"]
    finally:
        first.stop()

    rows = Rows(store_url)
    for name, metadata in (("deep", nested(READ_BACK_DEPTH)), ("lost", nested(UNREADABLE_DEPTH))):
        record = rows.record("sessions", "session_id", ids[name])
        rows.write("sessions", "session_id", ids[name], json.dumps({**record, "metadata": metadata}))
    rows.write("sessions", "session_id", ids["broken"], '{"cut short')
    for cron_id, depth in ((deep_cron, READ_BACK_DEPTH), (lost_cron, UNREADABLE_DEPTH)):
        record = rows.record("schedules", "schedule_id", cron_id)
        record["metadata"]["metadata"] = nested(depth)
        rows.write("schedules", "schedule_id", cron_id, json.dumps(record))
    store = await open_store(store_url)
    try:
        [turn] = await store.list_turns(ids["ok"])  # type: ignore[attr-defined]
        hook = WebhookRecord(
            delivery_id="w-deep",
            session_id=ids["ok"],
            submission_id=turn.submission_id,
            run_id=turn.run_id,
            url=receiver.url,
            metadata={"assistant_id": "assistant", "run_metadata": nested(READ_BACK_DEPTH)},
        )
        await store.add_webhook(hook)  # type: ignore[attr-defined]
    finally:
        await store.close()

    settings = WebhookSettings(secret=SECRET, base_delay=0.01, max_attempts=2, poll=0.05, allow_hosts=("127.0.0.1",))
    server = ServerThread(store_url, api_keys=KEYS, admin_keys=ADMINS, webhooks=settings).start()  # boots
    try:
        delivered = await receiver.next()
        assert _depth(delivered.json()["metadata"]) == READ_BACK_DEPTH
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as c:
            found = {t["thread_id"]: t for t in await _post(c, "/threads/search", {"limit": 100}, A)}
            assert set(found) == {ids["ok"], ids["deep"], ids["lost"]}  # the broken row is skipped
            assert _depth(found[ids["deep"]]["metadata"]) == READ_BACK_DEPTH
            assert "k" not in found[ids["lost"]]["metadata"]  # read back without what could not be read
            assert await _post(c, "/threads/count", {}, A) == 3
            assert [t["thread_id"] for t in await _post(c, "/threads/search", {}, B)] == [ids["bobs"]]
            assert await _post(c, "/threads/count", {}, ROOT) == 4
            crons = {x["cron_id"]: x for x in await _post(c, "/runs/crons/search", {}, A)}
            assert _depth(crons[deep_cron]["metadata"]) == READ_BACK_DEPTH
            assert await _post(c, "/runs/crons/count", {}, ROOT) == 2

            assert (await c.delete(f"/threads/{ids['deep']}", headers=A)).status_code == 204
            assert (await c.delete(f"/threads/{ids['lost']}", headers=ROOT)).status_code == 204
            assert (await c.delete(f"/runs/crons/{deep_cron}", headers=A)).status_code == 204
            assert (await c.delete(f"/runs/crons/{lost_cron}", headers=ROOT)).status_code == 204
            assert await _post(c, "/runs/crons/count", {}, ROOT) == 0
            unreadable = await c.get(f"/threads/{ids['broken']}", headers=A)
            assert unreadable.status_code == 503 and "cannot be read back" in unreadable.json()["detail"]
    finally:
        server.stop()

    refused = await _cli("sessions", "delete", ids["broken"], "--store", store_url)
    assert refused.exit_code == 2 and "--force" in refused.stderr, refused.output
    deleted = await _cli("sessions", "delete", ids["broken"], "--store", store_url, "--force")
    assert deleted.exit_code == 0, deleted.output
    assert "deleted 1 session(s)" in deleted.stdout
    assert rows._run("SELECT session_id FROM sessions WHERE session_id = ?", (ids["broken"],)) == []


async def test_the_cli_deletes_a_thread_whose_metadata_cannot_be_read(store_url: str) -> None:
    store = await open_store(store_url)
    tid = f"deep-{uuid.uuid4().hex[:8]}"
    try:
        await store.create_session(SessionRecord(session_id=tid, agent="assistant", root_id=tid, owner="alice"))  # type: ignore[attr-defined]
    finally:
        await store.close()
    rows = Rows(store_url)
    record = rows.record("sessions", "session_id", tid)
    rows.write("sessions", "session_id", tid, json.dumps({**record, "metadata": nested(READ_BACK_DEPTH)}))
    listed = await _cli("sessions", "list", "--store", store_url)
    assert listed.exit_code == 0 and tid in listed.stdout, listed.output
    deleted = await _cli("sessions", "delete", tid, "--store", store_url)
    assert deleted.exit_code == 0 and "deleted 1 session(s)" in deleted.stdout, deleted.output
