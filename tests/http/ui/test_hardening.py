"""The web UI under issue 39's probes: body size, live streams, server-side logins, existence oracles, nosniff.

Each test reproduces what the probe did against ``repertory ui`` (``ui_only_app``) or the UI
mounted in ``repertory serve`` (``create_app``), and checks the answer it gets now.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio

from repertory import Principal, Runtime
from repertory.http.auth import Caller
from repertory.http.limits import ServerLimits
from repertory.http.ui import ui_only_app
from repertory.http.ui.logins import Logins
from tests.http.ui.agents import make_agents
from tests.http.ui.conftest import ADMINS, ALICE, BOB, KEYS, UiServer, form_token, logged_in, serving

pytestmark = pytest.mark.asyncio(loop_scope="module")
ALICE_P, BOB_P = Principal.user("alice"), Principal.user("bob")
ONLY_LIMITS = ServerLimits(max_streams_per_key=2, max_ui_sessions=3)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def ui_only(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[UiServer]:
    """``repertory ui``'s app (the UI alone) on loopback: 2 streams a key, 3 logins at once."""
    store = tmp_path_factory.mktemp("ui-only") / "ui.db"
    runtime = await Runtime.start(store=f"sqlite:///{store}", agents=make_agents())
    async with serving(ui_only_app(runtime, KEYS, admin_keys=ADMINS, limits=ONLY_LIMITS), runtime) as served:
        yield served


# -- finding 2: the body limit of repertory ui --------------------------------------------------------


async def test_a_50_mb_login_post_to_repertory_ui_is_413_before_it_is_read(ui_only: UiServer) -> None:
    form = {"content-type": "application/x-www-form-urlencoded"}
    async with httpx.AsyncClient(base_url=ui_only.url, timeout=60) as client:
        declared = await client.post("/ui/login", content=b"k" * (50 << 20), headers=form)
        assert declared.status_code == 413

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
            for _ in range(50):
                yield b"k" * (1 << 20)

        streamed = await client.post("/ui/login", content=chunks(), headers=form)
        assert streamed.status_code == 413
        # A form of ordinary size is still read (and refused for its missing token, as before).
        assert (await client.post("/ui/login", data={"key": ALICE})).status_code == 403


# -- finding 6: live views hold stream slots -----------------------------------------------------------


async def _first_event(lines: AsyncIterator[str]) -> tuple[str, str]:
    """The first event (name, data) of an SSE response's lines, or ``("", "")`` for a live view that opened."""
    name = ""
    async for line in lines:
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            return name, line.removeprefix("data: ")
        elif line == "retry: 1000":
            return "", ""  # an accepted live view: it starts with its reconnect delay, then waits
    raise AssertionError("the stream ended without an event")


# Open streams' line iterators: a dropped one would close its stream when it is collected.
_HELD: list[AsyncIterator[str]] = []


async def _open_live(stack: contextlib.AsyncExitStack, client: httpx.AsyncClient, path: str) -> tuple[str, str]:
    stream = await stack.enter_async_context(client.stream("GET", path))
    assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
    lines = stream.aiter_lines()
    _HELD.append(lines)
    stack.callback(_HELD.remove, lines)
    return await _first_event(lines)


async def _until_accepted(client: httpx.AsyncClient, path: str) -> tuple[str, str]:
    """Open ``path`` until the server has seen the closed stream go (it notices the disconnect on its own loop)."""
    for _ in range(200):
        async with client.stream("GET", path) as stream:
            event = await _first_event(stream.aiter_lines())
        if event[0] != "refused":
            return event
        await asyncio.sleep(0.02)  # the release is the server's reaction to a closed socket: nothing to await
    raise AssertionError("the slot of the closed live view was never given back")


async def test_live_views_and_api_streams_share_one_cap_per_key(ui_server: UiServer) -> None:
    rt = ui_server.runtime
    handle = await rt.create_session(agent="assistant", title="slots", principal=ALICE_P, owner="alice")
    bobs = await rt.create_session(agent="assistant", title="bob's", principal=BOB_P, owner="bob")
    live = f"/ui/sessions/{handle.id}/live"
    async with logged_in(ui_server.url) as (client, _), contextlib.AsyncExitStack() as stack:
        first = contextlib.AsyncExitStack()
        assert await _open_live(first, client, live) == ("", "")
        for _ in range(15):
            assert await _open_live(stack, client, live) == ("", "")
        # The 17th stream of the key: a live view is refused (and says why), and so is an API stream.
        name, data = await _open_live(stack, client, live)
        assert name == "refused" and "16 open streams" in data
        async with httpx.AsyncClient(base_url=ui_server.url, headers={"x-api-key": ALICE}) as api:
            async with api.stream("GET", f"/threads/{handle.id}/events") as events:
                assert events.status_code == 429
        # Another key's count is its own.
        async with logged_in(ui_server.url, BOB) as (bob, _), contextlib.AsyncExitStack() as bob_stack:
            assert await _open_live(bob_stack, bob, f"/ui/sessions/{bobs.id}/live") == ("", "")
        # Closing one frees its slot.
        await first.aclose()
        assert await _until_accepted(client, live) == ("", "")


