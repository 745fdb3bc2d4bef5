"""The ``repertory`` commands for sessions, approvals, resume, recover and the demo, through typer's runner.

Every error path prints one ``error: ...`` line on stderr, exits 2 and writes nothing.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from repertory import Agent, Runtime, Session, open_store, suspend, tool
from repertory.cli import app
from repertory.testing import ScriptedModel

runner = CliRunner()


@tool(requires_approval=True)
def deploy(env: str) -> str:
    """Deploy (needs approval)."""
    return f"deployed to {env}"


@tool
def ask(question: str) -> str:
    """Ask a human."""
    suspend(reason="question", payload={"question": question})


def _step(messages: list[Any], tools: Any) -> dict[str, Any]:
    last = messages[-1]
    if last.role == "user" and "deploy" in last.text:
        return {"tool": "deploy", "args": {"env": "prod"}}
    if last.role == "user" and "ask" in last.text:
        return {"tool": "ask", "args": {"question": "which?"}}
    return {"text": f"ok: {last.text or 'done'}"}


def make_agents() -> dict[str, Agent]:
    """The agents the commands load with --agents tests.cli.test_session_commands:make_agents."""
    return {"ops": Agent(name="ops", model=ScriptedModel(_step), tools=[deploy, ask])}


AGENTS = "tests.cli.test_session_commands:make_agents"


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'cli.db'}"


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


def _suspended_store(store_url: str) -> tuple[str, str, str]:
    """A session tree with a pending approval and a pending question; returns (root, token, ask_token)."""

    async def build() -> tuple[str, str, str]:
        async with await Runtime.start(store=store_url, agents=make_agents()) as rt:
            root = await rt.create_session(agent="ops", title="root")
            await root.run("hello")
            child = await root.spawn(title="deployer")
            await child.run("deploy it")
            [pending] = await child.pending_approvals()
            asker = await root.spawn(title="asker")
            asked = await asker.run("ask me")
            assert asked.state.suspended_on is not None
            return root.id, pending.token, asked.state.suspended_on.token

    return asyncio.run(build())


def _error_line(result: Any) -> str:
    assert result.exit_code == 2, result.output
    lines: list[str] = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_sessions_list_tree_and_show(store_url: str) -> None:
    root, _, _ = _suspended_store(store_url)
    listed = invoke("sessions", "list", "--store", store_url)
    assert listed.exit_code == 0, listed.output
    assert root in listed.stdout and "deployer" in listed.stdout
    roots = invoke("sessions", "list", "--store", store_url, "--roots")
    assert "deployer" not in roots.stdout
    tree = invoke("sessions", "tree", root, "--store", store_url)
    assert tree.exit_code == 0 and "deployer" in tree.stdout and "asker" in tree.stdout
    show = invoke("sessions", "show", root, "--store", store_url)
    assert show.exit_code == 0 and "hello" in show.stdout and "runs: 1" in show.stdout
    assert "scripted" in show.stdout  # the model that wrote the reply
    assert "cache read 0, cache written 0" in show.stdout


def test_sessions_show_cache_tokens(store_url: str) -> None:
    cached = {
        "text": "from the cache",
        "usage": {"input_tokens": 1_500, "output_tokens": 5, "cache_read_tokens": 1_200},
    }
    model = ScriptedModel([cached], name="claude-cached")

    async def build() -> str:
        async with await Runtime.start(store=store_url, agents={"ops": Agent(name="ops", model=model)}) as rt:
            h = await rt.create_session(agent="ops")
            await h.run("hi")
            return h.id

    sid = asyncio.run(build())
    show = invoke("sessions", "show", sid, "--store", store_url)
    assert show.exit_code == 0, show.output
    assert "claude-cached" in show.stdout and "tokens: 1,505 (cache read 1,200, cache written 0)" in show.stdout


def test_approvals_list_and_approve_with_a_json_payload(store_url: str) -> None:
    _, token, _ = _suspended_store(store_url)
    listed = invoke("approvals", "list", "--store", store_url)
    assert listed.exit_code == 0 and "deploy" in listed.stdout and token in listed.stdout.replace("\n", "")
    done = invoke("approvals", "approve", token, "--json", '{"by": "ops"}', "--store", store_url, "--agents", AGENTS)
    assert done.exit_code == 0, done.output
    assert ": done" in done.stdout
    again = invoke("approvals", "approve", token, "--store", store_url, "--agents", AGENTS)
    assert "no suspended run holds that token" in _error_line(again)


def test_approvals_list_shows_each_approval_with_its_root_and_narrows_to_a_tree(store_url: str) -> None:
    root_id, token, _ = _suspended_store(store_url)

    async def other_tree() -> str:
        async with await Runtime.start(store=store_url, agents=make_agents()) as rt:
            other = await rt.create_session(agent="ops", title="other")
            await other.run("deploy that")
            [pending] = await other.pending_approvals()
            return pending.token

    other_token = asyncio.run(other_tree())
    everything = invoke("approvals", "list", "--store", store_url).stdout.replace("\n", "")
    assert token in everything and other_token in everything and root_id in everything
    mine = invoke("approvals", "list", "--tree", root_id, "--store", store_url)
    assert mine.exit_code == 0, mine.output
    flat = mine.stdout.replace("\n", "")
    assert token in flat and other_token not in flat  # the child's approval, listed under its root
    assert "no session" in _error_line(invoke("approvals", "list", "--tree", "nope", "--store", store_url))


def test_reject_and_resume(store_url: str) -> None:
    _, token, ask_token = _suspended_store(store_url)
    rejected = invoke("approvals", "reject", token, "--reason", "freeze", "--store", store_url, "--agents", AGENTS)
    assert rejected.exit_code == 0 and ": done" in rejected.stdout
    resumed = invoke("resume", ask_token, '{"answer": 42}', "--json", "--store", store_url, "--agents", AGENTS)
    assert resumed.exit_code == 0, resumed.output

    async def check() -> list[str]:
        store = await open_store(store_url)
        try:
            runs = await store.list_runs()
            return [r.status for r in runs]
        finally:
            await store.close()

    assert "suspended" not in asyncio.run(check())


def test_recover_re_drives_runs_left_running(store_url: str) -> None:
    async def crashed_run() -> str:
        store = await open_store(store_url)
        try:
            session = Session(store=store, agent=make_agents()["ops"])
            result = await session.start("hello")
            state = result.state.model_copy(update={"status": "running", "result": None})
            await store.save(state)  # what a crash mid-run leaves behind
            return result.run_id
        finally:
            await store.close()

    run_id = asyncio.run(crashed_run())
    recovered = invoke("recover", "--store", store_url, "--agents", AGENTS)
    assert recovered.exit_code == 0, recovered.output
    assert f"{run_id}: done" in recovered.stdout
    assert "no run was left running" in invoke("recover", "--store", store_url, "--agents", AGENTS).stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("sessions", "list", "--store", "bogus://x"), "unknown store scheme"),
        (("sessions", "list", "--store", "postgresql://u:pw@127.0.0.1:1/db"), "cannot connect"),
        (("sessions", "tree", "nope"), "no session"),
        (("sessions", "show", "nope"), "no session"),
        (("approvals", "approve", "not-a-token"), "no suspended run holds that token"),
        (("approvals", "approve", "x", "--json", "{oops"), "not valid JSON"),
        (("resume", "x", "{oops", "--json"), "not valid JSON"),
        (("recover", "--agents", "no_such_module:agents"), "cannot import agents"),
        (("recover", "--agents", "nocolon"), "module:attr"),
        (("demo", "--backend", "spark"), "--backend must be"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(store_url: str, args: tuple[str, ...], message: str, tmp_path: Path) -> None:
    if "--store" not in args and args[0] != "demo":
        asyncio.run(_empty_store(store_url))  # a command reads a store that is there (none: test_bad_input.py)
        args = (*args, "--store", store_url)
    before = sorted(p.name for p in tmp_path.iterdir())
    line = _error_line(invoke(*args))
    assert message in line
    assert "pw" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing created


async def _empty_store(store_url: str) -> None:
    store = await open_store(store_url)
    await store.close()


@pytest.mark.parametrize("backend", ["ray", "local"])
def test_demo_end_to_end_on_five_sessions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("demo", "--sessions", "5", "--backend", backend, "--delay", "0.01")
    assert result.exit_code == 0, result.output
    assert "summary" in result.stdout and "5/5" in result.stdout
    assert "15 / 15" in result.stdout  # the models' delegated calls, one child session each
    assert "Parquet export" in result.stdout and "DuckDB" in result.stdout
    assert (tmp_path / ".repertory" / "repertory.db").exists()
    exported = json.dumps(sorted(p.name for p in (tmp_path / ".repertory" / "export").iterdir()))
    assert "sessions" in exported and "messages" in exported
