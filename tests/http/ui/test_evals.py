"""The web UI's eval pages: the evals found in the store, and each case's original beside its variant.

The scene is real: sessions of alice and bob on a served runtime, a dataset of their turns, the
recorded baseline scored and a variant (``terse``: answers at once, no lookup) run with
``repertory.evals.run_eval``, its forks in the store and its scores in Parquet under the folder the
server is given (``create_app(export_dir=)``, what ``repertory serve --export`` passes). A second
server on the same store without the folder shows what the store holds and no score; another
owner's cases never show.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Browser, expect

from repertory import Runtime
from repertory.core.messages import ModelMessage
from repertory.core.model import ToolSpec
from repertory.evals import (
    ReplyEquals,
    SessionSelect,
    TokensAndCost,
    ToolTrajectory,
    dataset_from_sessions,
    run_eval,
    score_recorded,
)
from repertory.http import create_app
from repertory.http.ui import ui_only_app
from repertory.testing import ScriptedModel
from tests.http.ui.agents import make_agents
from tests.http.ui.conftest import ADMIN, ADMINS, ALICE, BOB, KEYS, UiServer, logged_in, login, serving

pytestmark = pytest.mark.asyncio(loop_scope="module")


def _terse(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """The variant: answers every prompt at once (no lookup), with less usage than the original."""
    prompt = next(m.text for m in reversed(messages) if m.role == "user")
    word, _, rest = prompt.partition(" ")
    text = "Hello! How can I help?" if word == "hello" else f"terse: {rest}"
    return {"text": text, "usage": {"input_tokens": 40, "output_tokens": 4}}


@dataclass
class Scene:
    """The served runtime, the export folder, and the ids the pages should (or must not) show."""

    server: UiServer
    out: Path
    alice: list[str]  # alice's source sessions
    bob: str  # bob's source session
    forks: dict[str, str]  # source session id -> the terse eval's fork


async def _evaluate(store: str, out: Path) -> tuple[list[str], str, dict[str, str]]:
    """Alice's and bob's sessions, the baseline scored and two evals run (in a runtime of their own, as
    ``repertory eval run`` does beside a server); returns alice's and bob's sessions and the terse forks."""
    async with await Runtime.start(store=store, agents=make_agents()) as rt:
        volcanoes = await rt.create_session(agent="assistant", title="volcano research", owner="alice")
        await volcanoes.run("research <b>volcanoes</b>")
        greeting = await rt.create_session(agent="assistant", title="greeting", owner="alice")
        await greeting.run("hello")
        lava = await rt.create_session(agent="assistant", title="bob's lava", owner="bob")
        await lava.run("research lava-secret")
        dataset = await dataset_from_sessions(rt.store, SessionSelect(agent="assistant"), agents=rt.agents)
        evaluators = [ToolTrajectory(), ReplyEquals(), TokensAndCost()]
        await score_recorded(dataset, evaluators=evaluators, out_dir=out)
        terse = ScriptedModel(_terse, name="terse-model")
        report = await run_eval(rt, dataset, name="terse", model=terse, evaluators=evaluators, out_dir=out)
        assert report.failures == [] and len(report.cases) == 3
        forks = {case.inputs.session_id: case.output.session_id for case in report.cases}
        # An eval of alice's sessions alone: bob has no case of it.
        mine = await dataset_from_sessions(rt.store, SessionSelect(owner="alice", agent="assistant"))
        await run_eval(rt, mine, name="alice only", model=terse)
    return [volcanoes.id, greeting.id], lava.id, forks


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def scene(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Scene]:
    folder = tmp_path_factory.mktemp("ui-evals")
    store, out = f"sqlite:///{folder / 'ui.db'}", folder / "export"
    alice, bob, forks = await _evaluate(store, out)
    runtime = await Runtime.start(store=store, agents=make_agents())
    async with serving(create_app(runtime, KEYS, admin_keys=ADMINS, export_dir=out), runtime) as served:
        yield Scene(served, out, alice, bob, forks)


def _rows(page: str) -> dict[str, str]:
    """The evals list's rows by eval name: the row's text."""
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", body, re.S):
        name = re.search(r'<a href="[^"]*">([^<]*)</a>', row)
        assert name is not None
        rows[name[1]] = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row)).strip()
    return rows


async def test_the_list_groups_each_owners_forks_by_eval(scene: Scene) -> None:
    url = scene.server.url
    async with logged_in(url, ALICE) as (client, _):
        page = await client.get("/ui/evals")
        assert page.status_code == 200 and 'href="/ui/evals" aria-current="page"' in page.text
        rows = _rows(page.text)
        assert set(rows) == {"terse", "alice only"}
        assert rows["terse"].startswith("terse 2 done 2 ")  # alice's two cases, both done
        assert "assistant.eval.terse" in rows["terse"]
        assert 'href="/ui/evals/alice%20only"' in page.text
    async with logged_in(url, BOB) as (client, _):
        rows = _rows((await client.get("/ui/evals")).text)
        assert set(rows) == {"terse"} and rows["terse"].startswith("terse 1 done 1 ")
    async with logged_in(url, ADMIN) as (client, _):
        rows = _rows((await client.get("/ui/evals")).text)
        assert rows["terse"].startswith("terse 3 done 3 ") and rows["alice only"].startswith("alice only 2 ")


async def test_an_evals_page_shows_each_case_side_by_side_with_scores(scene: Scene) -> None:
    async with logged_in(scene.server.url, ALICE) as (client, _):
        page = await client.get("/ui/evals/terse")
    assert page.status_code == 200
    text = page.text
    cases = re.findall(r'<article class="case" aria-label="Case ([^"]+)">(.*?)</article>', text, re.S)
    assert sorted(name for name, _ in cases) == sorted(f"{sid}#1" for sid in scene.alice)
    research = next(body for name, body in cases if name.startswith(scene.alice[0]))
    original, variant = research.split('aria-label="Variant"', 1)
    # The original: the lookup with its result, the recorded reply, links to the source session.
    assert "research &lt;b&gt;volcanoes&lt;/b&gt;" in research and "<b>volcanoes</b>" not in text
    assert 'aria-label="Tool call lookup"' in original and "facts about &lt;b&gt;volcanoes&lt;/b&gt;" in original
    assert "research done: facts about &lt;b&gt;volcanoes&lt;/b&gt;" in original
    assert f'href="/ui/sessions/{scene.alice[0]}"' in original
    # The variant: no call, its own reply and model, a link to its fork.
    assert "Tool call" not in variant and "terse: &lt;b&gt;volcanoes&lt;/b&gt;" in variant
    assert "model terse-model · 44 tokens (40 in, 4 out) · 1 request<" in variant
    assert f'href="/ui/sessions/{scene.forks[scene.alice[0]]}"' in variant
    assert "300 tokens (240 in, 60 out) · 2 requests" in original
    # Scores from the Parquet files: the baseline's beside the original, the variant's beside it.
    baseline = r'<tr class="pass"><td>ToolTrajectory <span class="sub">\(recorded\)</span></td><td>pass'
    assert re.search(baseline, original)
    assert re.search(r'<tr class="fail"><td>ToolTrajectory</td><td>fail</td>', variant)
    assert re.search(r'<tr class="fail"><td>ReplyEquals</td><td>fail</td>', variant)
    assert re.search(r"<td>total_tokens</td><td>44</td>", variant)
    greeting = next(body for name, body in cases if name.startswith(scene.alice[1]))
    assert re.search(r'<tr class="pass"><td>ReplyEquals</td><td>pass</td>', greeting.split('aria-label="Variant"')[1])
    # Nothing of bob's case.
    assert scene.bob not in text and "lava-secret" not in text and scene.forks[scene.bob] not in text


async def test_another_owners_eval_answers_like_a_missing_one(scene: Scene) -> None:
    async with logged_in(scene.server.url, BOB) as (client, _):
        theirs = await client.get("/ui/evals/alice%20only")
        missing = await client.get("/ui/evals/alice%20onlz")
        assert theirs.status_code == missing.status_code == 404
        assert theirs.text.replace("alice only", "alice onlz") == missing.text
        mine = await client.get("/ui/evals/terse")
        assert mine.status_code == 200 and "lava-secret" in mine.text
        assert not any(sid in mine.text for sid in scene.alice)
        assert not any(scene.forks[sid] in mine.text for sid in scene.alice)
    async with logged_in(scene.server.url, ADMIN) as (client, _):
        every = await client.get("/ui/evals/terse")
        assert all(sid in every.text for sid in [*scene.alice, scene.bob])


async def test_the_eval_pages_need_a_login(scene: Scene) -> None:
    async with httpx.AsyncClient(base_url=scene.server.url) as client:
        for path in ("/ui/evals", "/ui/evals/terse"):
            answer = await client.get(path)
            assert answer.status_code == 303 and answer.headers["location"].startswith("/ui/login?next=")


@contextlib.asynccontextmanager
async def _without_scores(scene: Scene) -> AsyncIterator[UiServer]:
    """``repertory ui``'s app on the same store, not told where the scores are."""
    store = f"sqlite:///{scene.out.parent / 'ui.db'}"
    runtime = await Runtime.start(store=store, agents=make_agents(), recover=False)
    async with serving(ui_only_app(runtime, KEYS, admin_keys=ADMINS), runtime) as served:
        yield served


