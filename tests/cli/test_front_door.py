"""The CLI decides through the session tree (issue 40, one front door): the run and its turn end together.

Before, ``repertory approvals approve`` decided a session's run through the bare ``Session`` API:
the run ended ``done`` but its turn stayed ``suspended`` for good and no ``turn.completed`` was
written, so every waiter on the turn waited forever. Now a decision goes through the tree: applied
by the process that serves the store when one runs (through the store's decision inbox, so the
server stays the session's one driver), else by the deciding process itself.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from langgraph_sdk import get_client

from repertory import Runtime, Session, SqliteSessionStore
from repertory.core.tree import SessionEvent
from repertory.errors import TreeSessionRun
from tests.cli.test_session_commands import AGENTS, make_agents
from tests.http.conftest import human
from tests.http.test_serve import _serve as serve

ROOT = Path(__file__).resolve().parents[2]
COMMAND = Path(sys.executable).with_name("repertory")
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


async def _cli(*args: str) -> tuple[int, str, str]:
    """Run ``repertory ARGS`` as a process of its own; its exit code, stdout and stderr."""
    proc = await asyncio.create_subprocess_exec(
        str(COMMAND), *args, cwd=ROOT, env=ENV, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def _suspended(store_url: str, prompt: str) -> tuple[str, str]:
    """A session whose turn waits on an approval (``deploy``) or a question (``ask``): (session id, token)."""
    async with await Runtime.start(store=store_url, agents=make_agents()) as rt:
        handle = await rt.create_session(agent="ops")
        result = await handle.run(prompt)
        assert result.status == "suspended" and result.state.suspended_on is not None
        return handle.id, result.state.suspended_on.token


async def _log(path: Path, session_id: str) -> list[SessionEvent]:
    async with await SqliteSessionStore.open(path) as store:
        return await store.load_events(session_id)


async def _turn_status(path: Path, session_id: str) -> list[str]:
    async with await SqliteSessionStore.open(path) as store:
        return [t.status for t in await store.list_turns(session_id)]


def _completed_once(events: list[SessionEvent]) -> None:
    kinds = [e.type for e in events]
    assert kinds.count("turn.completed") == 1 and kinds[-1] == "turn.completed", kinds
    assert events[-1].data.get("status") == "done", events[-1].data


@pytest.mark.parametrize(
    ("prompt", "args", "says"),
    [
        ("deploy it", ("approvals", "approve"), "deployed to prod"),
        ("deploy it", ("approvals", "reject", "--reason", "not today"), "ok:"),
        ("ask me", ("resume",), "ok: staging"),
    ],
)
async def test_a_cli_decision_with_no_server_ends_the_run_and_its_turn(
    tmp_path: Path, prompt: str, args: tuple[str, ...], says: str
) -> None:
    path = tmp_path / "cli.db"
    session_id, token = await _suspended(f"sqlite:///{path}", prompt)
    answer = ("staging",) if args == ("resume",) else ()
    code, out, err = await _cli(*args, token, *answer, "--store", f"sqlite:///{path}", "--agents", AGENTS)
    assert code == 0, err
    assert ": done" in out
    assert await _turn_status(path, session_id) == ["done"]
    events = await _log(path, session_id)
    _completed_once(events)
    decided = [(e.data["decision"], e.data["decided_by"]) for e in events if e.type == "approval.decided"]
    expected = {"approve": "approved", "reject": "rejected"}.get(args[1]) if args[0] == "approvals" else None
    me = f"user:{getpass.getuser()}"
    assert decided == ([] if expected is None else [(expected, me)])
    code, out, _ = await _cli("sessions", "show", session_id, "--store", f"sqlite:///{path}")
    assert code == 0 and (expected is None or f"{expected} by {me}" in out)
    async with await SqliteSessionStore.open(path) as store:
        [run] = await store.list_runs(session_id)
        assert run.status == "done"
        for record in run.approvals:  # the CLI's user, stamped by the host that applied the decision
            assert record.decided_by == f"user:{getpass.getuser()}"
        history = await store.load_history(run.history_revision_id or "")
        assert history is not None and says in " ".join(str(m.model_dump()) for m in history.messages)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Path, str, list[str]]]:
    """``repertory serve`` on a SQLite store; yields the store's path, the URL and (at the end) its stderr lines."""
    path = tmp_path / "served.db"
    said: list[str] = []
    proc, url = await serve("--store", f"sqlite:///{path}", agents=AGENTS, said=said)
    try:
        yield path, url, said
    finally:
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), 60) == 0


