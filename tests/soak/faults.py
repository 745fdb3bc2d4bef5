"""The fault schedule and the injectors: what hits the fleet, when, drawn from ``random.Random(seed)``.

Kinds, by where they apply:

- every run: ``driver_kill`` (SIGKILL of the driver process; the conductor starts it again and its
  runtime re-drives the open turns), ``approver_kill`` (SIGKILL of the approver process, started
  again), ``mcp_kill`` (SIGKILL of a stdio MCP server child; the next call reconnects);
- SQLite: ``sqlite_lock`` (another connection holds the database's write lock, ``BEGIN EXCLUSIVE``,
  for 2-12 s: the fleet's writes wait, and past the store's 10 s busy timeout fail with "database
  is locked") and ``disk_full`` (the store's folder is a small tmpfs of the run's own, with the
  database, its ``-wal`` and its ``-shm``; a ballast file fills it to the last block for 2-5 s,
  then goes: every write that needs a new block fails with ``SQLITE_FULL``, which the store raises
  as ``StoreFull``). The full disk is issue 26's read-only folder made real: this machine runs as
  root, where ``chmod`` stops nothing, and a running SQLite process writes through descriptors it
  already holds. Mounting needs root; where it is refused ``disk_full`` is left out of
  ``kinds_for`` and the run's outcome says why (``left_out``);
- PostgreSQL: ``pg_restart`` (stopped and started at once) and ``pg_stop`` (stopped for 2-5 s);
- Ray: ``ray_host_kill`` (SIGKILL of a session host's worker process; Ray restarts the actor and it
  re-drives its runs), ``supervisor_kill`` (SIGKILL of the supervisor's process) and
  ``ray_node_remove`` (a worker node removed hard with ``ray.cluster_utils``, a fresh one added).

Slow and failing model replies are not scheduled here: they are drawn per request from the seed
by the workload's models (``tests.soak.workload``).
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.soak import tmpfs

__all__ = ["Fault", "Schedule", "fill_disk", "find_processes", "hold_sqlite_lock", "kinds_for", "schedule"]

_WEIGHTS = {
    "driver_kill": 3,
    "approver_kill": 2,
    "mcp_kill": 2,
    "sqlite_lock": 2,
    "disk_full": 2,
    "pg_restart": 1,
    "pg_stop": 1,
    "ray_host_kill": 2,
    "supervisor_kill": 1,
    "ray_node_remove": 1,
}


def kinds_for(backend: str, store: str, *, small_disk: bool = True) -> list[str]:
    """The fault kinds built for this backend and store; ``disk_full`` only with ``small_disk`` (a tmpfs mounted)."""
    kinds = ["driver_kill", "approver_kill", "mcp_kill"]
    if store == "sqlite":
        kinds += ["sqlite_lock", "disk_full"] if small_disk else ["sqlite_lock"]
    else:
        kinds += ["pg_restart", "pg_stop"]
    if backend == "ray":
        kinds += ["ray_host_kill", "supervisor_kill", "ray_node_remove"]
    return kinds


@dataclass
class Fault:
    """One fault: planned at ``at_s`` seconds into the run; the rest is filled in when it is injected."""

    kind: str
    at_s: float
    at_ms: int | None = None
    ended_ms: int | None = None
    target: str | None = None
    recovered_at_ms: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def line(self) -> dict[str, Any]:
        """The fault's line in ``faults.jsonl``."""
        return {
            "kind": self.kind,
            "at_ms": self.at_ms,
            "ended_ms": self.ended_ms,
            "target": self.target,
            "recovered_at_ms": self.recovered_at_ms,
            **self.detail,
        }


Schedule = list[Fault]


def schedule(
    seed: int, seconds: float, kinds: list[str], *, first_s: float = 4.0, gap_s: tuple[float, float] = (3, 8)
) -> Schedule:
    """Faults from ``first_s`` to a few seconds before the end, a seeded gap apart, kinds by weight.

    Every kind built comes once before any comes twice (in a seeded order), so a short run still
    injects each of them; after that they are drawn by weight.
    """
    rng = random.Random(seed)
    order = list(kinds)
    rng.shuffle(order)
    faults: Schedule = []
    at = first_s
    while at < seconds - 3:
        kind = order.pop() if order else rng.choices(kinds, weights=[_WEIGHTS[k] for k in kinds])[0]
        faults.append(Fault(kind=kind, at_s=round(at, 3)))
        at += rng.uniform(*gap_s)
    return faults


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # the command may hold spaces and parentheses


def find_processes(match: Callable[[list[str]], bool], *, below: int | None = None) -> list[int]:
    """Pids of this process's descendants (of ``below``'s) whose command line satisfies ``match``.

    Only descendants: the machine is shared, and a fault must never reach a process this run did
    not start (another user's Ray host or MCP server has the same command line as ours).
    """
    ancestor = os.getpid() if below is None else below
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        argv = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
        if not argv or not match(argv):
            continue
        pid: int | None = int(entry)
        seen = 0
        while pid is not None and pid > 1 and seen < 64:
            pid = _parent(pid)
            seen += 1
            if pid == ancestor:
                found.append(int(entry))
                break
    return sorted(found)


def kill(pid: int) -> bool:
    """SIGKILL ``pid``; whether it was there to kill."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def hold_sqlite_lock(db: Path, seconds: float) -> float:
    """Hold ``db``'s write lock for ``seconds`` from another connection; returns how long getting it took."""
    started = time.monotonic()
    conn = sqlite3.connect(db, timeout=60, isolation_level=None)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        got = time.monotonic() - started
        time.sleep(seconds)
        conn.execute("ROLLBACK")
    finally:
        conn.close()
    return got


def fill_disk(root: Path, db: Path, seconds: float) -> dict[str, Any]:
    """Fill the tmpfs at ``root`` with ballast for ``seconds``, then free it; what it did, for the fault's line.

    The write-ahead log is emptied first (``wal_checkpoint(TRUNCATE)``, as the store's own WAL
    keeper does past its limit): SQLite reuses a log from its start after each checkpoint, so a
    full disk under a log already grown to its usual size fails no write at all (measured: a
    2.7 s fault, 0 errors). Emptied, the log needs new blocks at the next commit. The ballast goes
    even when the wait is cut short, so the fleet never stays on a full disk.
    """
    usage = os.statvfs(root)
    detail: dict[str, Any] = {"used_bytes_before": (usage.f_blocks - usage.f_bfree) * usage.f_frsize}
    conn = sqlite3.connect(db, timeout=2, isolation_level=None)
    try:
        busy, log, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        detail["wal_emptied"] = not busy and log == 0
    except sqlite3.Error as exc:
        detail["wal_emptied"] = f"no: {exc}"
    finally:
        conn.close()
    try:
        detail["ballast_bytes"] = tmpfs.fill(root)
        time.sleep(seconds)
    finally:
        tmpfs.drain(root)
    return detail
