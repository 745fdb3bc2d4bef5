"""Real crashes: a child process driving sessions on a SQLite file is SIGKILLed at random points.

After every kill the child is restarted (it recovers what it left ``running``); at the end the
parent recovers the rest. Whatever the timing: a non-idempotent tool never ran twice for one call,
every run reaches ``done`` with each call paired to exactly one result, and every commit the child
saw succeed is still in its run's history. A second test races two processes for one token.
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

from ._crash_worker import STEPS, build_agent, race_agent
from .helpers import assert_paired, tool_calls

ROOT = Path(__file__).resolve().parents[2]
KILLS = 30
"""Kills of the long loop (``make test-all``); ``make test`` runs the same loop with ``SHORT_KILLS``."""
SHORT_KILLS = 8


def _spawn(*args: str, stdin: bool = False) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.runtime._crash_worker", *args],
        cwd=ROOT,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _await_ready(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != b"ready":
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"worker did not start: {line!r}\n{err.decode(errors='replace')}")


def _lines(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.split() for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("kills", [SHORT_KILLS, pytest.param(KILLS, marks=pytest.mark.slow)])
def test_sigkill_at_random_points_loses_nothing_and_repeats_nothing(tmp_path: Path, kills: int) -> None:
    db, log, commits = tmp_path / "crash.db", tmp_path / "tools.log", tmp_path / "commits.log"
    seed = int(os.environ.get("CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    for kill in range(kills):
        proc = _spawn("loop", str(db), str(log), str(commits))
        _await_ready(proc)
        time.sleep(rng.uniform(0.003, 0.1))  # the random kill point, not a wait for anything
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(
                f"worker exited on its own (seed {seed}, kill {kill}): rc={proc.returncode}\n"
                f"{err.decode(errors='replace')}"
            )
        os.kill(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        assert proc.returncode == -signal.SIGKILL, err.decode(errors="replace")

    asyncio.run(_verify(db, log, commits, seed))


async def _verify(db: Path, log: Path, commits: Path, seed: int) -> None:
    store = await SqliteSessionStore.open(db)
    try:
        agent = build_agent(str(log))
        left = [r for r in await store.list_runs() if r.status in ("running", "error")]
        for run in left:
            r = await Session.recover(store=store, agent=agent, run_id=run.run_id)
            assert r.status == "done", f"seed {seed}: run {run.run_id} recovered to {r.status}"
        runs = await store.list_runs()
        assert len(runs) >= 3, f"seed {seed}: the workers made almost no progress"
        lineages: dict[str, set[str]] = {}
        call_ids: set[str] = set()
        for run in runs:
            assert run.status == "done", f"seed {seed}: run {run.run_id} is {run.status}"
            assert run.step_index == STEPS and run.result == "done"
            assert run.history_revision_id is not None
            history = await store.load_history(run.history_revision_id)
            assert isinstance(history, MessageHistory)
            assert_paired(history.messages)
            lineages[run.run_id] = {rev.id for rev in history.revisions}
            call_ids |= {c.tool_call_id for c in tool_calls(history.messages)}

        tool_log = _lines(log)
        charges = [line[1] for line in tool_log if line[0] == "charge"]
        twice = [cid for cid, n in Counter(charges).items() if n > 1]
        assert not twice, f"seed {seed}: non-idempotent calls ran twice: {twice}"
        # A non-idempotent call is committed before it runs, so every charge that ran is in a history.
        assert set(charges) <= call_ids, f"seed {seed}: charges ran for calls never committed"

        committed = _lines(commits)
        assert committed
        for run_id, revision in committed:
            assert run_id in lineages, f"seed {seed}: run {run_id} vanished"
            assert revision in lineages[run_id], (
                f"seed {seed}: revision {revision} committed by run {run_id} is gone from its history"
            )
    finally:
        await store.close()


def test_two_processes_race_for_one_approval_token(tmp_path: Path) -> None:
    db, log = tmp_path / "race.db", tmp_path / "race.log"
    for round_ in range(4):
        run_id, token = asyncio.run(_suspended_run(db, log))
        procs = [_spawn("race", str(db), str(log), run_id, token, stdin=True) for _ in range(2)]
        for p in procs:
            _await_ready(p)
        for p in procs:  # release both at once
            assert p.stdin is not None
            p.stdin.write(b"go\n")
            p.stdin.flush()
        outcomes = []
        for p in procs:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0, err.decode(errors="replace")
            outcomes.append(out.decode().strip())
        assert sorted(outcomes) == ["invalid", "ok"], f"round {round_}: {outcomes}"
        released = [line for line in _lines(log) if line[0] == "release" and line[2] == run_id]
        assert len(released) == 1, f"round {round_}: the approved tool ran {len(released)} times"
        asyncio.run(_check_done(db, run_id))


async def _suspended_run(db: Path, log: Path) -> tuple[str, str]:
    store = await SqliteSessionStore.open(db)
    try:
        r = await Session(store=store, agent=race_agent(str(log))).start("release the funds")
        assert r.status == "suspended" and r.state.suspended_on is not None
        return r.run_id, r.state.suspended_on.token
    finally:
        await store.close()


async def _check_done(db: Path, run_id: str) -> None:
    store = await SqliteSessionStore.open(db)
    try:
        run = await store.load_run(run_id)
        assert run is not None and run.status == "done" and run.history_revision_id is not None
        history = await store.load_history(run.history_revision_id)
        assert history is not None
        assert_paired(history.messages)
    finally:
        await store.close()