async def test_repertory_ui_counts_live_views_with_its_own_cap(ui_only: UiServer) -> None:
    handle = await ui_only.runtime.create_session(agent="assistant", title="own", principal=ALICE_P, owner="alice")
    live = f"/ui/sessions/{handle.id}/live"
    async with logged_in(ui_only.url) as (client, _), contextlib.AsyncExitStack() as stack:
        assert await _open_live(stack, client, live) == ("", "")
        assert await _open_live(stack, client, live) == ("", "")
        name, data = await _open_live(stack, client, live)
        assert name == "refused" and "2 open streams" in data


# -- identity: a server-side session, revoked at logout; the CSRF token rotated at login ---------------


async def test_the_cookie_is_a_session_id_that_logout_revokes(ui_server: UiServer) -> None:
    async with logged_in(ui_server.url) as (client, token):
        cookie = client.cookies["repertory_session"]
        assert ALICE not in cookie and "repertory_key" not in client.cookies
        # A copy of the cookie is worth the session while it lasts...
        async with httpx.AsyncClient(base_url=ui_server.url, cookies={"repertory_session": cookie}) as copy:
            assert (await copy.get("/ui/")).status_code == 200
            out = await client.post("/ui/logout", data={"csrf": token})
            assert out.status_code == 303 and out.headers["location"] == "/ui/login"
            # ...and nothing once the session is logged out, on the server.
            again = await copy.get("/ui/")
            assert again.status_code == 303 and again.headers["location"].startswith("/ui/login")
            assert (await copy.get("/ui/sessions/x/live")).status_code == 401


async def test_the_form_token_shown_before_login_is_refused_after_it(ui_server: UiServer) -> None:
    handle = await ui_server.runtime.create_session(agent="assistant", title="rot", principal=ALICE_P, owner="alice")
    send = f"/ui/sessions/{handle.id}/send"
    async with httpx.AsyncClient(base_url=ui_server.url) as client:
        before = form_token((await client.get("/ui/login")).text)
        answer = await client.post("/ui/login", data={"csrf": before, "key": ALICE, "next": "/ui/"})
        assert answer.status_code == 303
        assert (await client.post(send, data={"message": "hi", "csrf": before})).status_code == 403
        assert await ui_server.runtime.store.list_turns(handle.id) == []
        after = form_token((await client.get(f"/ui/sessions/{handle.id}")).text)
        assert after != before
        assert (await client.post(send, data={"message": "hello", "csrf": after})).status_code == 303


async def test_logins_are_bounded_the_least_recently_used_logged_out(ui_only: UiServer) -> None:
    async with contextlib.AsyncExitStack() as stack:
        clients = [(await stack.enter_async_context(logged_in(ui_only.url)))[0] for _ in range(3)]
        assert [(await c.get("/ui/")).status_code for c in clients] == [200, 200, 200]
        await clients[0].get("/ui/")  # the first is now the most recently used
        fourth, _ = await stack.enter_async_context(logged_in(ui_only.url, BOB))
        codes = [(await c.get("/ui/")).status_code for c in (*clients, fourth)]
        assert codes == [200, 303, 200, 200]  # the second, least recently used, was logged out


async def test_a_login_expires_when_unused_and_is_kept_by_digest() -> None:
    now = [0.0]
    logins = Logins(idle_s=60, capacity=10, clock=lambda: now[0])
    caller = Caller(ALICE_P, "alice", owner="alice")
    sid = logins.open(caller)
    now[0] = 59
    found = logins.find(sid)
    assert found is not None and found.caller == caller
    now[0] = 59 + 61
    assert logins.find(sid) is None and len(logins) == 0
    other = logins.open(caller)
    assert other not in repr(logins._open)  # only the id's digest is held


# -- tenancy oracles and static files --------------------------------------------------------------


def _rows(page: str) -> list[str]:
    return re.findall(r'href="/ui/sessions/([^"/?]+)"', page)


async def test_a_before_cursor_of_another_owner_answers_like_a_missing_one(ui_server: UiServer) -> None:
    rt = ui_server.runtime
    mine = await rt.create_session(agent="helper", title="alice older", principal=ALICE_P, owner="alice")
    theirs = await rt.create_session(agent="helper", title="bob's", principal=BOB_P, owner="bob")
    newer = await rt.create_session(agent="helper", title="alice newer", principal=ALICE_P, owner="alice")
    async with logged_in(ui_server.url) as (client, _):
        own = await client.get("/ui/", params={"agent": "helper", "before": newer.id})
        other = await client.get("/ui/", params={"agent": "helper", "before": theirs.id})
        missing = await client.get("/ui/", params={"agent": "helper", "before": "no-such-session"})
    assert mine.id in _rows(own.text)  # her own cursor pages on to her older session
    assert other.status_code == missing.status_code == 200
    assert _rows(other.text) == _rows(missing.text) == []  # bob's id pages like no id at all


