"""JSON bodies past the server's bounds (too deep, non-finite numbers) are 422 on every route, before anything is made.

Found by issue 39's probe: ``NaN`` in a body was a 500 after the thread, run or cron had been
created (so a retry made a second one), and metadata nested 200-254 levels was stored and then
failed every listing it was in. ``repertory.http.json_guard`` answers first, naming the field.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from repertory.core.json_limits import DEFAULT_MAX_DEPTH
from tests.http.conftest import ALICE, ServerThread, human

HEADERS = {"x-api-key": ALICE, "content-type": "application/json"}


@pytest.fixture
async def raw(sqlite_server: ServerThread) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=sqlite_server.url, headers=HEADERS, timeout=30) as client:
        yield client


def _nested(levels: int) -> str:
    """JSON text of ``levels`` objects, ``{"a": {"a": ... 1}}``."""
    return '{"a":' * levels + "1" + "}" * levels


def _refusal(response: httpx.Response, loc: list[object], msg: str) -> None:
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["errors"] == [{"loc": loc, "msg": msg}]
    assert body["detail"].endswith(f": {msg}")


async def _thread_count(raw: httpx.AsyncClient) -> int:
    counted = await raw.post("/threads/count", json={})
    assert counted.status_code == 200
    count = counted.json()
    assert isinstance(count, int)
    return count


@pytest.mark.parametrize(
    ("literal", "name"), [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"), ("1e999", None)]
)
async def test_a_non_finite_number_creates_no_thread(raw: httpx.AsyncClient, literal: str, name: str | None) -> None:
    tid = f"nan-{uuid.uuid4()}"
    before = await _thread_count(raw)
    sent = await raw.post("/threads", content=f'{{"thread_id": "{tid}", "metadata": {{"x": [1, {literal}]}}}}')
    msg = f"{name} is not a number JSON allows" if name else "1e999 is too large for a number (it would be Infinity)"
    _refusal(sent, ["body", "metadata", "x", 1], msg)
    assert sent.json()["detail"] == f"body.metadata.x[1]: {msg}"
    assert (await raw.get(f"/threads/{tid}")).status_code == 404
    assert await _thread_count(raw) == before


async def test_a_non_finite_number_starts_no_run_and_makes_no_cron(raw: httpx.AsyncClient) -> None:
    tid = (await raw.post("/threads", json={})).json()["thread_id"]
    text = json.dumps({"assistant_id": "assistant", "input": human("hi"), "metadata": {"score": 0}})
    sent = await raw.post(f"/threads/{tid}/runs", content=text.replace('"score": 0', '"score": NaN'))
    _refusal(sent, ["body", "metadata", "score"], "NaN is not a number JSON allows")
    assert (await raw.get(f"/threads/{tid}/runs")).json() == []
    before = (await raw.post("/runs/crons/count", json={})).json()
    cron = {"assistant_id": "assistant", "schedule": "0 0 1 1 *", "input": human("tick"), "metadata": {"w": 1}}
    sent = await raw.post("/runs/crons", content=json.dumps(cron).replace('"w": 1', '"w": Infinity'))
    _refusal(sent, ["body", "metadata", "w"], "Infinity is not a number JSON allows")
    assert (await raw.post("/runs/crons/count", json={})).json() == before


async def test_the_deepest_body_allowed_is_accepted_and_one_level_more_is_not(raw: httpx.AsyncClient) -> None:
    # The body is level 1 and metadata level 2: 62 more objects make 64 levels.
    ok = await raw.post("/threads", content='{"metadata": {"m": ' + _nested(DEFAULT_MAX_DEPTH - 2) + "}}")
    assert ok.status_code == 200, ok.text
    tid = f"deep-{uuid.uuid4()}"
    sent = await raw.post("/threads", content=f'{{"thread_id": "{tid}", "metadata": {{"m": {_nested(63)}}}}}')
    loc: list[object] = ["body", "metadata", "m", *(["a"] * 62)]
    _refusal(sent, loc, f"nested deeper than {DEFAULT_MAX_DEPTH} levels")
    assert sent.json()["detail"] == ".".join(str(p) for p in loc) + ": nested deeper than 64 levels"
    assert (await raw.get(f"/threads/{tid}")).status_code == 404


@pytest.mark.parametrize("levels", [230, 950, 30_000])
async def test_any_depth_past_the_limit_is_the_same_422_on_every_route(raw: httpx.AsyncClient, levels: int) -> None:
    """230 was stored and then broke every listing; 950 was a 500; 30,000 fits the server's 64 KB body limit."""
    body = "[" * levels + "]" * levels
    for method, path in (
        ("POST", "/threads"),
        ("POST", "/threads/search"),
        ("POST", "/runs/wait"),
        ("POST", "/runs/crons"),
        ("POST", "/assistants/search"),
        ("PATCH", "/threads/some-thread"),
        ("POST", "/no/such/route"),
    ):
        sent = await raw.request(method, path, content=body)
        _refusal(sent, ["body", *([0] * DEFAULT_MAX_DEPTH)], "nested deeper than 64 levels")


async def test_a_body_sent_as_other_than_json_is_checked_all_the_same(raw: httpx.AsyncClient) -> None:
    """A route may parse JSON whatever the content type says: only forms are left alone."""
    for content_type in ("text/plain", "application/vnd.api+json", ""):
        sent = await raw.post("/threads", content='{"metadata": {"x": NaN}}', headers={"content-type": content_type})
        _refusal(sent, ["body", "metadata", "x"], "NaN is not a number JSON allows")
    utf16 = '{"metadata": {"x": NaN}}'.encode("utf-16")
    _refusal(await raw.post("/threads", content=utf16), ["body", "metadata", "x"], "NaN is not a number JSON allows")


async def test_forms_and_text_that_is_no_json_reach_their_routes(raw: httpx.AsyncClient) -> None:
    form = await raw.post(
        "/ui/login",
        content="key=" + "[" * 500,
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert form.status_code != 422 or "nested deeper" not in form.text
    garbled = await raw.post("/threads", content="{not json")
    assert garbled.status_code == 422
    assert "nested deeper" not in garbled.text and "not a number" not in garbled.text
