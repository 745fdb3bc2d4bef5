"""A React page using ``@ai-sdk/react``'s ``useChat`` (``js/aisdk_page.jsx``) in Debian's chromium, against the routes.

The page is bundled by esbuild from the lockfile's packages when the module starts (no CDN), served
from its own loopback origin (the API allows it through ``cors_origins``), and uses
``DefaultChatTransport`` with the key in its headers, ``resume: true`` and
``sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses``, as the AI SDK's
docs build a chat. Tested from the page: a chat, an approval approved and one rejected, a reload in
the middle of a reply (it resumes), and a ``repertory serve`` SIGKILLed in the middle of a reply and
started again on the same store: after a reload the page shows exactly the reply the store holds,
and none of the text the killed process streamed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest
import pytest_asyncio
import uvicorn
from playwright.async_api import Browser, Page, async_playwright, expect
from starlette.applications import Starlette
from starlette.responses import FileResponse, HTMLResponse
from starlette.routing import Route

from tests.http.protocols.aisdk_agents import DELETED
from tests.http.protocols.aisdk_support import ALICE, JS, node, served, stored_reply
from tests.http.test_serve import _serve as serve
from tests.http.ui.conftest import chromium_path

pytestmark = pytest.mark.asyncio(loop_scope="module")

_HTML = (
    '<!doctype html><meta charset="utf-8"><title>chat</title>'
    '<div id="root"></div><script type="module" src="/page.js"></script>'
)
_AGENTS = "tests.http.protocols.aisdk_agents:make_agents"


@contextlib.asynccontextmanager
async def _listening(app: Starlette, port: int = 0) -> AsyncIterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", ws="none", lifespan="off"))
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task
        sock.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def site(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """The page, bundled now by esbuild from ``js/node_modules``, on its own origin."""
    node()
    out = tmp_path_factory.mktemp("aisdk-page") / "page.js"
    esbuild = JS / "node_modules" / ".bin" / "esbuild"
    command = [str(esbuild), "aisdk_page.jsx", "--bundle", "--format=esm", "--jsx=automatic", f"--outfile={out}"]
    command += ['--define:process.env.NODE_ENV="production"', "--log-level=warning"]
    built = await asyncio.create_subprocess_exec(*command, cwd=JS, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(built.communicate(), 120)
    assert built.returncode == 0, f"esbuild failed:\n{err.decode()}"

    async def index(_: object) -> HTMLResponse:
        return HTMLResponse(_HTML)

    async def bundle(_: object) -> FileResponse:
        return FileResponse(out, media_type="text/javascript")

    async with _listening(Starlette(routes=[Route("/", index), Route("/page.js", bundle)])) as url:
        yield url


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    """Debian's chromium, through Playwright's ``executable_path`` (never a downloaded browser)."""
    async with async_playwright() as pw:
        args = ["--no-sandbox"] if os.geteuid() == 0 else []
        launched = await pw.chromium.launch(executable_path=chromium_path(), args=args)
        try:
            yield launched
        finally:
            await launched.close()


@pytest_asyncio.fixture(loop_scope="module")
async def page(browser: Browser) -> AsyncIterator[Page]:
    """A fresh context and page; an uncaught error in the page fails the test."""
    context = await browser.new_context()
    context.set_default_timeout(20_000)
    tab = await context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    try:
        yield tab
    finally:
        await context.close()
    assert not errors, f"the page failed: {errors}"


def _address(site: str, api: str, chat: str) -> str:
    return f"{site}/?{urlencode({'api': f'{api}/ai-sdk/chat/chat', 'key': ALICE, 'chat': chat})}"


async def _say(page: Page, text: str) -> None:
    await page.get_by_label("Message").fill(text)
    await page.get_by_role("button", name="Send").click()


async def _retracted(url: str, chat: str) -> bool:
    """Whether the session's stored events hold a ``reply.retracted`` (read through the events route)."""
    headers = {"x-api-key": ALICE}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as client:
        last = (await client.get(f"/threads/{chat}/runs")).json()[0]
        assert last["status"] == "success"
        async with client.stream("GET", f"/threads/{chat}/events", params={"after_seq": 0}) as events:
            async for line in events.aiter_lines():
                if line == "event: reply.retracted":
                    return True
                if line == "event: turn.completed":
                    return False
    return False


