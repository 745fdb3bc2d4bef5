"""Never a call sent twice: processes driving MCP tools are SIGKILLed in the middle of calls.

The tools live on a real MCP server (the SDK-written test server, a child of the killed process)
that logs every call it receives. A non-idempotent call (``charge``, no annotations) is committed
before it is sent; after a crash it gets the "outcome unknown" result and is never sent again. An
idempotent one (``put``, ``idempotentHint: true``) is sent again by the recovery.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from repertory import Session, SqliteSessionStore
from repertory.core.history import MessageHistory
from repertory.mcp import close_connections
from tests.mcp._crash_worker import STEPS, build_agent, once_step
from tests.mcp.helpers import ROOT, calls, process_alive, wait_until
from tests.mcp.servers import _log
from tests.runtime.helpers import assert_paired, tool_calls

KILLS = 20


def _spawn(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.mcp._crash_worker", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _ready(proc: subprocess.Popen[bytes]) -> list[str]:
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    if not line or line[0] != b"ready":
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"worker did not start: {line!r}\n{err.decode(errors='replace')}")
    return [part.decode() for part in line[1:]]


def _kill(proc: subprocess.Popen[bytes], log: Path) -> None:
    """SIGKILL the worker, then the server it had started if it still runs (it may be mid-call)."""
    os.kill(proc.pid, signal.SIGKILL)
    _, err = proc.communicate()
    assert proc.returncode == -signal.SIGKILL, err.decode(errors="replace")
    for pid in {e["pid"] for e in _log.read(log)}:
        if process_alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_sigkill_mid_call_many_times_never_sends_a_non_idempotent_call_twice(tmp_path: Path) -> None:
    db, log, commits = tmp_path / "crash.db", tmp_path / "calls.jsonl", tmp_path / "commits.log"
    seed = int(os.environ.get("CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    for kill in range(KILLS):
        before = len(_log.read(log))
        proc = _spawn("loop", str(db), str(log), str(commits))
        _ready(proc)
        # Kill while calls are arriving at this incarnation's server: after the first, at a random point.
        wait_until(
            lambda before=before, proc=proc: len(_log.read(log)) > before or proc.poll() is not None,
            what="a call to the server",
        )
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"worker exited on its own (seed {seed}, kill {kill}):\n{err.decode(errors='replace')}")
        time.sleep(rng.uniform(0.0, 0.15))  # the random kill point, not a wait for anything
        _kill(proc, log)
    asyncio.run(_verify(db, log, commits, seed))


async def _verify(db: Path, log: Path, commits: Path, seed: int) -> None:
    store = await SqliteSessionStore.open(db)
    try:
        agent = build_agent(str(log))
        for run in [r for r in await store.list_runs() if r.status in ("running", "error")]:
            r = await Session.recover(store=store, agent=agent, run_id=run.run_id)
            assert r.status == "done", f"seed {seed}: run {run.run_id} recovered to {r.status}"
        runs = await store.list_runs()
        assert len(runs) >= 3, f"seed {seed}: the workers made almost no progress"
        refs: set[str] = set()
        lineages: dict[str, set[str]] = {}
        unknown = 0
        for run in runs:
            assert run.status == "done" and run.step_index == STEPS, f"seed {seed}: {run.run_id} is {run.status}"
            assert run.history_revision_id is not None
            history = await store.load_history(run.history_revision_id)
            assert isinstance(history, MessageHistory)
            assert_paired(history.messages)
            lineages[run.run_id] = {rev.id for rev in history.revisions}
            for call in tool_calls(history.messages):
                refs.add(str(call.args.get("ref") or call.args.get("key")))
            unknown += sum(1 for m in history.messages for p in m.tool_results if "outcome unknown" in str(p.result))
        charged = Counter(e["args"]["ref"] for e in calls(log, "charge"))
        twice = sorted(ref for ref, n in charged.items() if n > 1)
        assert not twice, f"seed {seed}: non-idempotent MCP calls sent twice: {twice}"
        # Committed before sent: every charge the server received belongs to a call in a history.
        assert set(charged) <= refs, f"seed {seed}: calls sent that no history holds: {set(charged) - refs}"
        for run_id, revision in (line.split() for line in commits.read_text().splitlines() if line.strip()):
            assert revision in lineages[run_id], f"seed {seed}: revision {revision} of run {run_id} was lost"
        print(f"seed {seed}: {len(runs)} runs, {sum(charged.values())} charges, {unknown} outcome-unknown results")
    finally:
        await close_connections()
        await store.close()


@pytest.mark.parametrize(
    ("tool", "received", "reply"),
    [("charge", 1, "error: outcome unknown"), ("put", 2, "ok: ")],
    ids=["non-idempotent: outcome unknown, sent once", "idempotent: sent again"],
)
def test_a_call_in_flight_when_its_process_is_killed(tmp_path: Path, tool: str, received: int, reply: str) -> None:
    db, log = tmp_path / "once.db", tmp_path / "calls.jsonl"
    proc = _spawn("once", str(db), str(log), tool)
    [run_id] = _ready(proc)
    wait_until(lambda: len(calls(log, tool)) == 1, what=f"the {tool} call reaching the server")
    _kill(proc, log)  # the server is killed too: it was in the middle of answering
    assert calls(log, tool, "done") == []

    async def recover() -> str:
        store = await SqliteSessionStore.open(db)
        try:
            result = await Session.recover(store=store, agent=build_agent(str(log), once_step(tool)), run_id=run_id)
            assert result.status == "done" and result.text is not None
            return result.text
        finally:
            await close_connections()
            await store.close()

    text = asyncio.run(recover())
    assert text.startswith(reply), text
    assert len(calls(log, tool)) == received
