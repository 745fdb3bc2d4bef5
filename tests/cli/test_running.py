"""``repertory sessions list --running`` and ``repertory sessions top``: what runs, with each tree's spend and budget.

A SQLite store file where a runtime of this test holds turns open: alice's tree (a root that
finished a priced turn, a child running a turn held inside a tool with another queued behind it)
and bob's (a root running a held turn). The commands read the file as a user's shell would, while
the turns are held; ``top`` is also run as a process of its own on a terminal, seen redrawing as a
held turn ends, and stopped with Ctrl-C.
"""

from __future__ import annotations

import asyncio
import re
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from typer.testing import CliRunner

from repertory import Agent, Runtime, SqliteSessionStore, TurnHandle, tool
from repertory.cli import app
from repertory.core.budget import Budget, BudgetStore, tree_scope
from repertory.core.messages import ModelMessage
from repertory.core.model import ModelEvent, ModelResponse, ModelSettings, ToolSpec
from repertory.testing import ScriptedModel
from tests.cli.test_front_door import COMMAND, ENV, ROOT

runner = CliRunner()

_ENTERED: dict[str, asyncio.Event] = {}
_RELEASE: dict[str, asyncio.Event] = {}
_MOVES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


def _event(events: dict[str, asyncio.Event], name: str) -> asyncio.Event:
    return events.setdefault(name, asyncio.Event())


@tool
async def hold(name: str) -> str:
    """Wait until the test lets this call go."""
    _event(_ENTERED, name).set()
    await _event(_RELEASE, name).wait()
    return f"held {name}"


def _step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    last = messages[-1]
    usage = {"input_tokens": 1_000, "output_tokens": 234}
    if last.role == "user" and last.text.startswith("wait "):
        return {"tool": "hold", "args": {"name": last.text.removeprefix("wait ")}, "usage": usage}
    return {"text": "done", "usage": usage}


