"""The caller's process SIGKILLed mid-call, ten times: each call is still exactly one remote task.

A worker (``_crash_worker``) makes its calls one after another against the ``a2a-sdk`` peer, each a
remote task that works for 0.3 s. While call k's task runs, the test SIGKILLs the worker (a little
later each time, so kills land in the remote's work, around its end and around the commit of the
result), then starts a new worker, which re-drives the killed call before it makes the next one:
the call must find the remote task its first attempt opened and follow it, never send it again.
The peer's log counts the tasks it received: one per call, each answered to its own call.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

from tests.a2a._crash_worker import SLOW
from tests.a2a.helpers import ROOT, Peer, wait_until

CALLS = 10


def _spawn(db: Path, peer: Peer, calls: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.a2a._crash_worker", str(db), peer.url, str(calls)],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _tasks_for(peer: Peer, k: int) -> int:
    """How many tasks the peer received for call k."""
    return sum(1 for line in peer.lines("task") if line[3] == f"slow_{SLOW}_call_{k}")


def _received(peer: Peer, k: int) -> bool:
    return _tasks_for(peer, k) >= 1


def test_ten_kills_mid_call_leave_one_remote_task_per_call(tmp_path: Path, peer: Peer) -> None:
    db = tmp_path / "caller.db"
    killed = 0
    for k in range(CALLS):
        proc = _spawn(db, peer, k + 1)
        try:
            wait_until(partial(_received, peer, k), what=f"the peer receiving call {k}")
            time.sleep((k % 4) * 0.15)  # 0 to 0.45 s into a 0.3 s task: a crash lands anywhere, not awaitable
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        # A kill that lands after the worker finished its last call (the latest ones, on a fast turn)
        # killed nothing: that call is done, and the next worker must not send it again either.
        assert proc.returncode in (-signal.SIGKILL, 0), err
        killed += proc.returncode == -signal.SIGKILL
    assert killed >= CALLS // 2, f"only {killed} of {CALLS} kills landed mid-call"
    last = _spawn(db, peer, CALLS)  # re-drives the last killed call
    out, err = last.communicate(timeout=60)
    assert last.returncode == 0, err
    done = [line for line in out.splitlines() if line.startswith("done ")]
    assert done == [f"done {k} ok: echo: slow {SLOW} call_{k}" for k in range(CALLS)]
    assert [_tasks_for(peer, k) for k in range(CALLS)] == [1] * CALLS, peer.lines("task")
    assert len(peer.lines("task")) == CALLS
