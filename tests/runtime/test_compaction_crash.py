"""A real crash during compaction: a child process on a SQLite file is SIGKILLed, then recovered here.

Killed while the summary request is in flight, nothing of the compaction is in the store; the
recovery compacts once and goes on. Killed right after the boundary was committed, the recovery
finds the context already compacted and does not summarise again. Either way every message is
there once, in order, tool calls stay paired, and each request of the recovery fits the budget.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from repertory import Session, SqliteSessionStore
from repertory.core.messages import ModelMessage
from tests.runtime.compact_script import BUDGET, Conversation, compacting_agent, prompt
from tests.runtime.helpers import assert_paired

ROOT = Path(__file__).resolve().parents[2]


def _run_until(db: Path, stage: str) -> str:
    """Start the worker, read its thread id, SIGKILL it at its stop line; returns the thread id."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.runtime._compaction_crash_worker", str(db), stage],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    thread_id = ""
    try:
        for raw in proc.stdout:
            line = raw.decode().strip()
            if line.startswith("thread "):
                thread_id = line.split()[1]
            elif line in ("summarizing", "compacted"):
                break
        else:
            _, err = proc.communicate(timeout=60)
            pytest.fail(f"the worker ended before its stop line: {err.decode(errors='replace')}")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    return thread_id


async def _lineage(store: SqliteSessionStore, thread_id: str) -> list[ModelMessage]:
    thread = await store.load_thread(thread_id)
    assert thread is not None and thread.history_revision_id is not None
    history = await store.load_history(thread.history_revision_id)
    assert history is not None
    return history.messages


@pytest.mark.parametrize("stage", ["during", "after"])
def test_a_crash_during_compaction_loses_nothing_and_summarises_once(tmp_path: Path, stage: str) -> None:
    db = tmp_path / "compaction-crash.db"
    thread_id = _run_until(db, stage)
    asyncio.run(_recover_and_check(db, thread_id, stage))


async def _recover_and_check(db: Path, thread_id: str, stage: str) -> None:
    store = await SqliteSessionStore.open(db)
    try:
        left = await _lineage(store, thread_id)
        assert sum(m.boundary for m in left) == (0 if stage == "during" else 1)
        turns = [m.text for m in left if m.role == "user" and not m.boundary]
        conversation = Conversation()
        agent = compacting_agent(conversation)
        running = [r for r in await store.list_runs(thread_id) if r.status == "running"]
        assert len(running) == 1
        recovered = await Session.recover(store=store, agent=agent, run_id=running[0].run_id)
        assert recovered.status == "done"
        sess = Session(store=store, agent=agent, thread_id=thread_id)
        n = len(turns)
        for i in range(n, n + 2):
            assert (await sess.start(prompt(i))).status == "done"

        messages = await _lineage(store, thread_id)
        assert sum(m.boundary for m in messages) == 1  # one summary of that stretch, never two
        assert len(conversation.summary_requests) >= (1 if stage == "during" else 0)
        if stage == "after":
            assert conversation.summary_requests == []  # the recovery found the context compacted
        assert [m.text for m in messages if m.role == "user" and not m.boundary] == [prompt(i) for i in range(n + 2)]
        assert_paired(messages)
        assert max(tokens for _, tokens, _ in conversation.requests) <= BUDGET
    finally:
        await store.close()