async def test_chat_and_approvals_from_the_page(site: str, page: Page, tmp_path: Path) -> None:
    async with served(f"sqlite:///{tmp_path / 'page.db'}", cors_origins=[site]) as api:
        chat = f"page-{secrets.token_hex(4)}"
        await page.goto(_address(site, api.url, chat))
        replies = page.locator('li[data-role="assistant"]')
        await _say(page, "hello there")
        await expect(replies.locator(".text")).to_have_text("Hello there, friend.")
        await expect(page.locator("#status")).to_have_text("ready")

        await _say(page, "delete p1")
        await page.get_by_role("button", name="Approve").click()
        await expect(replies.nth(1).locator(".text")).to_have_text("finished: deleted p1")
        await expect(replies.nth(1).locator(".tool")).to_have_attribute("data-state", "output-available")

        await _say(page, "delete p2")
        await page.get_by_role("button", name="Reject").click()
        await expect(replies.nth(2).locator(".text")).to_have_text("finished: not from the page (refused)")
        await expect(replies.nth(2).locator(".tool")).to_have_attribute("data-state", "output-denied")
        await expect(page.locator("#status")).to_have_text("ready")
        assert DELETED["p1"] == 1 and DELETED["p2"] == 0
        assert await replies.nth(2).locator(".text").inner_text() == await stored_reply(api.runtime, chat)
        assert await replies.count() == 3 and await page.locator('li[data-role="user"]').count() == 3


async def test_a_reload_mid_reply_resumes(
    site: str, page: Page, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPERTORY_TEST_WORD_DELAY", "0.05")
    async with served(f"sqlite:///{tmp_path / 'reload.db'}", cors_origins=[site]) as api:
        chat = f"reload-{secrets.token_hex(4)}"
        await page.goto(_address(site, api.url, chat))
        await _say(page, "slow 80")
        reply = page.locator('li[data-role="assistant"] .text')
        await expect(reply).to_contain_text("w5")
        await page.reload()
        # The page loads the stored messages, and useChat's resume replays the running turn.
        await expect(page.locator("#status")).to_have_text("streaming")
        await expect(reply).to_contain_text("w79", timeout=60_000)
        await expect(page.locator("#status")).to_have_text("ready")
        assert await reply.inner_text() == await stored_reply(api.runtime, chat)
        assert await page.locator("li.message").count() == 2


async def test_sigkill_mid_reply_then_restart_shows_the_stored_reply(site: str, page: Page, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'killed.db'}"
    options = ("--store", store, "--api-key", f"alice={ALICE}", "--cors-origin", site)
    env = {"REPERTORY_TEST_WORD_DELAY": "0.08"}
    proc, url = await serve(*options, env=env, agents=_AGENTS)
    try:
        chat = f"kill-{secrets.token_hex(4)}"
        await page.goto(_address(site, url, chat))
        await _say(page, "slow 120")
        reply = page.locator('li[data-role="assistant"] .text')
        await expect(reply).to_contain_text("w5")
        abandoned = (await reply.inner_text()).split(" ")[0]  # the killed attempt's nonce
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        port = url.rsplit(":", 1)[1]
        proc, url = await serve(*options, "--port", port, env=env, agents=_AGENTS)
        await page.reload()
        # The restarted server drives the turn again; the page resumes it while it runs.
        await expect(page.locator("#status")).to_have_text("streaming")
        await expect(reply).to_contain_text("w119", timeout=60_000)
        await expect(page.locator("#status")).to_have_text("ready")
        shown = await reply.inner_text()
        async with httpx.AsyncClient(base_url=url, headers={"x-api-key": ALICE}) as client:
            state = (await client.get(f"/threads/{chat}/state")).json()
        stored = [m["content"] for m in state["values"]["messages"] if m["type"] == "ai"]
        assert stored == [shown]  # exactly the stored reply, once
        assert not shown.startswith(abandoned)  # the killed process's text left the page
        assert await page.locator('li[data-role="assistant"]').count() == 1
        assert await _retracted(url, chat), "the restarted server never retracted the killed reply"
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
            await asyncio.wait_for(proc.wait(), 60)
