"""The web UI in a real browser: login, the sessions list, a session, live runs, approvals, escaping.

Each test sets its scene through the runtime, then looks and clicks as a person would, by role
and accessible name (``Approve``, ``Reject``, ``Resume``, ``Send``: docs/guides/web-ui.md), and keeps
a screenshot of what it saw.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, Route, expect

from repertory import Principal
from tests.http.ui.agents import gate
from tests.http.ui.conftest import ALICE, UiServer, login

pytestmark = pytest.mark.asyncio(loop_scope="module")

ALICE_P = Principal.user("alice")


async def test_login_keeps_a_session_id_in_a_strict_http_only_cookie(page: Page, shots: Path) -> None:
    await page.goto("/ui/approvals")
    await expect(page).to_have_url(re.compile(r"/ui/login\?next=%2Fui%2Fapprovals$"))
    await page.get_by_label("API key").fill("not-a-key")
    await page.get_by_role("button", name="Log in").click()
    await expect(page.get_by_role("alert")).to_have_text("That key is not valid.")
    await page.screenshot(path=shots / "login-refused.png")
    await page.get_by_label("API key").fill(ALICE)
    await page.get_by_role("button", name="Log in").click()
    await expect(page).to_have_url(re.compile(r"/ui/approvals$"))
    await expect(page.get_by_role("heading", name="Approvals")).to_be_visible()
    cookie = next(c for c in await page.context.cookies() if c["name"] == "repertory_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui"
    assert ALICE not in cookie["value"]  # a server-side session's id, never the key
    assert await page.evaluate("document.cookie") == ""  # nothing a script can read
    await page.get_by_role("button", name="Log out").click()
    await expect(page).to_have_url(re.compile(r"/ui/login$"))


async def test_a_session_with_tool_calls_and_a_notification(page: Page, ui_server: UiServer, shots: Path) -> None:
    rt = ui_server.runtime
    handle = await rt.create_session(agent="assistant", title="Research trip", principal=ALICE_P, owner="alice")
    await handle.run("research volcanoes")
    await (await handle.notify(title="Build finished", body="All 12 checks passed.")).result()
    child = await handle.spawn(title="helper child")
    await child.run("hello there")
    await login(page)
    await page.goto(f"/ui/sessions/{handle.id}")
    conversation = page.locator("#conversation")
    user = conversation.locator("article.user").first
    await expect(user).to_contain_text("research volcanoes")
    await expect(user).to_contain_text("from user alice")
    call = conversation.get_by_role("region", name="Tool call lookup")
    await expect(call).to_contain_text('"q": "volcanoes"')
    await expect(call).to_contain_text("facts about volcanoes")
    reasoning = conversation.locator("details.reasoning").first
    await expect(reasoning).not_to_have_attribute("open", "")  # folded
    await expect(reasoning.locator(".text")).to_be_hidden()
    note = conversation.locator("article.notification")
    await expect(note).to_contain_text("Build finished")
    await expect(note).to_contain_text("All 12 checks passed.")
    await expect(note).to_contain_text("from system")
    await expect(conversation.locator("article.notification + article.assistant")).to_have_count(1)  # it drove a turn
    runs = page.get_by_role("region", name="Runs")
    await expect(runs.locator("tbody tr")).to_have_count(2)
    tree = page.get_by_role("region", name="Tree")
    await expect(tree).to_contain_text("helper child")
    await expect(tree).to_contain_text("with its subtree")
    await page.screenshot(path=shots / "session.png", full_page=True)
    await tree.get_by_label("Title of the fork").fill("what if")
    await tree.get_by_role("button", name="Fork").click()
    await expect(page.get_by_role("heading", name="what if")).to_be_visible()
    await expect(page.get_by_role("region", name="Session")).to_contain_text("forked of Research trip")
    await expect(page.locator("#conversation")).to_contain_text("research volcanoes")  # the shared history


async def _suspended(ui_server: UiServer, prompt: str, title: str) -> str:
    """A session whose turn waits for a human after ``prompt``; returns its id."""
    handle = await ui_server.runtime.create_session(agent="assistant", title=title, principal=ALICE_P, owner="alice")
    result = await handle.run(prompt)
    assert result.status == "suspended"
    return handle.id


async def test_approvals_approved_edited_and_rejected(page: Page, ui_server: UiServer, shots: Path) -> None:
    plain = await _suspended(ui_server, "delete acct-plain", "Approve me")
    edited = await _suspended(ui_server, "delete acct-typo", "Edit me")
    rejected = await _suspended(ui_server, "delete acct-keep", "Reject me")
    await login(page)
    await page.goto("/ui/approvals")
    cards = page.locator("#inbox section.card")
    await expect(cards.filter(has_text="Approve me")).to_have_count(1)
    first = cards.filter(has_text="Approve me").first
    await expect(first).to_contain_text('"account_id": "acct-plain"')
    await expect(first).to_contain_text("delete_account")
    await page.screenshot(path=shots / "approvals.png", full_page=True)

    await first.get_by_role("button", name="Approve").click()
    await expect(page.get_by_role("status").filter(has_text="Approved")).to_be_visible()
    await expect(cards.filter(has_text="Approve me")).to_have_count(0)

    card = cards.filter(has_text="Edit me").first
    args = card.get_by_label("Arguments")
    await args.fill("{not json")
    await card.get_by_role("button", name="Approve").click()
    await expect(card.get_by_role("alert")).to_contain_text("not JSON")
    await args.fill(json.dumps({"account_id": 42}))
    await card.get_by_role("button", name="Approve").click()
    await expect(card.get_by_role("alert")).to_contain_text("do not fit delete_account")
    await page.screenshot(path=shots / "approval-invalid-edit.png", full_page=True)
    await expect(args).to_have_value('{"account_id": 42}')  # what the person typed is kept
    await args.fill(json.dumps({"account_id": "acct-fixed"}))
    await card.get_by_role("button", name="Approve").click()
    await expect(cards.filter(has_text="Edit me")).to_have_count(0)

    card = cards.filter(has_text="Reject me").first
    await card.get_by_label("Reason, if you reject").fill("that account stays")
    await card.get_by_role("button", name="Reject").click()
    await expect(cards.filter(has_text="Reject me")).to_have_count(0)

    for sid, said in ((plain, "deleted acct-plain"), (edited, "deleted acct-fixed")):
        await page.goto(f"/ui/sessions/{sid}")
        call = page.get_by_role("region", name="Tool call delete_account")
        await expect(call).to_contain_text(said)
        await expect(call).to_contain_text("approved")
        await expect(call).to_contain_text("by user alice")
    await expect(call).to_contain_text("with edited arguments")
    await expect(call.locator("pre.args").last).to_contain_text('"account_id": "acct-fixed"')  # what it ran with
    await page.screenshot(path=shots / "session-approved-edited.png", full_page=True)
    await page.goto(f"/ui/sessions/{rejected}")
    call = page.get_by_role("region", name="Tool call delete_account")
    await expect(call).to_contain_text("rejected")
    await expect(call).to_contain_text("reason: that account stays")
    await expect(call.locator(".result.error")).to_contain_text("that account stays")
    await expect(page.locator("#conversation article.assistant").last).to_contain_text("(error)")


async def test_a_suspension_resumed_with_a_value(page: Page, ui_server: UiServer, shots: Path) -> None:
    sid = await _suspended(ui_server, "ask", "Ask me")
    await login(page)
    await page.goto(f"/ui/sessions/{sid}")  # decided from the session page this time
    card = page.get_by_role("region", name="Question: ask_human")
    await expect(card).to_contain_text("which color?")
    await card.get_by_label("Answer", exact=True).fill("blue")
    await card.get_by_role("button", name="Resume").click()
    await expect(page.locator("#conversation article.assistant").last).to_contain_text("you said blue")
    await expect(page.locator("#conversation article.user").last).to_contain_text("from user alice")
    await page.screenshot(path=shots / "resumed.png", full_page=True)


async def test_a_raced_decision_says_so_and_refreshes(page: Page, ui_server: UiServer, shots: Path) -> None:
    sid = await _suspended(ui_server, "delete acct-race", "Race me")
    await login(page)
    await page.goto("/ui/approvals")
    card = page.locator("#inbox section.card").filter(has_text="Race me")
    await expect(card).to_have_count(1)
    handle = await ui_server.runtime.session(sid, principal=Principal.user("bob"))
    [pending] = await handle.pending_approvals()
    await handle.reject(pending.token, "bob was faster")  # decided elsewhere while the page was open
    await card.get_by_role("button", name="Approve").click()
    await expect(page.get_by_role("alert")).to_contain_text("already decided")
    await expect(card).to_have_count(0)  # the list was refreshed
    await page.screenshot(path=shots / "raced.png", full_page=True)
    await page.goto(f"/ui/sessions/{sid}")
    call = page.get_by_role("region", name="Tool call delete_account")
    await expect(call).to_contain_text("rejected")  # bob's decision, taken once
    await expect(call).to_contain_text("bob was faster")


async def test_the_live_stream_of_a_running_turn(page: Page, ui_server: UiServer, shots: Path) -> None:
    handle = await ui_server.runtime.create_session(
        agent="assistant", title="Live one", principal=ALICE_P, owner="alice"
    )
    await login(page)
    await page.goto(f"/ui/sessions/{handle.id}")
    await expect(page.locator("#session[data-connected='1']")).to_have_count(1)
    await page.get_by_label("Message").fill("stream live-1")
    await page.get_by_role("button", name="Send").click()
    await expect(page.locator("#send").get_by_role("status")).to_contain_text("Sent")
    # The model has written its first words and now waits: they show while the turn runs.
    live = page.locator("#live")
    await expect(live).to_be_visible()
    await expect(live).to_contain_text("Streaming the first words")
    await expect(page.locator("#conversation article.user")).to_contain_text("stream live-1")  # from its turn row
    await expect(page.locator("#panel")).to_have_attribute("data-status", "running")
    await page.get_by_label("Message").fill("hello again")  # a follow-up, queued behind the running turn
    await page.get_by_role("button", name="Send").click()
    queued = page.get_by_role("region", name="Follow-ups queued")
    await expect(queued).to_contain_text("hello again")
    await page.screenshot(path=shots / "live-running.png", full_page=True)
    gate("live-1").set()
    replies = page.locator("#conversation article.assistant")
    await expect(replies.last).to_contain_text("Hello! How can I help?")  # the follow-up ran after it
    await expect(replies.nth(0)).to_contain_text("Streaming the first words, and the rest.")
    await expect(queued).to_have_count(0)
    await expect(live).to_be_hidden()
    await expect(page.locator("#panel")).to_have_attribute("data-status", "idle")
    await page.screenshot(path=shots / "live-done.png", full_page=True)


async def test_a_page_loaded_mid_reply_shows_the_text_so_far(page: Page, ui_server: UiServer, shots: Path) -> None:
    # The reply's deltas are in the session's log (the agent's delta window), so a page opened while
    # the model is still writing starts its live feed before them and shows the partial reply.
    handle = await ui_server.runtime.create_session(
        agent="assistant", title="Reloaded", principal=ALICE_P, owner="alice"
    )
    turn = await handle.send("stream reload-1")
    await login(page)
    await page.goto(f"/ui/sessions/{handle.id}")
    live = page.locator("#live")
    await expect(live).to_contain_text("Streaming the first words")
    await page.reload()
    await expect(page.locator("#session[data-connected='1']")).to_have_count(1)
    await expect(live).to_contain_text("Streaming the first words")  # from the log, not from the model
    await page.screenshot(path=shots / "live-reloaded.png", full_page=True)
    gate("reload-1").set()
    await turn.result()
    await expect(page.locator("#conversation article.assistant").last).to_contain_text(
        "Streaming the first words, and the rest."
    )
    await expect(live).to_be_hidden()


async def test_a_reload_asked_while_another_is_in_flight_is_not_lost(
    page: Page, ui_server: UiServer, shots: Path
) -> None:
    # A panel reload is still on its way when the turn's start asks for the conversation and the
    # panel again: the conversation's reload must not be dropped for the newer panel's.
    handle = await ui_server.runtime.create_session(
        agent="assistant", title="Slow panel", principal=ALICE_P, owner="alice"
    )
    await login(page)
    await page.goto(f"/ui/sessions/{handle.id}")
    await expect(page.locator("#session[data-connected='1']")).to_have_count(1)

    async def slow(route: Route) -> None:
        await asyncio.sleep(1.0)
        await route.continue_()

    await page.route("**/panel", slow)
    await page.evaluate("document.body.dispatchEvent(new Event('repertory-panel'))")
    await page.get_by_label("Message").fill("stream live-2")
    await page.get_by_role("button", name="Send").click()
    await expect(page.locator("#live")).to_contain_text("Streaming the first words")
    await expect(page.locator("#conversation article.user")).to_contain_text("stream live-2")
    await expect(page.locator("#panel")).to_have_attribute("data-status", "running")
    await page.unroute("**/panel")
    gate("live-2").set()
    await expect(page.locator("#conversation article.assistant").last).to_contain_text("and the rest.")
    await expect(page.locator("#panel")).to_have_attribute("data-status", "idle")
    await page.screenshot(path=shots / "reload-not-lost.png", full_page=True)


async def test_output_is_escaped(page: Page, ui_server: UiServer, shots: Path) -> None:
    evil = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
    handle = await ui_server.runtime.create_session(
        agent="assistant", title=f"title {evil}", principal=ALICE_P, owner="alice"
    )
    await handle.run(f"say {evil}")
    await login(page)
    await page.goto(f"/ui/sessions/{handle.id}")
    await expect(page.locator("#conversation article.assistant")).to_contain_text(f"echo: say {evil}")
    await page.screenshot(path=shots / "escaped.png", full_page=True)
    for path in (f"/ui/sessions/{handle.id}", "/ui/?q=title"):
        await page.goto(path)
        await expect(page.get_by_text(f"title {evil}").first).to_be_visible()  # shown as text
        assert await page.evaluate("window.pwned") is None
        assert await page.locator("main script, main img").count() == 0


async def test_the_list_filters_and_pages(page: Page, ui_server: UiServer, shots: Path) -> None:
    rt = ui_server.runtime
    made = []
    for i in range(23):
        made.append(
            await rt.create_session(agent="helper" if i % 2 else "assistant", title=f"fleet-{i:02d}", owner="alice")
        )
    failing = await rt.create_session(agent="assistant", title="fleet-failing", owner="alice")
    with pytest.raises(Exception, match="the model is down"):
        await failing.run("fail")
    waiting = await rt.create_session(agent="assistant", title="fleet-waiting", owner="alice")
    await waiting.run("delete acct-list")
    child = await made[0].spawn(title="fleet-child")
    await login(page)
    await page.goto("/ui/?q=fleet")
    rows = page.locator("table.list tbody tr")
    await expect(rows).to_have_count(25)  # roots only: the child is not listed
    await expect(rows.first).to_contain_text("fleet-waiting")  # newest first
    await expect(page.get_by_role("list", name="Sessions by status")).to_contain_text("suspended")
    await page.screenshot(path=shots / "sessions.png", full_page=True)

    await page.get_by_label("Show", exact=True).select_option("all")
    await page.get_by_role("button", name="Filter").click()
    await expect(rows).to_have_count(26)
    await expect(rows.first).to_contain_text("fleet-child")
    await expect(rows.first).to_contain_text("spawned")

    await page.get_by_label("Status", exact=True).select_option("error")
    await page.get_by_role("button", name="Filter").click()
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_contain_text("fleet-failing")
    await page.get_by_label("Status", exact=True).select_option("suspended")
    await page.get_by_role("button", name="Filter").click()
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_contain_text("fleet-waiting")

    await page.goto("/ui/?q=fleet&agent=helper")
    await expect(rows).to_have_count(11)
    await expect(page.locator("table.list tbody")).not_to_contain_text("assistant")
    await page.goto(f"/ui/?q={made[5].id}")  # an id works as a search too
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_contain_text("fleet-05")

    await page.goto("/ui/?q=fleet&limit=10")
    seen: list[str] = []
    for _ in range(3):
        seen.extend(await page.locator("table.list tbody tr td:first-child > a").all_inner_texts())
        more = page.get_by_role("link", name="Next page")
        if await more.count() == 0:
            break
        await more.click()
    assert seen == ["fleet-waiting", "fleet-failing", *[f"fleet-{i:02d}" for i in range(22, -1, -1)]]
    await expect(page.get_by_role("link", name="Next page")).to_have_count(0)
    await expect(page.get_by_role("link", name="First page")).to_be_visible()
    assert child.id not in seen


async def test_pages_read_and_decide_without_javascript(browser: Browser, ui_server: UiServer, shots: Path) -> None:
    sid = await _suspended(ui_server, "delete acct-nojs", "No script")
    context = await browser.new_context(base_url=ui_server.url, java_script_enabled=False)
    try:
        page = await context.new_page()
        await login(page)
        await page.goto(f"/ui/sessions/{sid}")
        await expect(page.locator("#conversation article.user")).to_contain_text("delete acct-nojs")
        await page.get_by_role("region", name="Approval: delete_account").get_by_role("button", name="Approve").click()
        await expect(page.get_by_role("status").filter(has_text="Approved")).to_be_visible()  # a whole new page
        [turn] = await ui_server.runtime.store.list_turns(sid)
        handle = await ui_server.runtime.session(sid)
        await handle.get_turn(turn.submission_id).result()  # the run goes on after the decision: let it finish
        await page.reload()
        await expect(page.locator("#conversation article.assistant").last).to_contain_text("deleted acct-nojs")
        await page.screenshot(path=shots / "no-javascript.png", full_page=True)
    finally:
        await context.close()


async def test_attention_and_activity_pages(page: Page, ui_server: UiServer, shots: Path) -> None:
    broken = await ui_server.runtime.create_session(
        agent="assistant", title="Broken one", principal=ALICE_P, owner="alice"
    )
    with pytest.raises(Exception, match="the model is down"):
        await broken.run("fail")
    await login(page)
    await page.goto("/ui/runs")
    failed = page.get_by_role("region", name="Failed")
    await expect(failed).to_contain_text("Broken one")
    await expect(failed).to_contain_text("ModelError: the model is down")
    await page.screenshot(path=shots / "attention.png", full_page=True)
    await page.goto("/ui/activity")
    for name in ("Tokens over time", "Runs by status", "Approval wait times (decided)"):
        await expect(page.get_by_role("img", name=name)).to_be_visible()
    await page.screenshot(path=shots / "activity.png", full_page=True)
