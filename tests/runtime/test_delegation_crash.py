"""Real crashes of a delegating runtime: a process whose boss delegates twice is SIGKILLed, then restarted.

The kill lands during a child's run, during the parent's wait for a child's approval, and just
before or just after the commit of the parent's call results. Whatever the point, the restarted
runtime (``_delegation_worker``) finishes the same tree: exactly one child per call, one result per
call, each the child's own answer (never "outcome unknown"). The approval left pending by the
killed process is listed and decided at the root by another process: this test's own runtime.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from repertory import Runtime

from ._delegation_worker import TASKS, make_agents
from .helpers import assert_paired

ROOT = Path(__file__).resolve().parents[2]


def _spawn(db: Path, folder: Path, kill_at: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.runtime._delegation_worker", str(db), str(folder), kill_at],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _line(proc: subprocess.Popen[bytes]) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline().decode().strip()


def _run_to_the_end(db: Path, folder: Path, kill_at: str) -> str:
    """Run workers until one finishes the root's turn; returns its text. Each crash is one restart."""
    for _ in range(4):
        proc = _spawn(db, folder, kill_at)
        out, err = proc.communicate(timeout=120)
        lines = out.decode().split("\n")
        done = [line for line in lines if line.startswith("done ")]
        if proc.returncode == 0 and done:
            return done[0][len("done ") :]
        assert proc.returncode == -signal.SIGKILL, err.decode(errors="replace")
    pytest.fail("the workers never finished the root's turn")


async def _check_tree(db: Path, folder: Path) -> None:
    """One child per call, each with one turn; the root's calls each paired with that child's answer."""
    async with await Runtime.start(store=f"sqlite:///{db}", agents=make_agents(folder, "")) as rt:
        [root] = await rt.store.list_sessions(roots_only=True)
        children = await rt.store.list_children(root.session_id)
        assert sorted(c.title or "" for c in children) == sorted(TASKS)
        [run] = await rt.store.list_runs(root.session_id)
        assert run.status == "done"
        assert len(run.delegations) == len(TASKS)
        assert {d.session_id for d in run.delegations} == {c.session_id for c in children}
        for child in children:
            turns = await rt.store.list_turns(child.session_id)
            assert [t.status for t in turns] == ["done"]
        assert run.history_revision_id is not None
        history = await rt.store.load_history(run.history_revision_id)
        assert history is not None
        assert_paired(history.messages)
        results = [p for m in history.messages for p in m.tool_results]
        assert sorted(str(r.result) for r in results) == sorted(f"did {t}" for t in TASKS)
        assert not any(r.is_error for r in results)


def _requests(folder: Path) -> Counter[str]:
    path = folder / "requests.log"
    lines = path.read_text().split("\n") if path.exists() else []
    return Counter(line.split()[1] for line in lines if line.strip())


@pytest.mark.parametrize("kill_at", ["child_run", "before_result_commit", "after_result_commit"])
def test_a_kill_leaves_exactly_one_child_and_one_result_per_call(tmp_path: Path, kill_at: str) -> None:
    db = tmp_path / "tree.db"
    text = _run_to_the_end(db, tmp_path, kill_at)
    assert (tmp_path / f"fired-{kill_at}").exists(), "the crash never happened"
    assert text == "boss: " + " | ".join(f"did {t}" for t in TASKS)
    asyncio.run(_check_tree(db, tmp_path))
    asked = _requests(tmp_path)
    assert len(asked) == len(TASKS), asked
    if kill_at == "child_run":
        # The child killed in its request was asked once more; its sibling, if it was asking too.
        assert max(asked.values()) == 2 and min(asked.values()) >= 1, asked
    else:
        assert sorted(asked.values()) == [1, 1], asked  # the children had finished: nobody is asked again


def test_a_kill_while_the_parent_waits_for_an_approval_is_decided_from_the_root_in_another_process(
    tmp_path: Path,
) -> None:
    db = tmp_path / "tree.db"
    proc = _spawn(db, tmp_path, "parent_wait")
    try:
        assert _line(proc) == "ready"
        assert _line(proc) == "waiting"  # the child waits for an approval, the parent waits for the child
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
    asyncio.run(_decide_at_the_root(db, tmp_path))
    asyncio.run(_check_tree(db, tmp_path))
    assert sorted(_requests(tmp_path).values()) == [1, 2]  # the approving child was asked again, once


async def _decide_at_the_root(db: Path, folder: Path) -> None:
    async with await Runtime.start(store=f"sqlite:///{db}", agents=make_agents(folder, "")) as rt:
        [record] = await rt.store.list_sessions(roots_only=True)
        root = await rt.session(record.session_id)
        [pending] = await root.pending_approvals(tree=True)
        assert pending.kind == "approval" and pending.session_id != root.id
        await asyncio.wait_for(root.approve(pending.token), 30)
        [turn] = await rt.store.list_turns(root.id)
        result = await asyncio.wait_for(root.get_turn(turn.submission_id).result(), 30)
        assert result.text is not None and result.text.startswith("boss: ")