async def test_a_fork_at_another_owners_revision_answers_like_a_missing_one(ui_server: UiServer) -> None:
    rt = ui_server.runtime
    mine = await rt.create_session(agent="assistant", title="fork mine", principal=ALICE_P, owner="alice")
    await mine.run("hello")
    theirs = await rt.create_session(agent="assistant", title="fork theirs", principal=BOB_P, owner="bob")
    await theirs.run("hello")
    thread = await rt.store.load_thread(theirs.id)
    assert thread is not None and thread.history_revision_id is not None
    async with logged_in(ui_server.url) as (client, token):
        fork = f"/ui/sessions/{mine.id}/fork"
        other = await client.post(fork, data={"csrf": token, "revision": thread.history_revision_id})
        missing = await client.post(fork, data={"csrf": token, "revision": "no-such-revision"})
    assert other.status_code == missing.status_code == 404
    message = re.compile(r"this session has no revision &#39;[^&]*&#39;")
    assert message.search(other.text) and message.search(missing.text)


async def test_static_files_are_served_nosniff(ui_only: UiServer) -> None:
    async with httpx.AsyncClient(base_url=ui_only.url) as client:
        for name in ("ui.js", "ui.css", "htmx.min.js", "nope.js"):
            answer = await client.get(f"/ui/static/{name}")
            assert answer.headers["x-content-type-options"] == "nosniff", name


# -- finding 6: the live view sends what is new, never the whole conversation again -------------------


def _articles(page: str) -> list[tuple[str, bool]]:
    """``(revision, open)`` of each message a conversation fragment holds."""
    found = re.findall(r'<article class="msg [^"]*" id="entry-[^"]*" data-revision="([^"]*)"( data-open)?>', page)
    return [(revision, bool(open_)) for revision, open_ in found]


async def test_the_conversation_is_reloaded_from_its_last_settled_message_only(ui_server: UiServer) -> None:
    rt = ui_server.runtime
    handle = await rt.create_session(agent="assistant", title="tail", principal=ALICE_P, owner="alice")
    await handle.run("research volcanoes")  # user, assistant (a lookup call), its result, the reply
    await handle.run("delete acct-tail")  # user, assistant (a call waiting for approval)
    path = f"/ui/sessions/{handle.id}/conversation"
    async with logged_in(ui_server.url) as (client, _):
        whole = (await client.get(path)).text
        shown = _articles(whole)
        assert [open_ for _, open_ in shown] == [False, False, False, False, True]
        assert 'data-after=""' in whole
        # What ui.js asks for at rest: after the last settled message, here the first reply.
        settled = shown[2][0]
        tail = (await client.get(path, params={"after": settled})).text
        assert f'data-after="{settled}"' in tail
        assert _articles(tail) == shown[3:]
        # After the lookup call (its result, a tool message next, is on the page with it): the
        # result is not sent again as one standing alone.
        after_call = (await client.get(path, params={"after": shown[1][0]})).text
        assert _articles(after_call) == shown[2:] and 'class="result' not in after_call
        # A revision that is not on this session's lineage: the whole conversation, said so.
        elsewhere = (await client.get(path, params={"after": "not-a-revision"})).text
        assert 'data-after=""' in elsewhere and _articles(elsewhere) == shown


# -- finding 1 through the UI's forms: JSON values too deep to read back, or not finite --------------


async def test_a_resume_value_or_edited_arguments_too_deep_or_not_finite_are_refused(ui_server: UiServer) -> None:
    rt = ui_server.runtime
    asking = await rt.create_session(agent="assistant", title="deep", principal=ALICE_P, owner="alice")
    asked = await asking.run("ask")
    deleting = await rt.create_session(agent="assistant", title="nan", principal=ALICE_P, owner="alice")
    waiting = await deleting.run("delete acct-nan")
    async with logged_in(ui_server.url) as (client, token):
        run = await rt.store.load_run(asked.run_id)
        assert run is not None and run.suspended_on is not None
        resume = {
            "csrf": token,
            "session_id": asking.id,
            "run_id": asked.run_id,
            "tool_call_id": run.suspended_on.tool_call_id,
            "action": "resume",
            "value_json": "1",
            "back": "session",
        }
        deep = await client.post("/ui/decide", data={**resume, "value": "[" * 300 + "]" * 300})
        assert deep.status_code == 422 and "nested deeper than 64 levels" in deep.text
        nan = await client.post("/ui/decide", data={**resume, "value": '{"x": NaN}'})
        assert nan.status_code == 422 and "NaN is not a number JSON allows" in nan.text
        [pending] = await deleting.pending_approvals()
        approve = {
            "csrf": token,
            "session_id": deleting.id,
            "run_id": waiting.run_id,
            "tool_call_id": pending.tool_call_id or "",
            "action": "approve",
            "args": '{"account_id": Infinity}',
        }
        infinite = await client.post("/ui/decide", data=approve)
        assert infinite.status_code == 422 and "Infinity is not a number JSON allows" in infinite.text
    # Nothing was decided: both runs still wait.
    for run_id in (asked.run_id, waiting.run_id):
        stored = await rt.store.load_run(run_id)
        assert stored is not None and stored.status == "suspended"