async def test_without_the_export_folder_the_page_shows_the_store_and_no_score(scene: Scene) -> None:
    async with _without_scores(scene) as served, logged_in(served.url, ALICE) as (client, _):
        page = await client.get("/ui/evals/terse")
    assert page.status_code == 200
    assert "terse: &lt;b&gt;volcanoes&lt;/b&gt;" in page.text and 'aria-label="Tool call lookup"' in page.text
    assert "Scores of the" not in page.text and "repertory ui --export DIR" in page.text


async def test_in_the_browser_from_the_nav_to_a_case_and_its_fork(browser: Browser, scene: Scene, shots: Path) -> None:
    context = await browser.new_context(base_url=scene.server.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(10_000)
    tab = await context.new_page()
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: errors.append(str(e)))
    try:
        await login(tab, ALICE)
        await tab.get_by_role("navigation", name="Main").get_by_role("link", name="Evals").click()
        await expect(tab.get_by_role("heading", name="Evals")).to_be_visible()
        await tab.get_by_role("link", name="terse").click()
        await expect(tab.get_by_role("heading", name="Eval terse")).to_be_visible()
        case = tab.get_by_role("article", name=f"Case {scene.alice[0]}#1")
        original, variant = case.get_by_role("region", name="Original"), case.get_by_role("region", name="Variant")
        await expect(original.get_by_label("Tool call lookup")).to_contain_text("facts about <b>volcanoes</b>")
        await expect(variant).to_contain_text("terse: <b>volcanoes</b>")
        await expect(variant.get_by_role("table", name="Scores of the variant")).to_contain_text("ToolTrajectory")
        await tab.screenshot(path=shots / "eval.png", full_page=True)
        await variant.get_by_role("link", name="eval terse").click()
        await expect(tab.get_by_role("heading", name="eval terse")).to_be_visible()
        await expect(tab.locator("#conversation")).to_contain_text("terse: <b>volcanoes</b>")
    finally:
        await context.close()
    assert not errors, f"the page logged errors: {errors}"