class PricedModel:
    """``ScriptedModel(_step)`` whose every answer costs $0.125."""

    def __init__(self) -> None:
        self._scripted = ScriptedModel(_step)

    async def request(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        async for event in self._scripted.request(messages, tools, settings):
            yield event.model_copy(update={"cost": 0.125}) if isinstance(event, ModelResponse) else event


@dataclass(frozen=True)
class Scene:
    """The store's URL, the ids of the sessions, and the turns held open."""

    url: str
    alice: str
    child: str
    bob: str
    turns: tuple[TurnHandle, ...]
    budgeted: bool


@pytest.fixture
async def scene(tmp_path: Path) -> AsyncIterator[Scene]:
    """The two trees, turns held, on a SQLite file; every hold released and every turn ended afterwards."""
    _ENTERED.clear()
    _RELEASE.clear()
    url = f"sqlite:///{tmp_path / 'running.db'}"
    agents = {"worker": Agent(name="worker", model=PricedModel(), tools=[hold])}
    async with await Runtime.start(store=url, agents=agents) as rt:
        alice = await rt.create_session(agent="worker", title="alice's root", owner="alice")
        assert (await alice.run("hello")).status == "done"
        child = await alice.spawn(title="alice's child")
        busy = await child.send("wait a")
        await _event(_ENTERED, "a").wait()
        behind = await child.send("after a")
        bob = await rt.create_session(agent="worker", title="bob's root", owner="bob")
        bobs = await bob.send("wait b")
        await _event(_ENTERED, "b").wait()
        budgeted = isinstance(rt.store, BudgetStore)
        if budgeted:
            assert isinstance(rt.store, BudgetStore)
            await rt.store.set_budget(tree_scope(alice.id), Budget(max_tokens=50_000, max_cost=2.0))
        try:
            yield Scene(url, alice.id, child.id, bob.id, (busy, behind, bobs), budgeted)
        finally:
            for name in ("a", "b"):
                _event(_RELEASE, name).set()
            for turn in (busy, behind, bobs):
                await turn.result()


async def _invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    """``repertory ARGS`` through typer's runner, on a thread: this loop goes on driving the held turns."""
    call: Callable[[], Any] = lambda: runner.invoke(app, list(args), env=env)  # noqa: E731
    return await asyncio.to_thread(call)


def _lines_of(text: str, session_id: str) -> list[str]:
    return [line for line in text.splitlines() if session_id in line]


async def test_list_running_shows_every_open_turn_with_its_trees_spend_and_budget(scene: Scene) -> None:
    listed = await _invoke("sessions", "list", "--running", "--store", scene.url)
    assert listed.exit_code == 0, listed.output
    out = listed.stdout
    assert "running now: 3 turns in 2 trees" in out
    # alice's tree: the root's finished turn (one request) and the child's first request so far.
    child_rows = _lines_of(out, scene.child)
    assert [("running" in line, "queued" in line) for line in child_rows] == [(True, False), (False, True)]
    for line in child_rows:
        assert scene.alice in line and "worker" in line
        assert "2,468" in line and "$0.2500" in line  # two requests of 1,234 tokens and $0.125 each
        assert ("max $2.0000, max 50,000 tokens" in line) == scene.budgeted
    [bob_row] = _lines_of(out, scene.bob)
    assert "running" in bob_row and "1,234" in bob_row and "$0.1250" in bob_row and "max" not in bob_row

    only_bob = await _invoke("sessions", "list", "--running", "--owner", "bob", "--store", scene.url)
    assert only_bob.exit_code == 0, only_bob.output
    assert "running now: 1 turn in 1 tree" in only_bob.stdout
    assert scene.bob in only_bob.stdout and scene.child not in only_bob.stdout

    nobody = await _invoke("sessions", "list", "--running", "--owner", "carol", "--store", scene.url)
    assert "running now: 0 turns in 0 trees" in nobody.stdout and scene.bob not in nobody.stdout

    mixed = await _invoke("sessions", "list", "--owner", "bob", "--store", scene.url)
    assert mixed.exit_code == 2 and "--owner narrows --running" in mixed.stderr


async def test_list_running_fits_an_80_column_terminal(scene: Scene) -> None:
    shown = await _invoke(
        "sessions", "list", "--running", "--store", scene.url, env={"COLUMNS": "80", "TTY_COMPATIBLE": "1"}
    )
    assert shown.exit_code == 0, shown.output
    text = _MOVES.sub("", re.sub(r"\x1b\[[0-9;]*m", "", shown.stdout))
    assert all(cell_len(line) <= 80 for line in text.splitlines()), text
    assert "…" + scene.child[-8:] in text and "tree tokens" in text


async def test_top_refreshes_until_its_iterations_are_done(scene: Scene) -> None:
    piped = await _invoke("sessions", "top", "--iterations", "2", "--interval", "0.1", "--store", scene.url)
    assert piped.exit_code == 0, piped.output
    # In a pipe each refresh is printed after the one before.
    assert piped.stdout.count("running now: 3 turns in 2 trees") == 2
    assert len(_lines_of(piped.stdout, scene.child)) == 4

    terminal = await _invoke(
        "sessions", "top", "--iterations", "2", "--interval", "0.1", "--owner", "bob", "--store", scene.url,
        env={"COLUMNS": "200", "TTY_COMPATIBLE": "1"},
    )  # fmt: skip
    assert terminal.exit_code == 0, terminal.output
    assert "\x1b[" in terminal.stdout  # redrawn in place
    assert "running now: 1 turn in 1 tree" in terminal.stdout and scene.bob in terminal.stdout
    assert scene.child not in terminal.stdout


async def _read_until(stream: asyncio.StreamReader, seen: list[str], wanted: str) -> None:
    """Read the process's output into ``seen`` until ``wanted`` shows (escape codes taken out)."""
    async with asyncio.timeout(60):
        while wanted not in _MOVES.sub("", "".join(seen)):
            chunk = await stream.read(4096)
            assert chunk, f"the process ended before showing {wanted!r}: {''.join(seen)}"
            seen.append(chunk.decode())


async def test_top_on_a_terminal_redraws_as_turns_end_and_stops_on_ctrl_c(scene: Scene) -> None:
    env = {**ENV, "COLUMNS": "220", "TTY_COMPATIBLE": "1"}
    proc = await asyncio.create_subprocess_exec(
        str(COMMAND), "sessions", "top", "--interval", "0.1", "--owner", "bob", "--store", scene.url,
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stderr is not None
        seen: list[str] = []
        await _read_until(proc.stdout, seen, scene.bob)
        _event(_RELEASE, "b").set()
        assert (await scene.turns[2].result()).status == "done"
        await _read_until(proc.stdout, seen, "running now: 0 turns in 0 trees")
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        assert (await proc.stderr.read()).decode() == ""
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    async with await SqliteSessionStore.open(scene.url.removeprefix("sqlite:///")) as store:
        assert [t.status for t in await store.list_turns(scene.bob)] == ["done"]
