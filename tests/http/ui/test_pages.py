"""The web UI over plain HTTP: CSRF, login redirects, the live stream's resume point, races, attention, plots."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from repertory import Principal, Runtime
from repertory.http import create_app
from repertory.http.ui.decisions import Decider
from repertory.http.ui.plots import Bar, bars
from tests.http.ui.agents import make_agents
from tests.http.ui.conftest import ALICE, UiServer, crash, form_token, logged_in

pytestmark = pytest.mark.asyncio(loop_scope="module")
ALICE_P = Principal.user("alice")


async def test_every_form_post_needs_the_pages_token_and_origin(ui_server: UiServer) -> None:
    handle = await ui_server.runtime.create_session(agent="assistant", title="csrf", principal=ALICE_P, owner="alice")
    async with logged_in(ui_server.url) as (client, token):
        send = f"/ui/sessions/{handle.id}/send"
        assert (await client.post(send, data={"message": "hi"})).status_code == 403
        assert (await client.post(send, data={"message": "hi", "csrf": "forged"})).status_code == 403
        other = await client.post(send, data={"message": "hi", "csrf": token}, headers={"Origin": "https://evil.test"})
        assert other.status_code == 403
        assert await ui_server.runtime.store.list_turns(handle.id) == []  # nothing was sent
        sent = await client.post(send, data={"message": "hello", "csrf": token})
        assert sent.status_code == 303
        assert len(await ui_server.runtime.store.list_turns(handle.id)) == 1
        # The key itself is no cookie of this UI; and another login's session cannot use this one's token.
        async with httpx.AsyncClient(base_url=ui_server.url, cookies={"repertory_key": ALICE}) as stranger:
            assert (await stranger.post(send, data={"message": "hi", "csrf": token})).status_code == 401
        async with logged_in(ui_server.url) as (other_login, _):
            assert (await other_login.post(send, data={"message": "hi", "csrf": token})).status_code == 403


async def test_pages_need_a_login_and_login_goes_back_only_to_this_ui(ui_server: UiServer) -> None:
    async with httpx.AsyncClient(base_url=ui_server.url) as client:
        answer = await client.get("/ui/runs")
        assert answer.status_code == 303 and answer.headers["location"] == "/ui/login?next=%2Fui%2Fruns"
        live = await client.get("/ui/sessions/x/live")
        assert live.status_code == 401
        token = form_token((await client.get("/ui/login")).text)
        answer = await client.post("/ui/login", data={"csrf": token, "key": ALICE, "next": "https://evil.test/"})
        assert answer.headers["location"] == "/ui/"
        cookie = answer.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "path=/ui" in cookie
        page = await client.get("/ui/")
        assert "script-src 'self'" in page.headers["content-security-policy"]
        missing = await client.get("/ui/sessions/<nope>")
        assert missing.status_code == 404 and "&lt;nope&gt;" in missing.text and "<nope>" not in missing.text


async def test_the_live_stream_resumes_after_the_last_event_id(ui_server: UiServer) -> None:
    handle = await ui_server.runtime.create_session(agent="assistant", title="resume", principal=ALICE_P, owner="alice")
    await handle.run("research lava")
    last = await ui_server.runtime.store.last_event_seq(handle.id)
    assert last > 4
    async with logged_in(ui_server.url) as (client, _):

        async def first_id(**kw: object) -> tuple[int, str]:
            async with client.stream("GET", f"/ui/sessions/{handle.id}/live", **kw) as stream:  # type: ignore[arg-type]
                assert stream.headers["content-type"].startswith("text/event-stream")
                event = ""
                async for line in stream.aiter_lines():
                    if line.startswith("event: "):
                        event = line.removeprefix("event: ")
                    if line.startswith("id: "):
                        return int(line.removeprefix("id: ")), event
            raise AssertionError("the stream ended without an event id")

        assert (await first_id(params={"after": 0}))[0] == 1
        assert (await first_id(params={"after": 0}, headers={"Last-Event-ID": "3"}))[0] == 4
        stored = await ui_server.runtime.store.load_events(handle.id, after_seq=3)
        checkpoint = next(e for e in stored if e.type == "checkpoint")
        assert checkpoint.seq is not None
        seq, event = await first_id(headers={"Last-Event-ID": str(checkpoint.seq - 1)})
        assert (seq, event) == (checkpoint.seq, "items")  # a checkpoint arrives as rendered messages


async def test_two_decisions_of_one_call_decide_it_once(ui_server: UiServer) -> None:
    decider, other = Decider(ui_server.runtime), Decider(ui_server.runtime)  # another server, say
    for first, second in ((decider, decider), (decider, other)):
        handle = await ui_server.runtime.create_session(
            agent="assistant", title="twice", principal=ALICE_P, owner="alice"
        )
        result = await handle.run("delete acct-twice")
        [pending] = await handle.pending_approvals()
        assert pending.tool_call_id is not None
        outcomes = await asyncio.gather(
            first.decide(handle, result.run_id, pending.tool_call_id, "approve"),
            second.decide(handle, result.run_id, pending.tool_call_id, "reject", reason="no"),
        )
        assert sorted(o.kind for o in outcomes) == ["ok", "raced"], outcomes
        await asyncio.gather(first.settle(), second.settle())  # the loser's token is refused, nothing more
        run = await ui_server.runtime.store.load_run(result.run_id)
        assert run is not None and run.status == "done"
        [record] = run.approvals
        assert record.decision == ("approved" if outcomes[0].kind == "ok" else "rejected")
        assert record.decided_by == "user:alice"  # the viewer's principal, stamped by the host


async def test_a_run_left_running_is_listed_and_recovered(ui_server: UiServer) -> None:
    store = ui_server.runtime.store
    handle = await ui_server.runtime.create_session(
        agent="assistant", title="crashed", principal=ALICE_P, owner="alice"
    )
    done = await handle.run("hello")
    # What a process that died mid-run leaves behind: the run still 'running', its last checkpoint old.
    await crash(ui_server.runtime, done)
    async with logged_in(ui_server.url) as (client, token):
        page = await client.get("/ui/runs")
        assert done.run_id[:12] in page.text and "Recover" in page.text
        recovered = await client.post(f"/ui/runs/{done.run_id}/recover", data={"csrf": token})
        assert recovered.status_code == 200 and f"Recovered run {done.run_id}: it is done now." in recovered.text
        run = await store.load_run(done.run_id)
        assert run is not None and run.status == "done"
        # Through the tree: the turn ended with its run, and its log says so once more, last.
        [turn] = [t for t in await store.list_turns(handle.id) if t.run_id == done.run_id]
        assert turn.status == "done"
        events = await store.load_events(handle.id)
        assert events[-1].type == "turn.completed" and events[-1].submission_id == turn.submission_id
        again = await client.post(f"/ui/runs/{done.run_id}/recover", data={"csrf": token})
        assert "no longer stale" in again.text


async def test_activity_plots_are_inline_svg_with_escaped_labels(ui_server: UiServer) -> None:
    handle = await ui_server.runtime.create_session(agent="assistant", title="plots", principal=ALICE_P, owner="alice")
    await handle.run("hello")
    async with logged_in(ui_server.url) as (client, _):
        page = await client.get("/ui/activity")
    assert page.status_code == 200 and page.text.count("<svg") == 5
    assert "&lt;b&gt;" in bars("t", [Bar("<b>", 3)]) and "<b>" not in bars("t", [Bar("<b>", 3)])


async def test_without_keys_the_ui_is_open() -> None:
    async with await Runtime.start(store="memory://", agents=make_agents()) as rt:
        await rt.create_session(agent="helper", title="open door")
        app = create_app(rt)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://ui.test") as client:
            page = await client.get("/ui/")
            assert page.status_code == 200 and "open door" in page.text and "Log out" not in page.text
            assert (await client.get("/ui/login")).status_code == 303
            assert (await client.get("/ui")).status_code in (307, 308)


async def test_resume_tokens_never_reach_a_page(ui_server: UiServer) -> None:
    handle = await ui_server.runtime.create_session(
        agent="assistant", title="secret token", principal=ALICE_P, owner="alice"
    )
    await handle.run("delete acct-token")
    [pending] = await handle.pending_approvals()
    async with logged_in(ui_server.url) as (client, _):
        pages = [
            await client.get(path)
            for path in (
                "/ui/approvals",
                "/ui/approvals/list",
                f"/ui/sessions/{handle.id}",
                f"/ui/sessions/{handle.id}/panel",
                f"/ui/sessions/{handle.id}/conversation",
                "/ui/?status=suspended&scope=all",
                "/ui/activity",
            )
        ]
        assert all(p.status_code == 200 for p in pages)
        assert "acct-token" in pages[0].text
        assert not [p.url for p in pages if pending.token in p.text]


async def test_a_delegated_childs_approval_waits_on_the_parents_page_and_is_decided_there(ui_server: UiServer) -> None:
    rt = ui_server.runtime
    lead = await rt.create_session(agent="lead", title="delegates", principal=ALICE_P, owner="alice")
    turn = await lead.send("delete acct-deep")
    for _ in range(500):  # the child is spawned by the lead's model: there is nothing to await
        pending = await lead.pending_approvals(tree=True)
        if pending:
            break
        await asyncio.sleep(0.01)
    [waiting] = pending
    assert waiting.session_id is not None and waiting.session_id != lead.id and waiting.tool_call_id is not None
    [run] = await rt.store.list_runs(waiting.session_id, statuses=["suspended"])
    child = await rt.store.load_session(waiting.session_id)
    assert child is not None and child.owner == "alice"  # a delegated child is its tenant's, as a spawned one is
    async with logged_in(ui_server.url) as (client, token):
        page = await client.get(f"/ui/sessions/{lead.id}")
        assert page.status_code == 200 and "acct-deep" in page.text and 'name="page" value="' + lead.id in page.text
        decided = await client.post(
            "/ui/decide",
            data={
                "csrf": token,
                "session_id": waiting.session_id,
                "page": lead.id,
                "run_id": run.run_id,
                "tool_call_id": waiting.tool_call_id,
                "action": "approve",
                "back": "session",
            },
        )
        assert decided.status_code == 200 and "delegates" in decided.text  # the lead's page again
    result = await asyncio.wait_for(turn.result(), 10)
    assert result.status == "done" and result.text is not None and "acct-deep" in result.text
    assert await lead.pending_approvals(tree=True) == []
