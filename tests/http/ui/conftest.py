"""A repertory server with the web UI on loopback, and one headless Chromium per test module.

The server runs on the test module's own event loop (``loop_scope="module"``), so a test can set
a scene through the runtime (create sessions, run turns up to an approval) and then look at it in
the browser. The browser is Debian's ``chromium`` driven by Playwright through
``executable_path`` (Playwright's own browser downloads are never used); a machine without it
fails these tests with a message saying how to install it, never skips them. Screenshots go to
a temporary folder (``UI_SHOTS`` names another) for a person to look at.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import uvicorn
from playwright.async_api import Browser, Page, async_playwright

from repertory import Principal, Runtime
from repertory.core.ids import now_ms
from repertory.core.result import RunResult
from repertory.core.state import RunState
from repertory.http import create_app
from tests.http.ui.agents import make_agents

ALICE = "alice-key-0123456789"
BOB = "bob-key-0123456789"
ADMIN = "ops-key-0123456789"
KEYS = {ALICE: Principal.user("alice"), BOB: Principal.user("bob")}
ADMINS = {ADMIN: Principal.user("ops")}


def chromium_path() -> str:
    """Debian's chromium binary (the real one, not the shell wrapper, when both are there)."""
    for candidate in ("/usr/lib/chromium/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail("the UI tests need Debian's chromium: apt-get update && apt-get install -y chromium")


@dataclass
class UiServer:
    """The running server: its URL and the runtime behind it."""

    url: str
    runtime: Runtime


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def ui_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[UiServer]:
    """A runtime on a SQLite file, served with API keys for alice and bob (owners) and ops (an admin)."""
    store = tmp_path_factory.mktemp("ui-store") / "ui.db"
    runtime = await Runtime.start(store=f"sqlite:///{store}", agents=make_agents())
    async with serving(create_app(runtime, KEYS, admin_keys=ADMINS), runtime) as served:
        yield served


@contextlib.asynccontextmanager
async def serving(app: Any, runtime: Runtime) -> AsyncIterator[UiServer]:
    """Serve ``app`` on a loopback port from this event loop; on exit stop it and close ``runtime``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(256)
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", ws="none", lifespan="on", timeout_graceful_shutdown=2)
    )
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    try:
        yield UiServer(f"http://127.0.0.1:{sock.getsockname()[1]}", runtime)
    finally:
        server.should_exit = True
        await task
        sock.close()
        await runtime.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    """One headless Chromium for the module."""
    async with async_playwright() as pw:
        args = ["--no-sandbox"] if os.geteuid() == 0 else []  # Chromium's sandbox refuses to run as root
        launched = await pw.chromium.launch(executable_path=chromium_path(), args=args)
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go."""
    named = os.environ.get("UI_SHOTS")
    if named:
        Path(named).mkdir(parents=True, exist_ok=True)
        return Path(named)
    return tmp_path_factory.mktemp("ui-shots")


@pytest_asyncio.fixture(loop_scope="module")
async def page(browser: Browser, ui_server: UiServer) -> AsyncIterator[Page]:
    """A fresh browser context (no cookies) with one page; its console errors fail the test."""
    context = await browser.new_context(base_url=ui_server.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(10_000)
    tab = await context.new_page()
    errors: list[str] = []
    # A refused login or a raced decision answers 4xx on purpose, and Chromium logs every 4xx.
    expected = "Failed to load resource: the server responded with a status of 4"
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" and expected not in m.text else None)
    tab.on("pageerror", lambda e: errors.append(str(e)))
    try:
        yield tab
    finally:
        await context.close()
    assert not errors, f"the page logged errors: {errors}"


async def login(page: Page, key: str = ALICE) -> None:
    """Log in through the form, as a person would."""
    await page.goto("/ui/login")
    await page.get_by_label("API key").fill(key)
    await page.get_by_role("button", name="Log in").click()
    await page.wait_for_url("**/ui/")


def form_token(page: str) -> str:
    """The CSRF token of the forms on a page."""
    match = re.search(r'name="csrf" value="([^"]+)"', page)
    assert match is not None, "the page has no form token"
    return match[1]


@contextlib.asynccontextmanager
async def logged_in(url: str, key: str = ALICE) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """An HTTP client logged in with ``key`` through the form, and the token of the forms it is shown."""
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        token = form_token((await client.get("/ui/login")).text)
        answer = await client.post("/ui/login", data={"csrf": token, "key": key, "next": "/ui/"})
        assert answer.status_code == 303 and answer.headers["location"] == "/ui/"
        page = await client.get("/ui/")
        assert page.status_code == 200
        yield client, form_token(page.text)


async def crash(runtime: Runtime, result: RunResult) -> RunState:
    """A finished turn as a process that died mid-run leaves it: run and turn running, the last checkpoint old."""
    store = runtime.store
    stale = result.state.model_copy(update={"status": "running", "result": None, "updated_at": now_ms() - 120_000})
    await store.save(stale)
    [turn] = [t for t in await store.list_turns(result.state.thread_id) if t.run_id == result.run_id]
    await store.update_turn(turn.model_copy(update={"status": "running"}))
    return stale
