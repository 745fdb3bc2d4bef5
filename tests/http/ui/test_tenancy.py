"""The web UI follows the HTTP server's tenancy: a key sees its owner's sessions only, an admin key all.

Two owners (alice, bob) and an admin (ops) on one server: each owner's lists, counts, inbox,
plots, session pages, streams and decisions cover only that owner's sessions; another owner's
session is 404 exactly like one that does not exist, and nothing of it is decided or changed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Page, expect

from repertory.core.state import RunState
from repertory.core.tree import SessionStatus
from repertory.tree.handle import SessionHandle
from tests.http.ui.conftest import ADMIN, ALICE, BOB, UiServer, crash, logged_in, login

pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass
class Owned:
    """One owner's scene: a session waiting for approval, and a run left running by a dead process."""

    waiting: SessionHandle
    run: RunState
    stale: RunState


async def _scene(ui_server: UiServer, owner: str) -> Owned:
    rt = ui_server.runtime
    waiting = await rt.create_session(agent="assistant", title=f"tenancy-{owner}", owner=owner)
    result = await waiting.run(f"delete acct-{owner}")
    assert result.status == "suspended"
    crashed = await rt.create_session(agent="assistant", title=f"tenancy-{owner}-crashed", owner=owner)
    done = await crashed.run("hello")
    return Owned(waiting, result.state, await crash(rt, done))


def _counts(page: str) -> dict[str, int]:
    listed = page.split('aria-label="Sessions by status"', 1)[1].split("</ul>", 1)[0]
    running, suspended, error = (int(n) for n in re.findall(r"<strong>(\d+)</strong>", listed))
    return {"running": running, "suspended": suspended, "error": error}


async def _decide(client: httpx.AsyncClient, token: str, owned: Owned) -> httpx.Response:
    on = owned.run.suspended_on
    assert on is not None
    form = {
        "csrf": token,
        "session_id": owned.waiting.id,
        "run_id": owned.run.run_id,
        "tool_call_id": on.tool_call_id,
        "action": "approve",
        "back": "approvals",
    }
    return await client.post("/ui/decide", data=form)


