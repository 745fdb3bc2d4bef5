"""Every table the CLI and the demo print, and every command's help, fit an 80-column terminal.

The commands print as a terminal would: ``TTY_COMPATIBLE=1`` (rich's switch, which
``stdout_console`` honours) and ``COLUMNS``. A line wider than the terminal, or a header rich cut
to "sess…", fails; so does a table that drops what a reader needs (the approval token whole).
"""

from __future__ import annotations

import asyncio
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from repertory import Agent, Runtime, tool
from repertory.cli import app
from repertory.cli._tables import Field, Layout, fit_table, fits, short_id
from repertory.testing import ManualClock, ScriptedModel
from tests.runtime.time.helpers import nap_agent

runner = CliRunner()

_STYLES = re.compile(r"\x1b\[[0-9;]*m")
# The demo's live view moves the cursor to redraw itself: each move starts a new line here.
_MOVES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")
_TITLE = "collect the sources for the quarterly report of project zero, then summarise them"


@tool(requires_approval=True)
def deploy(env: str, note: str) -> str:
    """Deploy (needs approval)."""
    return f"deployed to {env}"


def _step(messages: list[Any], tools: Any) -> dict[str, Any]:
    last = messages[-1]
    if last.role == "user" and "deploy" in last.text:
        return {"tool": "deploy", "args": {"env": "production-eu-west-1", "note": "after the freeze is lifted"}}
    return {"text": f"ok: {last.text or 'done'} and a reply long enough to wrap in a narrow terminal"}


@dataclass(frozen=True)
class Filled:
    """A store with a tree of sessions, a pending approval, a schedule and a timer (of ``napper``)."""

    url: str
    root: str
    child: str
    token: str
    napper: str
    schedule: str


async def _fill(url: str) -> Filled:
    agents = {"orchestrator": Agent(name="orchestrator", model=ScriptedModel(_step), tools=[deploy])}
    agents["napper"] = nap_agent()
    async with await Runtime.start(url, agents=agents, clock=ManualClock()) as rt:
        root = await rt.create_session(agent="orchestrator", title="project zero")
        await root.run("plan it")
        child = await root.spawn(title=_TITLE)
        await child.run("deploy it")
        [pending] = await child.pending_approvals()
        napper = await rt.create_session("napper", title="weekly")
        schedule = await napper.schedule("0 9 * * MON", "write the weekly report for every project", tz="Europe/Berlin")
        await napper.run("nap")  # sleeps: an armed timer
        return Filled(url, root.id, child.id, pending.token, napper.id, schedule.id)


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Filled:
    url = f"sqlite:///{tmp_path_factory.mktemp('width') / 'cli.db'}"
    return asyncio.run(_fill(url))


def _terminal(width: int, *args: str) -> str:
    """What ``repertory ARGS`` prints in a terminal ``width`` columns wide, without escape codes."""
    result = runner.invoke(app, list(args), env={"COLUMNS": str(width), "TTY_COMPATIBLE": "1"})
    assert result.exit_code == 0, result.output
    return _MOVES.sub("\n", _STYLES.sub("", result.stdout))


def _check_fits(text: str, width: int) -> list[str]:
    """Every line within ``width`` and no header cut; returns the header rows."""
    lines = text.splitlines()
    too_wide = [line for line in lines if cell_len(line) > width]
    assert not too_wide, "\n".join(too_wide)
    headers = [line for line in lines if line.startswith("┃")]
    cut = [line for line in headers if "…" in line]
    assert not cut, "\n".join(cut)
    return headers


def _commands(f: Filled) -> list[list[str]]:
    return [
        ["sessions", "list", "--store", f.url],
        ["sessions", "list", "--store", f.url, "--wide"],
        ["sessions", "tree", f.root, "--store", f.url],
        ["sessions", "show", f.child, "--store", f.url],
        ["approvals", "list", "--store", f.url],
        ["approvals", "list", "--store", f.url, "--wide"],
        ["schedules", "list", "--store", f.url],
        ["schedules", "list", "--store", f.url, "--wide"],
        ["schedules", "timers", "--store", f.url],
        ["retention", "--idle-days", "0", "--dry-run", "--store", f.url],
        ["retention", "--idle-days", "0", "--dry-run", "--store", f.url, "--wide"],
    ]


@pytest.mark.parametrize("width", [80, 120])
def test_every_table_fits_the_terminal(filled: Filled, width: int) -> None:
    for args in _commands(filled):
        headers = _check_fits(_terminal(width, *args), width)
        assert headers or args[1] == "tree", args  # every command but the tree prints a table with a header


def test_export_fits(filled: Filled, tmp_path: Path) -> None:
    text = _terminal(80, "export", "--store", filled.url, "--out", str(tmp_path / "export"))
    assert any("tool_calls" in line for line in _check_fits(text, 80) + text.splitlines())


def test_a_narrow_terminal_shortens_ids_and_wide_keeps_them_whole(filled: Filled) -> None:
    narrow = _terminal(80, "sessions", "list", "--store", filled.url)
    assert filled.root not in narrow and short_id(filled.root) in narrow
    assert "ids: their last 8 characters (--wide: whole)" in " ".join(narrow.split())
    wide = _terminal(80, "sessions", "list", "--store", filled.url, "--wide")
    assert filled.root in wide and filled.child in wide
    # A wide terminal has room for whole ids and every column.
    roomy = _terminal(160, "sessions", "list", "--store", filled.url)
    assert filled.root in roomy and "lineage" in roomy and "…" not in roomy
    # A pipe (no terminal) always gets whole ids: scripts read them.
    piped = runner.invoke(app, ["sessions", "list", "--store", filled.url], env={"COLUMNS": "80"})
    assert filled.root in piped.stdout and filled.child in piped.stdout


