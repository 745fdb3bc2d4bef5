"""The CLI under bad input (issue 39): one ``error:`` line and exit 2, nothing created, nothing wiped.

Each test is what a probe did before the fix: read-only commands on a mistyped SQLite path created
a database and printed an empty table with exit 0; ``retention --idle-days 0`` deleted every tree
without asking; an agents path whose function raised, ``--idle-days inf`` and an argument that is
not UTF-8 printed a traceback.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from repertory import Agent, Runtime
from repertory.cli import app
from repertory.testing import ScriptedModel

runner = CliRunner()


def _error_line(result: Result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def broken_agents() -> dict[str, Agent]:
    """An agents factory that fails, as a user's might."""
    raise RuntimeError("the model key is not set")


async def _store_with_trees(path: Path, count: int) -> None:
    agent = Agent(name="echo", model=ScriptedModel([{"text": "hi"}] * count))
    async with await Runtime.start(store=f"sqlite:///{path}", agents={"echo": agent}) as rt:
        for _ in range(count):
            handle = await rt.create_session("echo")
            await handle.run("hello")


@pytest.mark.parametrize(
    "command",
    [
        ["sessions", "list"],
        ["sessions", "tree", "s1"],
        ["sessions", "show", "s1"],
        ["sessions", "delete", "s1"],
        ["approvals", "list"],
        ["approvals", "approve", "tok"],
        ["resume", "tok", "yes"],
        ["recover"],
        ["schedules", "list"],
        ["schedules", "timers"],
        ["schedules", "cancel", "c1"],
        ["retention", "--idle-days", "30"],
        ["export", "--out", "exported"],
    ],
)
@pytest.mark.parametrize("form", ["sqlite:///{}", "{}"])
def test_commands_never_create_a_store(tmp_path: Path, command: list[str], form: str) -> None:
    missing = tmp_path / "mistyped.db"
    store = form.format(missing)
    line = _error_line(runner.invoke(app, [*command, "--store", store]))
    assert f"no store at {missing}" in line and "never creates one" in line
    assert not missing.exists() and not (tmp_path / "exported").exists()


def test_retention_below_a_day_asks_for_yes(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    asyncio.run(_store_with_trees(path, 2))
    store = ["--store", f"sqlite:///{path}"]
    for days in ("0", "0.5"):
        line = _error_line(runner.invoke(app, ["retention", "--idle-days", days, *store]))
        assert "add --yes to confirm" in line
    listed = runner.invoke(app, ["sessions", "list", *store])
    assert listed.exit_code == 0 and listed.output.count("echo") == 2  # nothing was deleted
    dry = runner.invoke(app, ["retention", "--idle-days", "0", "--dry-run", *store])
    assert dry.exit_code == 0 and "nothing deleted" in dry.output
    done = runner.invoke(app, ["retention", "--idle-days", "0", "--yes", *store])
    assert done.exit_code == 0 and "deleted 2 session(s)" in " ".join(done.output.split())
    assert runner.invoke(app, ["sessions", "list", *store]).output.count("echo") == 0


def test_numbers_out_of_range_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    asyncio.run(_store_with_trees(path, 1))
    store = ["--store", f"sqlite:///{path}"]
    assert "--idle-days" in _error_line(runner.invoke(app, ["retention", "--idle-days", "inf", "--dry-run", *store]))
    assert "--idle-days" in _error_line(runner.invoke(app, ["retention", "--idle-days", "nan", "--dry-run", *store]))
    assert "--limit" in _error_line(runner.invoke(app, ["sessions", "list", "--limit", "-5", *store]))
    assert "--limit" in _error_line(runner.invoke(app, ["schedules", "timers", "--limit", "0", *store]))


def test_agents_that_fail_to_load_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    asyncio.run(_store_with_trees(path, 1))
    store = ["--store", f"sqlite:///{path}"]
    line = _error_line(runner.invoke(app, ["recover", "--agents", "tests.cli.test_bad_input:broken_agents", *store]))
    assert "calling it raised RuntimeError: the model key is not set" in line
    line = _error_line(runner.invoke(app, ["recover", "--agents", "repertory:Agent", *store]))
    assert "cannot make agents from 'repertory:Agent'" in line and "TypeError" in line


def test_an_argument_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    asyncio.run(_store_with_trees(path, 1))
    not_text = os.fsdecode(b"\xff")  # how such bytes reach sys.argv: a lone surrogate
    line = _error_line(runner.invoke(app, ["sessions", "show", not_text, "--store", f"sqlite:///{path}"]))
    assert "is not valid UTF-8 text" in line