async def test_each_owner_sees_only_their_sessions_and_the_admin_sees_all(ui_server: UiServer) -> None:
    store = ui_server.runtime.store
    alice, bob = await _scene(ui_server, "alice"), await _scene(ui_server, "bob")
    for key, mine, theirs in ((ALICE, alice, bob), (BOB, bob, alice)):
        owner = "alice" if key == ALICE else "bob"
        other = "bob" if key == ALICE else "alice"
        async with logged_in(ui_server.url, key) as (client, token):
            listed = await client.get("/ui/", params={"q": "tenancy", "scope": "all"})
            assert f"tenancy-{owner}" in listed.text and f"tenancy-{other}" not in listed.text
            expected: dict[SessionStatus, int] = await store.session_counts(owner=owner)
            assert _counts(listed.text) == expected and expected["suspended"] >= 1
            inbox = await client.get("/ui/approvals")
            assert f"acct-{owner}" in inbox.text and f"acct-{other}" not in inbox.text
            assert f"acct-{other}" not in (await client.get("/ui/approvals/list")).text
            attention = await client.get("/ui/runs")
            assert mine.stale.run_id[:12] in attention.text and theirs.stale.run_id[:12] not in attention.text
            assert (await client.get(f"/ui/sessions/{mine.waiting.id}")).status_code == 200

            # Another owner's session is answered like one that does not exist, on every route.
            nowhere = await client.get("/ui/sessions/no-such-session")
            assert nowhere.status_code == 404
            sid = theirs.waiting.id
            for path in ("", "/conversation", "/panel", "/live"):
                answer = await client.get(f"/ui/sessions/{sid}{path}")
                assert answer.status_code == 404, path
                assert f"tenancy-{other}" not in answer.text and f"acct-{other}" not in answer.text
            page = await client.get(f"/ui/sessions/{sid}")
            assert page.text.replace(sid, "X") == nowhere.text.replace("no-such-session", "X")
            turns_before = len(await store.list_turns(sid))
            assert (
                await client.post(f"/ui/sessions/{sid}/send", data={"csrf": token, "message": "hi"})
            ).status_code == 404
            assert (await client.post(f"/ui/sessions/{sid}/fork", data={"csrf": token})).status_code == 404
            assert (await _decide(client, token, theirs)).status_code == 404
            recover = await client.post(f"/ui/runs/{theirs.stale.run_id}/recover", data={"csrf": token})
            assert recover.status_code == 404
            assert len(await store.list_turns(sid)) == turns_before  # nothing was sent
            assert [c.session_id for c in await store.list_children(sid)] == []  # nothing forked
            run = await store.load_run(theirs.run.run_id)
            assert run is not None and run.status == "suspended"
            assert [a.decision for a in run.approvals] == [None]  # nothing decided
            stale = await store.load_run(theirs.stale.run_id)
            assert stale is not None and stale.status == "running"  # nothing recovered
            activity = await client.get("/ui/activity")
            shown = int(re.findall(r"The latest (\d+) runs", activity.text)[0])
            runs = await store.list_runs()
            owned = {s.session_id for s in await store.list_sessions() if s.owner == owner}
            assert shown == len([r for r in runs if r.thread_id in owned])

    async with logged_in(ui_server.url, ADMIN) as (client, token):
        listed = await client.get("/ui/", params={"q": "tenancy", "scope": "all"})
        assert "tenancy-alice" in listed.text and "tenancy-bob" in listed.text
        assert _counts(listed.text) == await store.session_counts()
        inbox = await client.get("/ui/approvals")
        assert "acct-alice" in inbox.text and "acct-bob" in inbox.text
        for scene in (alice, bob):
            assert (await client.get(f"/ui/sessions/{scene.waiting.id}")).status_code == 200
        attention = await client.get("/ui/runs")
        assert alice.stale.run_id[:12] in attention.text and bob.stale.run_id[:12] in attention.text
        decided = await _decide(client, token, bob)
        assert decided.status_code == 200 and "Approved" in decided.text
        recovered = await client.post(f"/ui/runs/{alice.stale.run_id}/recover", data={"csrf": token})
        assert recovered.status_code == 200 and "Recovered run" in recovered.text
    run = await store.load_run(bob.run.run_id)
    assert run is not None and [a.decision for a in run.approvals] == ["approved"]
    approval = run.approvals[0].approval
    assert isinstance(approval, dict) and approval["principal"] == {"kind": "user", "id": "ops"}  # who decided


async def test_in_the_browser_an_owner_sees_only_theirs(page: Page, ui_server: UiServer, shots: Path) -> None:
    rt = ui_server.runtime
    mine = await rt.create_session(agent="assistant", title="browser-bob", owner="bob")
    await mine.run("delete acct-bob-browser")
    theirs = await rt.create_session(agent="assistant", title="browser-alice", owner="alice")
    await theirs.run("delete acct-alice-browser")
    await login(page, BOB)
    await page.goto("/ui/?q=browser-")
    rows = page.locator("table.list tbody tr")
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_contain_text("browser-bob")
    await page.goto("/ui/approvals")
    cards = page.locator("#inbox section.card")
    await expect(cards.filter(has_text="acct-bob-browser")).to_have_count(1)
    await expect(cards.filter(has_text="acct-alice-browser")).to_have_count(0)
    await page.screenshot(path=shots / "tenancy-bob-approvals.png", full_page=True)
    answer = await page.goto(f"/ui/sessions/{theirs.id}")
    assert answer is not None and answer.status == 404
    await expect(page.locator("main")).not_to_contain_text("browser-alice")
    await page.get_by_role("button", name="Log out").click()
    await login(page, ADMIN)
    await page.goto("/ui/?q=browser-")
    await expect(rows).to_have_count(2)
    await page.goto("/ui/approvals")
    await expect(cards.filter(has_text="acct-alice-browser")).to_have_count(1)
    await expect(cards.filter(has_text="acct-bob-browser")).to_have_count(1)
    await page.screenshot(path=shots / "tenancy-admin-approvals.png", full_page=True)
