"""``repertory sessions delete`` and ``repertory retention``, through typer's runner."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from repertory import Agent, Runtime, open_store
from repertory.cli import app
from repertory.core.messages import ModelMessage
from repertory.core.store import TreeStore
from repertory.core.tree import TurnRecord
from repertory.testing import ScriptedModel

runner = CliRunner()


def _agents() -> dict[str, Agent]:
    return {"ops": Agent(name="ops", model=ScriptedModel(lambda messages, tools: {"text": "ok"}))}


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'cli.db'}"


def _tree(store_url: str) -> tuple[str, str, str]:
    """A root that spawned a child and was forked; returns (root, child, fork)."""

    async def build() -> tuple[str, str, str]:
        async with await Runtime.start(store=store_url, agents=_agents()) as rt:
            root = await rt.create_session(agent="ops", title="root")
            await root.run("hello")
            child = await root.spawn(title="child")
            await child.run("child hello")
            fork = await root.fork(title="fork")
            await fork.run("fork hello")
            return root.id, child.id, fork.id

    return asyncio.run(build())


def _ids(store_url: str) -> list[str]:
    async def read() -> list[str]:
        store = await open_store(store_url)
        try:
            assert isinstance(store, TreeStore)
            return [r.session_id for r in await store.list_sessions()]
        finally:
            await store.close()

    return asyncio.run(read())


def _error_line(result: Any) -> str:
    assert result.exit_code == 2, result.output
    lines: list[str] = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_sessions_delete_keeps_the_fork(store_url: str) -> None:
    root, child, fork = _tree(store_url)
    done = runner.invoke(app, ["sessions", "delete", root, "--store", store_url])
    assert done.exit_code == 0, done.output
    assert "deleted 2 session(s), 2 run(s), 2 turn(s)" in done.stdout
    assert _ids(store_url) == [fork]
    again = runner.invoke(app, ["sessions", "delete", root, "--store", store_url])
    assert f"no session '{root}'" in _error_line(again)
    whole = runner.invoke(app, ["sessions", "delete", fork, "--store", store_url, "--forks"])
    assert whole.exit_code == 0 and _ids(store_url) == []
    assert child not in _ids(store_url)


def test_sessions_delete_refuses_a_tree_with_a_turn_running_elsewhere(store_url: str) -> None:
    root, _, _ = _tree(store_url)

    async def open_turn() -> None:  # what a server in another process has queued
        store = await open_store(store_url)
        try:
            assert isinstance(store, TreeStore)
            await store.add_turn(
                TurnRecord(submission_id="elsewhere", session_id=root, message=ModelMessage.user("x"), run_id="r")
            )
        finally:
            await store.close()

    asyncio.run(open_turn())
    refused = runner.invoke(app, ["sessions", "delete", root, "--store", store_url])
    assert "turn queued or running" in _error_line(refused) and root in _ids(store_url)
    forced = runner.invoke(app, ["sessions", "delete", root, "--store", store_url, "--force"])
    assert forced.exit_code == 0, forced.output
    assert root not in _ids(store_url)


def test_retention_dry_run_lists_and_deletes_nothing_then_deletes(store_url: str) -> None:
    root, _, _ = _tree(store_url)
    fresh = runner.invoke(app, ["retention", "--idle-days", "1", "--store", store_url, "--dry-run"])
    assert fresh.exit_code == 0, fresh.output
    assert root not in fresh.stdout  # touched a moment ago

    dry = runner.invoke(app, ["retention", "--idle-days", "0", "--store", store_url, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "dry run: nothing deleted" in dry.stdout and root in dry.stdout and "session(s)" not in dry.stdout
    assert len(_ids(store_url)) == 3

    real = runner.invoke(app, ["retention", "--idle-days", "0", "--yes", "--store", store_url])
    assert real.exit_code == 0, real.output
    assert "deleted 3 session(s)" in real.stdout
    assert _ids(store_url) == []
    bad = runner.invoke(app, ["retention", "--idle-days", "-1", "--store", store_url])
    assert bad.exit_code == 2
