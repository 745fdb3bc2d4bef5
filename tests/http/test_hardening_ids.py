"""Ids over HTTP (issue 39): a safe alphabet for new thread ids, no existence oracle across tenants, no 500 on a seq.

What the probe found: ``after_seq >= 2**63`` was a 500 (the store cannot bind it); thread ids with
``/``, ``#``, ``?`` or whitespace were accepted and then unreachable or mislinked; creating a thread
under another tenant's id said "already exists", and a run from another tenant's checkpoint said
"not on this thread's lineage" where a made-up one said "no revision": both told that the id
exists somewhere.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from urllib.parse import quote

import httpx
import pytest

from repertory.core.ids import new_id
from repertory.core.tree import SessionRecord
from repertory.storage import SqliteSessionStore
from tests.http.conftest import ALICE, BOB, ServerThread, human

A = {"x-api-key": ALICE}
B = {"x-api-key": BOB}


@pytest.fixture
async def raw(sqlite_server: ServerThread) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=sqlite_server.url, timeout=30) as client:
        yield client


async def _thread_with_a_turn(raw: httpx.AsyncClient, headers: dict[str, str]) -> tuple[str, str]:
    """A thread of the key's owner after one turn, and its head checkpoint."""
    tid = (await raw.post("/threads", json={}, headers=headers)).json()["thread_id"]
    done = await raw.post(
        f"/threads/{tid}/runs/wait", json={"assistant_id": "assistant", "input": human("hi")}, headers=headers
    )
    assert done.status_code == 200, done.text
    state = (await raw.get(f"/threads/{tid}/state", headers=headers)).json()
    return tid, state["checkpoint"]["checkpoint_id"]


async def test_an_after_seq_past_64_bits_is_422_not_500(raw: httpx.AsyncClient) -> None:
    tid = (await raw.post("/threads", json={}, headers=A)).json()["thread_id"]
    for value in (2**63, 10**30):
        sent = await raw.get(f"/threads/{tid}/events", params={"after_seq": value}, headers=A)
        assert sent.status_code == 422, sent.text
        assert sent.json()["errors"][0]["loc"] == ["query", "after_seq"]


@pytest.mark.parametrize("bad", ["a/b", "a#b", "what?x=1", "a b", "tab\there", "new\nline", "", "x" * 129, "é"])
async def test_a_new_thread_id_outside_the_safe_alphabet_is_422(raw: httpx.AsyncClient, bad: str) -> None:
    sent = await raw.post("/threads", json={"thread_id": bad}, headers=A)
    assert sent.status_code == 422, sent.text
    assert sent.json()["errors"][0]["loc"] == ["body", "thread_id"]
    assert "1 to 128 letters, digits" in sent.json()["detail"]


async def test_a_run_that_creates_its_thread_checks_the_id_too(raw: httpx.AsyncClient) -> None:
    body = {"assistant_id": "assistant", "input": human("hi"), "if_not_exists": "create"}
    sent = await raw.post(f"/threads/{quote('with space', safe='')}/runs/wait", json=body, headers=A)
    assert sent.status_code == 422 and "1 to 128 letters, digits" in sent.json()["detail"], sent.text
    fine = f"run-made.{uuid.uuid4()}:x_y"
    made = await raw.post(f"/threads/{fine}/runs/wait", json=body, headers=A)
    assert made.status_code == 200, made.text
    assert (await raw.get(f"/threads/{fine}", headers=A)).status_code == 200


async def test_ids_the_server_makes_and_clients_send_fit_the_alphabet(raw: httpx.AsyncClient) -> None:
    for tid in (str(uuid.uuid4()), new_id(), "a.b:c_d-E9", "x" * 128):
        made = await raw.post("/threads", json={"thread_id": tid}, headers=A)
        assert made.status_code == 200 and made.json()["thread_id"] == tid, made.text
    copied = (await raw.post(f"/threads/{tid}/copy", headers=A)).json()["thread_id"]
    assert (await raw.post("/threads", json={"thread_id": f"{copied}-again"}, headers=A)).status_code == 200


async def test_an_existing_thread_with_an_old_style_id_stays_reachable(
    raw: httpx.AsyncClient, sqlite_server: ServerThread
) -> None:
    """Written before the alphabet rule: still read, listed and deleted by its owner."""
    tid = f"old id #{uuid.uuid4().hex[:8]}?"
    store = await SqliteSessionStore.open(sqlite_server.store.removeprefix("sqlite:///"))
    try:
        await store.create_session(SessionRecord(session_id=tid, agent="assistant", root_id=tid, owner="alice"))
    finally:
        await store.close()
    path = f"/threads/{quote(tid, safe='')}"
    assert (await raw.get(path, headers=A)).json()["thread_id"] == tid
    found = await raw.post("/threads/search", json={"ids": [tid]}, headers=A)
    assert [t["thread_id"] for t in found.json()] == [tid]
    assert (await raw.delete(path, headers=A)).status_code == 204
    assert (await raw.get(path, headers=A)).status_code == 404


async def test_another_tenants_thread_id_is_refused_as_a_reserved_id_is(raw: httpx.AsyncClient) -> None:
    alices = f"alices-{uuid.uuid4()}"
    assert (await raw.post("/threads", json={"thread_id": alices}, headers=A)).status_code == 200
    reserved = f"cron-{new_id()}-1767258000000"

    async def answer(tid: str, **body: object) -> tuple[int, str]:
        sent = await raw.post("/threads", json={"thread_id": tid, **body}, headers=B)
        return sent.status_code, sent.json()["detail"].replace(tid, "<id>")

    taken = await answer(alices)
    assert taken == await answer(reserved)
    assert taken == await answer(alices, if_exists="do_nothing") == await answer(reserved, if_exists="do_nothing")
    assert taken[0] == 422 and "already exists" not in taken[1] and "cron-" in taken[1], taken
    run = {"assistant_id": "assistant", "input": human("hi"), "if_not_exists": "create"}
    by_run = await raw.post(f"/threads/{alices}/runs/wait", json=run, headers=B)
    assert (by_run.status_code, by_run.json()["detail"].replace(alices, "<id>")) == taken
    # Alice's own thread is hers to find: 409 as LangGraph answers, or the thread itself.
    assert (await raw.post("/threads", json={"thread_id": alices}, headers=A)).status_code == 409
    same = await raw.post("/threads", json={"thread_id": alices, "if_exists": "do_nothing"}, headers=A)
    assert same.status_code == 200 and same.json()["thread_id"] == alices
    assert (await raw.get(f"/threads/{alices}", headers=B)).status_code == 404


async def test_a_checkpoint_of_another_tenant_is_answered_as_one_that_never_was(raw: httpx.AsyncClient) -> None:
    _, alices_checkpoint = await _thread_with_a_turn(raw, A)
    bobs, _ = await _thread_with_a_turn(raw, B)
    answers = set()
    for checkpoint in (alices_checkpoint, new_id()):
        for path, body in (
            (f"/threads/{bobs}/runs/wait", {"assistant_id": "assistant", "checkpoint_id": checkpoint}),
            (
                f"/threads/{bobs}/runs/wait",
                {"assistant_id": "assistant", "checkpoint_id": checkpoint, "input": human("x")},
            ),
            (f"/threads/{bobs}/state/checkpoint", {"checkpoint": {"checkpoint_id": checkpoint}}),
        ):
            sent = await raw.post(path, json=body, headers=B)
            answers.add((path.rsplit("/", 1)[-1], sent.status_code, sent.json()["detail"].replace(checkpoint, "<cp>")))
    assert len(answers) == 2 and {status for _, status, _ in answers} == {404}, answers