def test_the_approval_token_is_whole_at_any_width(filled: Filled) -> None:
    for width in (80, 100, 120):
        text = _terminal(width, "approvals", "list", "--store", filled.url)
        assert filled.token in text, text  # on one line: `approvals approve TOKEN` takes it as copied
        assert "deploy" in text


def test_schedules_keep_what_a_reader_needs(filled: Filled) -> None:
    text = " ".join(_terminal(80, "schedules", "list", "--store", filled.url, "--wide").split())
    assert filled.schedule in text and "0 9 * * MON" in text and "Europe/Berlin" in text
    timers = _terminal(80, "schedules", "timers", "--store", filled.url, "--wide")
    assert filled.napper in timers and "wakes at" in timers


def test_titles_and_labels_are_shown_as_written(filled: Filled) -> None:
    tree = _terminal(80, "sessions", "tree", filled.root, "--store", filled.url)
    assert "[root]" in tree and "[spawned]" in tree  # not swallowed as rich markup


def test_the_demo_fits_80_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    text = _terminal(80, "demo", "--sessions", "2", "--backend", "local", "--delay", "0")
    headers = _check_fits(text, 80)
    joined = " ".join(headers)
    for header in ("tree", "sessions", "runs", "tokens", "total", "follow", "approved", "tool"):
        assert header in joined, joined
    assert "summary" in text and "2/2" in text


def test_help_fits_and_says_what_repertory_is() -> None:
    top = _terminal(80, "--help")
    assert "Durable LLM agent sessions: run, serve over HTTP, approve, inspect, export." in top
    assert "for analytics" not in top.split("Commands:")[0]
    groups = {"sessions": ["list", "tree", "show", "delete"], "approvals": ["list", "approve", "reject"]}
    groups["schedules"] = ["list", "cancel", "disable", "enable", "timers"]
    commands = [[c] for c in ("export", "demo", "resume", "recover", "retention", "serve", "ui")]
    commands += [[group] for group in groups] + [[g, c] for g, cs in groups.items() for c in cs]
    for args in [[], *commands]:
        text = _terminal(80, *args, "--help")
        _check_fits(text, 80)
        listed = text.split("Commands:")[1] if "Commands:" in text else ""
        assert "..." not in listed and "…" not in text, (args, text)  # no command's help cut short


def _table(headers: list[str], rows: list[list[str]], no_wrap: bool = False) -> Table:
    table = Table(title="t")
    for header in headers:
        table.add_column(header, no_wrap=no_wrap)
    for row in rows:
        table.add_row(*row)
    return table


@pytest.mark.parametrize("width", [30, 40, 50, 60, 70, 80, 100])
def test_fits_agrees_with_what_rich_prints(width: int) -> None:
    """Whenever ``fits`` says yes, rich prints every header and word whole at that width."""
    words = ["orchestrator", "01M96VAKS38PXCW1W1YJBEW18M", "spawned", "done", "collect the sources quickly"]
    headers = ["session", "agent", "title", "lineage", "latest run"]
    for shift in range(len(words)):
        row = words[shift:] + words[:shift]
        for no_wrap in (False, True):
            table = _table(headers, [row], no_wrap)
            console = Console(width=width, record=True, file=io.StringIO())
            console.print(table)
            printed = console.export_text()
            if fits(console, table):
                assert "…" not in printed, printed
                for word in " ".join(headers + row).split():
                    assert word in printed, (word, printed)


def test_fit_table_takes_the_first_layout_that_fits() -> None:
    fields = (Field("id", "id"), Field("agent"), Field("title", "text"), Field("token", "key"))
    rows = [("01M96VAKS38PXCW1W1YJBEW18M", "orchestrator", "a title to wrap", "ab" * 24)]
    layouts = (
        Layout(("id", "agent", "title", "token")),
        Layout(("id", "agent", "title", "token"), whole_ids=False),
        Layout(("id", "token")),
    )

    def chosen(width: int, wide: bool = False) -> tuple[list[str], bool]:
        table = fit_table(Console(width=width), "t", fields, rows, layouts, wide=wide)
        return [str(c.header) for c in table.columns], table.caption is not None

    assert chosen(200) == (["id", "agent", "title", "token"], False)  # whole ids: no caption
    assert chosen(100) == (["id", "agent", "title", "token"], True)  # ids shortened, and the caption says so
    assert chosen(100, wide=True) == (["id", "token"], False)
    assert chosen(85) == (["id", "token"], False)
    # Nothing fits: the leanest layout, its id and token folded whole rather than cut.
    narrow = fit_table(Console(width=60), "t", fields, rows, layouts)
    assert [c.overflow for c in narrow.columns] == ["fold", "fold"] and not any(c.no_wrap for c in narrow.columns)
    console = Console(width=60, record=True, file=io.StringIO())
    console.print(narrow)
    assert "…" not in console.export_text()
