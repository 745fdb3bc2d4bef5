"""``repertory export`` through typer's ``CliRunner``: the happy path and every kind of bad input."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repertory import Runtime
from repertory.analytics import connect
from repertory.cli import app
from repertory.storage import SqliteSessionStore
from tests.storage.export.fleet import agents, build_fleet

runner = CliRunner()


async def _fleet(path: Path) -> None:
    async with await SqliteSessionStore.open(path) as store:
        async with await Runtime.start(store=store, agents=agents()) as rt:
            await build_fleet(rt)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "fleet.db"
    asyncio.run(_fleet(path))
    return path


def _error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_export_writes_then_adds_nothing(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "export"
    url = f"sqlite:///{db}"
    first = runner.invoke(app, ["export", "--store", url, "--out", str(out)])
    assert first.exit_code == 0, first.output
    assert "messages" in first.stdout and "tool_calls" in first.stdout and first.stderr == ""
    assert connect(out).sql("SELECT count(*) FROM sessions").fetchall() == [(10,)]
    again = runner.invoke(app, ["export", "--store", str(db), "--out", str(out)])  # a plain path works too
    assert again.exit_code == 0, again.output
    assert "0 rows in" in again.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["export", "--out", "x"], "Missing option '--store'"),
        (["export", "--store", "memory://"], "Missing option '--out'"),
        (["export", "--store", "nope://x", "--out", "x"], "unknown store scheme 'nope'"),
        (["export", "--store", "sqlite:/bad", "--out", "x"], "malformed store URL"),
        (["export", "--store", "memory://", "--out", "x", "--frobnicate"], "No such option"),
        (["exprot"], "No such command 'exprot'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], says: str, tmp_path: Path) -> None:
    result = runner.invoke(app, [a.replace("x", str(tmp_path / "x")) if a == "x" else a for a in args])
    assert result.exit_code == 2
    assert says in _error_line(result.stderr)
    assert result.stdout == ""


def test_not_a_database(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    result = runner.invoke(app, ["export", "--store", str(junk), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "not a SQLite database" in _error_line(result.stderr)


def test_out_is_a_file(db: Path, tmp_path: Path) -> None:
    target = tmp_path / "file.txt"
    target.write_text("hello")
    result = runner.invoke(app, ["export", "--store", str(db), "--out", str(target)])
    assert result.exit_code == 2
    assert "not a directory" in _error_line(result.stderr)


def test_another_stores_export(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "export"
    assert runner.invoke(app, ["export", "--store", str(db), "--out", str(out)]).exit_code == 0
    other = tmp_path / "other.db"
    asyncio.run(_fleet(other))
    result = runner.invoke(app, ["export", "--store", str(other), "--out", str(out)])
    assert result.exit_code == 2
    assert "holds an export of" in _error_line(result.stderr)


def test_help_lists_export() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "export" in result.stdout