ROOT = Path(__file__).resolve().parents[3]
COMMAND = Path(sys.executable).with_name("repertory")


async def test_repertory_ui_export_shows_the_scores_of_the_folder(tmp_path: Path) -> None:
    store, out = f"sqlite:///{tmp_path / 'ui.db'}", tmp_path / "export"
    alice, _, forks = await _evaluate(store, out)
    proc = await asyncio.create_subprocess_exec(
        *(str(COMMAND), "ui", "--port", "0", "--agents", "tests.http.ui.agents:make_agents", "--log-level", "warning"),
        *("--store", store, "--api-key", f"alice={ALICE}", "--export", str(out)),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    try:
        line = ""
        while "listening on " not in line:
            line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
            assert line, f"repertory ui exited with {await proc.wait()} before it listened"
        async with logged_in(line.split("listening on ")[1].split()[0], ALICE) as (client, _):
            page = await client.get("/ui/evals/terse")
        assert page.status_code == 200 and f'href="/ui/sessions/{forks[alice[0]]}"' in page.text
        assert 'aria-label="Scores of the variant"' in page.text and "tools [] where the recorded turn" in page.text
    finally:
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), 30) == 0


@pytest.mark.parametrize("command", ["ui", "serve"])
async def test_an_export_folder_that_does_not_exist_is_one_error_line(tmp_path: Path, command: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        *(str(COMMAND), command, "--port", "0", "--store", f"sqlite:///{tmp_path / 'x.db'}"),
        *("--export", str(tmp_path / "nowhere")),
        cwd=ROOT,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate()
    assert await proc.wait() == 2
    assert err.decode().strip().splitlines() == [f"error: --export: {str(tmp_path / 'nowhere')!r} is not a folder"]
