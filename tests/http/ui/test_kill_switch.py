"""The web UI's kill switch and its "Running now": a session's Cancel button and the runs page's open turns.

A ``lead`` session delegates ``stream NAME`` to an ``assistant`` child that streams and waits for
``gate(NAME)`` (``agents.py``): the lead's turn and the child's run until something stops them. In
a real browser, Cancel asks for a confirmation first: dismissed, nothing is cancelled; accepted,
the lead's turn and its child's end ``cancelled``. Over plain HTTP: a post without the confirmation
asks on the page (no JavaScript), another owner's session is 404 and nothing of it is cancelled,
and the runs page lists exactly the open turns the viewer's tenancy covers with each tree's spend.
"""

from __future__ import annotations

import asyncio
import html
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.async_api import Dialog, Page, Request, expect

from repertory import Principal, Runtime
from repertory.core.budget import Budget, BudgetStore, tree_scope
from repertory.tree.fleet import running_turns
from repertory.tree.handle import SessionHandle, TurnHandle
from tests.http.ui.agents import gate
from tests.http.ui.conftest import ADMIN, BOB, UiServer, logged_in, login

pytestmark = pytest.mark.asyncio(loop_scope="module")

CONFIRM = "Cancel every queued, running and waiting turn of this session and of every session it spawned?"
CANCELLED = "Cancelled: no turn of this session or its descendants is left queued, running or waiting."


@dataclass
class Delegating:
    """A lead whose turn waits on its child's streaming turn."""

    lead: SessionHandle
    turn: TurnHandle
    child: SessionHandle
    gate: str


async def _delegating(rt: Runtime, owner: str, name: str) -> Delegating:
    """A ``lead`` of ``owner`` delegating ``stream NAME``: returns once the child's turn is running."""
    lead = await rt.create_session(agent="lead", title=f"lead {name}", principal=Principal.user(owner), owner=owner)
    turn = await lead.send(f"stream {name}")
    async with asyncio.timeout(10):
        while True:  # the child is the model's to spawn: there is no handle of it to await yet
            children = await lead.children()
            if children and await rt.store.list_turns(children[0].id, ["running"]):
                return Delegating(lead, turn, children[0], name)
            await asyncio.sleep(0.02)


async def _statuses(rt: Runtime, scene: Delegating) -> list[list[str]]:
    return [[t.status for t in await rt.store.list_turns(h.id)] for h in (scene.lead, scene.child)]


async def test_cancel_asks_first_and_stops_the_session_and_its_child(
    page: Page, ui_server: UiServer, shots: Path
) -> None:
    rt = ui_server.runtime
    scene = await _delegating(rt, "alice", "kill-1")
    posted: list[str] = []

    def cancel_posts(request: Request) -> None:
        if request.method == "POST" and request.url.endswith("/cancel"):
            posted.append(request.url)

    page.on("request", cancel_posts)
    await login(page)
    await page.goto(f"/ui/sessions/{scene.lead.id}")
    panel = page.get_by_role("region", name="Session")
    cancel = panel.get_by_role("button", name="Cancel")
    await expect(cancel).to_be_visible()
    await page.screenshot(path=shots / "kill-switch.png", full_page=True)

    asked: list[str] = []

    async def answer(accept: bool) -> None:
        """Click Cancel and answer the browser's confirmation; returns once it was answered."""
        answered = asyncio.Event()

        async def handle(dialog: Dialog) -> None:
            asked.append(dialog.message)
            await (dialog.accept() if accept else dialog.dismiss())
            answered.set()

        page.once("dialog", handle)
        await cancel.click()
        async with asyncio.timeout(10):
            await answered.wait()

    await answer(accept=False)
    assert asked == [CONFIRM]
    assert posted == []  # dismissed: nothing was sent
    assert await _statuses(rt, scene) == [["running"], ["running"]]

    await answer(accept=True)
    await expect(page.get_by_role("status").filter(has_text=CANCELLED)).to_be_visible()
    await expect(page).to_have_url(re.compile(rf"/ui/sessions/{scene.lead.id}\?done=cancelled$"))
    assert asked == [CONFIRM, CONFIRM] and len(posted) == 1
    assert await _statuses(rt, scene) == [["cancelled"], ["cancelled"]]
    await expect(panel.get_by_role("button", name="Cancel")).to_have_count(0)  # nothing left to cancel
    await page.screenshot(path=shots / "kill-switch-cancelled.png", full_page=True)
    gate(scene.gate).set()