async def test_a_cli_decision_while_the_server_drives_the_session_is_applied_there_once(
    served: tuple[Path, str, list[str]],
) -> None:
    path, url, said = served
    async with get_client(url=url, api_key=None) as client:
        thread = await client.threads.create()
        tid = thread["thread_id"]
        await client.runs.wait(tid, "ops", input=human("deploy it"))
        assert (await client.threads.get(tid))["status"] == "interrupted"  # the server holds it, suspended
        async with await SqliteSessionStore.open(path) as store:
            [run] = await store.list_runs(tid)
            assert run.suspended_on is not None
            token = run.suspended_on.token
        code, out, err = await _cli("approvals", "approve", token, "--store", f"sqlite:///{path}", "--agents", AGENTS)
        assert code == 0, err
        assert ": done" in out
        # The server applied it in its own mailbox: its view is current, and it goes on serving the thread.
        assert (await client.threads.get(tid))["status"] == "idle"
        state = await client.threads.get_state(tid)
        assert "deployed to prod" in str(state["values"])
        again = await client.runs.wait(tid, "ops", input=human("thanks"))
        assert "ok: thanks" in str(again)
    assert await _turn_status(path, tid) == ["done", "done"]
    events = await _log(path, tid)
    assert [e.type for e in events].count("turn.completed") == 2
    async with await SqliteSessionStore.open(path) as store:
        assert await store.pending_decision_requests(2**62, 10) == []  # the server took the request
    assert not [line for line in said if "Traceback" in line or "CommitConflict" in line], said


async def test_a_decision_raced_from_two_processes_is_taken_once(tmp_path: Path) -> None:
    path = tmp_path / "race.db"
    session_id, token = await _suspended(f"sqlite:///{path}", "deploy it")
    before = len(await _log(path, session_id))
    store = ("--store", f"sqlite:///{path}", "--agents", AGENTS)
    outcomes = await asyncio.gather(
        _cli("approvals", "approve", token, *store), _cli("approvals", "reject", token, *store)
    )
    codes = sorted(code for code, _, _ in outcomes)
    assert codes == [0, 2], outcomes
    [(_, _, lost)] = [o for o in outcomes if o[0] == 2]
    assert lost.startswith("error: ") and "token" in lost
    events = await _log(path, session_id)
    _completed_once(events)
    assert await _turn_status(path, session_id) == ["done"]
    # The loser wrote nothing to the session: one decision's events past the suspension, no more.
    assert len([e for e in events[before:] if e.type == "turn.completed"]) == 1


async def test_the_bare_session_api_refuses_a_run_of_the_tree(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'bare.db'}"
    session_id, token = await _suspended(url, "deploy it")
    agent = make_agents()["ops"]
    async with await SqliteSessionStore.open(tmp_path / "bare.db") as store:
        [run] = await store.list_runs(session_id)
        with pytest.raises(TreeSessionRun, match="decide or recover it through its handle"):
            await Session.approve_suspended(store=store, agent=agent, run_id=run.run_id, resume_token=token)
        with pytest.raises(TreeSessionRun):
            await Session.recover(store=store, agent=agent, run_id=run.run_id)
        [still] = await store.list_runs(session_id)
        assert still.status == "suspended"  # nothing written