async def test_a_post_without_confirmation_asks_on_the_page_and_cancels_nothing(ui_server: UiServer) -> None:
    rt = ui_server.runtime
    scene = await _delegating(rt, "alice", "kill-2")
    try:
        async with logged_in(ui_server.url) as (client, token):
            url = f"/ui/sessions/{scene.lead.id}/cancel"
            assert (await client.post(url, data={"confirmed": "1"})).status_code == 403  # no form token
            asked = await client.post(url, data={"csrf": token})
            assert asked.status_code == 200 and "Yes, cancel them" in asked.text
            assert html.escape(CONFIRM, quote=False) in asked.text
            assert await _statuses(rt, scene) == [["running"], ["running"]]
            done = await client.post(url, data={"csrf": token, "confirmed": "1"})
            assert done.status_code == 303
            assert done.headers["location"] == f"/ui/sessions/{scene.lead.id}?done=cancelled"
            assert await _statuses(rt, scene) == [["cancelled"], ["cancelled"]]
            shown = await client.get(done.headers["location"])
            assert CANCELLED in shown.text and ">Cancel</button>" not in shown.text
            # With htmx (the browser confirmed): the page to go to, in HX-Redirect.
            again = await client.post(url, data={"csrf": token, "confirmed": "1"}, headers={"HX-Request": "true"})
            assert again.status_code == 204 and again.headers["hx-redirect"].endswith("?done=cancelled")
    finally:
        gate(scene.gate).set()


async def test_another_owners_session_cannot_be_cancelled_and_a_missing_one_is_404(ui_server: UiServer) -> None:
    rt = ui_server.runtime
    scene = await _delegating(rt, "alice", "kill-3")
    try:
        async with logged_in(ui_server.url, BOB) as (client, token):
            for target in (scene.lead.id, scene.child.id, "no-such-session"):
                answer = await client.post(f"/ui/sessions/{target}/cancel", data={"csrf": token, "confirmed": "1"})
                assert answer.status_code == 404, target
            page = await client.get(f"/ui/sessions/{scene.lead.id}")
            assert page.status_code == 404
        assert await _statuses(rt, scene) == [["running"], ["running"]]
        async with logged_in(ui_server.url, ADMIN) as (client, token):
            page = await client.get(f"/ui/sessions/{scene.child.id}")
            assert ">Cancel</button>" in page.text  # the child's own turn is open: it has the button too
            answer = await client.post(f"/ui/sessions/{scene.lead.id}/cancel", data={"csrf": token, "confirmed": "1"})
            assert answer.status_code == 303
        assert await _statuses(rt, scene) == [["cancelled"], ["cancelled"]]
    finally:
        gate(scene.gate).set()


def _running_rows(page: str) -> str:
    section = page.split('id="h-running"', 1)[1].split("</section>", 1)[0]
    return section.split("<tbody>", 1)[1]


async def test_the_runs_page_lists_the_open_turns_the_viewer_may_see_with_each_trees_spend(
    ui_server: UiServer,
) -> None:
    rt = ui_server.runtime
    alices = await _delegating(rt, "alice", "kill-4")
    bobs = await _delegating(rt, "bob", "kill-5")
    store = rt.store
    budgeted = isinstance(store, BudgetStore)
    if budgeted:
        assert isinstance(store, BudgetStore)
        await store.set_budget(tree_scope(alices.lead.id), Budget(max_tokens=90_000, max_cost=1.5))
    try:
        async with logged_in(ui_server.url) as (client, _):
            rows = _running_rows((await client.get("/ui/runs")).text)
        for turn in await running_turns(store, owner="alice"):
            assert f"/ui/sessions/{turn.session_id}" in rows
        assert alices.lead.id in rows and alices.child.id in rows
        assert bobs.lead.id not in rows and bobs.child.id not in rows
        mine = [t for t in await running_turns(store, owner="alice") if t.root_id == alices.lead.id]
        assert {t.session_id for t in mine} == {alices.lead.id, alices.child.id}
        spend = mine[0].tree_spend
        assert f'<td class="num">{spend.tokens:,}</td><td class="num">{spend.model_requests:,}</td>' in rows
        # The lead's request that delegated; the child's, held mid-stream, has no checkpoint yet.
        assert spend.model_requests == 1 and spend.tokens > 0
        assert ("max $1.5000, max 90,000 tokens" in rows) == budgeted
        async with logged_in(ui_server.url, ADMIN) as (client, _):
            every = _running_rows((await client.get("/ui/runs")).text)
        assert alices.lead.id in every and bobs.lead.id in every and bobs.child.id in every
    finally:
        for scene in (alices, bobs):
            await scene.lead.cancel(tree=True)
            gate(scene.gate).set()
    async with logged_in(ui_server.url, ADMIN) as (client, _):
        after = _running_rows((await client.get("/ui/runs")).text)
    assert alices.lead.id not in after and bobs.lead.id not in after
