"""The conductor: starts the store, the driver and the approver, injects the faults, quiesces, checks.

It is the one process no fault touches. It starts a fresh run folder and store (a SQLite file in
the folder's ``disk``, a small tmpfs of the run's own that the ``disk_full`` fault fills, or a
``TemporaryPostgres``), and on Ray a local cluster; then the driver and the
approver as subprocesses, each started again whenever it dies (by a fault, or by itself: that is
logged as an unexpected exit). The faults come on the seeded schedule (``tests.soak.faults``)
for ``minutes``; then it quiesces: it creates ``quiesce`` and waits for the driver to say every
accepted turn ended (the approver keeps deciding meanwhile), stops the approver, exports the store
to Parquet, writes ``faults.jsonl`` (each fault with the first turn end after it) and ``run.json``,
and runs the independent checker (``tests.soak.checker``, imported only then). At the end,
also when the run fails, the SQLite files are copied out of the tmpfs into the run folder and the
tmpfs is unmounted; where it could not be mounted at all the database is in the folder itself,
``disk_full`` is not scheduled, and the outcome's ``left_out`` says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.soak import tmpfs
from tests.soak.faults import Fault, fill_disk, find_processes, hold_sqlite_lock, kill, kinds_for, schedule
from tests.soak.records import LEDGER_TOOLS, RunPaths, append_line, now_ms, read_lines

__all__ = ["ChaosConfig", "ChaosOutcome", "run_chaos"]

ROOT = Path(__file__).resolve().parents[2]
_ENDED = ("done", "error", "cancelled")
STALL_S = 60.0
"""Quiescing longer than this on the local backend restarts the driver (see ``run_chaos``)."""
DEFER_S, DEFERRALS = 1.0, 90
"""A fault whose target is not there yet is tried again this many seconds later, at most this many times."""


@dataclass(frozen=True)
class ChaosConfig:
    """What to run: for how long, on which backend and store, from which seed, into which folder."""

    minutes: float = 5.0
    backend: str = "local"
    store: str = "sqlite"
    seed: int = 1
    out: Path | None = None
    quiesce_timeout_s: float = 300.0
    gap_s: tuple[float, float] = (3.0, 8.0)
    """The seeded gap between two faults, in seconds (a short test packs them closer)."""
    disk_mb: int = 256
    """The size of the SQLite store's tmpfs: room for the store and a 64 MB write-ahead log many times over.

    tmpfs takes memory only for what it holds, but the ``disk_full`` ballast holds all that is free."""

    @property
    def run_dir(self) -> Path:
        """``out``, else ``.repertory/chaos/<seed>`` under the current folder."""
        return (self.out or Path(".repertory") / "chaos" / str(self.seed)).absolute()


@dataclass
class ChaosOutcome:
    """A run's figures; ``violations`` is ``None`` when the checker is not installed."""

    run_dir: str
    minutes: float
    backend: str
    store: str
    seed: int
    turns: int = 0
    accepted: int = 0
    accepted_lost: int = 0
    lost_detail: list[str] = field(default_factory=list)
    turns_by_status: dict[str, int] = field(default_factory=dict)
    faults: dict[str, int] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)
    """Fault kinds built for this backend and store that this run could not inject, and why."""
    store_full_errors: int = 0
    """``StoreFull`` errors the fleet saw: calls the driver and approver retried, and turns that ended on one."""
    recoveries: int = 0
    fault_to_serving_p50_s: float | None = None
    fault_to_serving_p99_s: float | None = None
    decisions: dict[str, int] = field(default_factory=dict)
    ledger_lines: int = 0
    retried_errors: int = 0
    unexpected_exits: list[str] = field(default_factory=list)
    quiesced: bool = False
    quiesce_restarts: int = 0
    checker: str = "missing"
    violations: int | None = None
    violation_list: list[str] = field(default_factory=list)


class _Child:
    """A subprocess the conductor keeps alive: started again after every death, one log per incarnation."""

    def __init__(self, name: str, paths: RunPaths, argv_tail: list[str]) -> None:
        self.name = name
        self.paths = paths
        self.argv_tail = argv_tail
        self.incarnation = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.killed = False
        self.unexpected: list[str] = []

    def start(self) -> None:
        self.incarnation += 1
        log = open(self.paths.logs / f"{self.name}-{self.incarnation}.log", "wb")
        tail = list(self.argv_tail)
        argv = [sys.executable, "-m", f"tests.soak.{self.name}", *tail[:4], str(self.incarnation), *tail[4:]]
        self.proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        log.close()
        self.killed = False

    def kill(self) -> int | None:
        """SIGKILL the current incarnation (a fault); the next ``keep_alive`` starts another."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        pid = self.proc.pid
        self.killed = True
        os.kill(pid, signal.SIGKILL)
        self.proc.wait()
        return pid

    def keep_alive(self, *, restart: bool = True) -> int | None:
        """Start it again if it died; returns the exit code it died with (``None``: still running)."""
        if self.proc is None:
            return None
        code = self.proc.poll()
        if code is None:
            return None
        if not self.killed and code != 0:
            log = self.paths.logs / f"{self.name}-{self.incarnation}.log"
            tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
            self.unexpected.append(f"{self.name}-{self.incarnation} exited {code}: {tail}")
        if restart:
            self.start()
        return code

    def stop(self, timeout: float) -> None:
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class _Store:
    """The run's store: a SQLite file on the run's small tmpfs (or in its folder), or a throwaway PostgreSQL server."""

    def __init__(self, kind: str, paths: RunPaths, disk_mb: int) -> None:
        self.kind = kind
        self.pg: Any = None
        self.disk: Path | None = None
        self.left_out: dict[str, str] = {}
        self.kept = paths.root / "store.db"
        """Where the SQLite database is once the run is over (copied out of the tmpfs)."""
        self.db = self.kept
        """Where the SQLite database is while the fleet runs."""
        if kind == "sqlite":
            disk = paths.root / "disk"
            refused = tmpfs.mount(disk, disk_mb << 20)
            if refused is None:
                self.disk, self.db = disk, disk / "store.db"
            else:
                self.left_out["disk_full"] = refused
            self.url = f"sqlite:///{self.db}"
        elif kind == "postgresql":
            from repertory.testing.pg_temp import TemporaryPostgres

            self.pg = TemporaryPostgres().start()
            self.url = self.pg.url
        else:
            raise ValueError(f"--store is sqlite or postgresql, not {kind!r}")

    @property
    def kept_url(self) -> str:
        """The store's URL once the run is over."""
        return f"sqlite:///{self.kept}" if self.kind == "sqlite" else self.url

    def close(self) -> None:
        """Remove the PostgreSQL server, or copy the SQLite files out of the tmpfs and unmount it."""
        if self.pg is not None:
            self.pg.cleanup()
        if self.disk is None:
            return
        try:
            tmpfs.drain(self.disk)  # a fault cut short must not leave the ballast for the copy
            for suffix in ("", "-wal"):  # every process using it has stopped: these two are the database
                live = self.db.with_name(self.db.name + suffix)
                if live.exists():
                    shutil.copy2(live, self.kept.with_name(self.kept.name + suffix))
        finally:
            tmpfs.unmount(self.disk)


async def _prepare(url: str) -> None:
    """Create the schema once, before two processes race to."""
    from repertory.storage.url import open_store

    store = await open_store(url)
    await store.close()


def _inject(fault: Fault, store: _Store, cluster: Any, driver: _Child, approver: _Child, rng_pick: Any) -> bool:
    """Inject one fault now; whether it was (False: its target is not there yet, an MCP server not started, say)."""
    fault.at_ms = now_ms()
    if fault.kind == "driver_kill":
        pid = driver.kill()
        fault.target = f"driver pid {pid}"
        return pid is not None
    if fault.kind == "approver_kill":
        pid = approver.kill()
        fault.target = f"approver pid {pid}"
        return pid is not None
    if fault.kind == "mcp_kill":
        pids = find_processes(lambda argv: "repertory.demo.mcp_server" in argv)
        if not pids:  # one starts with the first analyst of a (re)started process: tried again later
            return False
        pid = rng_pick(pids)
        fault.target = f"mcp server pid {pid}"
        return kill(pid)
    if fault.kind == "sqlite_lock":
        hold = round(2 + 10 * rng_pick(range(1000)) / 1000, 2)
        fault.target = str(store.db)
        waited = hold_sqlite_lock(store.db, hold)
        fault.detail = {"held_s": hold, "waited_for_lock_s": round(waited, 3)}
        fault.ended_ms = now_ms()
        return True
    if fault.kind == "disk_full":
        assert store.disk is not None  # only scheduled when the tmpfs is mounted
        full_s = round(2 + 3 * rng_pick(range(1000)) / 1000, 2)
        fault.target = str(store.disk)
        fault.detail = {"full_s": full_s, **fill_disk(store.disk, store.db, full_s)}
        fault.ended_ms = now_ms()
        return True
    if fault.kind == "pg_restart":
        fault.target = "postgresql"
        store.pg.restart()
        fault.ended_ms = now_ms()
        return True
    if fault.kind == "pg_stop":
        down = round(2 + 3 * rng_pick(range(1000)) / 1000, 2)
        fault.target = "postgresql"
        store.pg.stop()
        time.sleep(down)
        store.pg.start()
        fault.ended_ms = now_ms()
        fault.detail = {"down_s": down}
        return True
    if fault.kind in ("ray_host_kill", "supervisor_kill"):
        needle = "SessionHost" if fault.kind == "ray_host_kill" else "Supervisor"
        pids = find_processes(lambda argv: any(a.startswith("ray::") and needle in a for a in argv))
        if not pids:
            return False
        pid = rng_pick(pids)
        fault.target = f"{needle} pid {pid}"
        return kill(pid)
    if fault.kind == "ray_node_remove":
        fault.target = f"ray node {cluster.replace_node(rng_pick(range(2)))}"
        fault.ended_ms = now_ms()
        return True
    raise ValueError(f"unknown fault kind {fault.kind!r}")


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)], 3)


async def _export_and_count(url: str, paths: RunPaths, outcome: ChaosOutcome) -> None:
    """Export the store to Parquet and count turns, and the accepted turns the store lacks or left open."""
    from repertory.core.store import TreeStore
    from repertory.storage.export import export_parquet
    from repertory.storage.url import open_store

    store = await open_store(url)
    try:
        await export_parquet(store, paths.export)
        assert isinstance(store, TreeStore)
        statuses: dict[str, int] = {}
        failed_full = 0
        for session in await store.list_sessions():
            for record in await store.list_turns(session.session_id):
                statuses[record.status] = statuses.get(record.status, 0) + 1
                failed_full += record.error is not None and record.error.type == "StoreFull"
        outcome.turns_by_status = statuses
        outcome.store_full_errors += failed_full
        outcome.turns = sum(statuses.values())
        accepted = read_lines(paths.accepted)
        outcome.accepted = len(accepted)
        for line in accepted:
            turn = await store.load_turn(line["submission_id"])
            if turn is None or turn.status not in _ENDED:
                outcome.accepted_lost += 1
                # What the store says of it, for the report (a temporary PostgreSQL is gone after the run).
                run = None if turn is None else await store.load_run(turn.run_id)
                tail = [e.type for e in await store.load_events(line["session_id"])][-8:]
                outcome.lost_detail.append(
                    f"{line['submission_id']} of {line['session_id']}: turn {turn and turn.status}, "
                    f"run {run and run.status} (suspended on {run and run.suspended_on and run.suspended_on.kind}), "
                    f"last events {tail}"
                )
    finally:
        await store.close()


def _check(url: str, paths: RunPaths, outcome: ChaosOutcome) -> None:
    """Run the independent checker, if it is installed; its violations go into the outcome."""
    try:
        checker = importlib.import_module("tests.soak.checker")
    except ImportError as exc:
        if exc.name not in ("tests.soak.checker", None):
            raise
        outcome.checker = "missing: tests/soak/checker.py is not there, so nothing was checked"
        return
    report = checker.check(url, paths.root)
    found = list(getattr(report, "violations", []))
    outcome.checker = "ran"
    outcome.violations = len(found)
    outcome.violation_list = [str(v) for v in found[:50]]


def run_chaos(cfg: ChaosConfig, say: Any = print) -> ChaosOutcome:
    """Run one soak from a fresh folder and return its figures (also written to ``summary.json``)."""
    paths = RunPaths(cfg.run_dir)
    if paths.root.exists():
        shutil.rmtree(paths.root)
    paths.logs.mkdir(parents=True)
    outcome = ChaosOutcome(str(paths.root), cfg.minutes, cfg.backend, cfg.store, cfg.seed)
    started_ms = now_ms()
    store = _Store(cfg.store, paths, cfg.disk_mb)
    outcome.left_out = dict(store.left_out)
    cluster: Any = None
    children: list[_Child] = []
    try:
        asyncio.run(_prepare(store.url))
        tail = [str(paths.root), store.url, cfg.backend, str(cfg.seed)]
        if cfg.backend == "ray":
            from tests.soak.cluster import start_cluster

            cluster = start_cluster()
            tail.append(cluster.address)
        elif cfg.backend != "local":
            raise ValueError(f"--backend is local or ray, not {cfg.backend!r}")
        import random

        rng = random.Random(cfg.seed + 1)
        driver, approver = _Child("driver", paths, tail), _Child("approver", paths, tail)
        children += [driver, approver]
        approver.start()
        driver.start()
        seconds = cfg.minutes * 60
        kinds = kinds_for(cfg.backend, cfg.store, small_disk=store.disk is not None)
        plan = schedule(cfg.seed, seconds, kinds, gap_s=cfg.gap_s)
        say(f"chaos: {cfg.backend}+{cfg.store} seed {cfg.seed}, {seconds:.0f} s, {len(plan)} faults -> {paths.root}")
        for kind, why in store.left_out.items():
            say(f"chaos: fault {kind} left out: {why}")
        # The clock starts once the fleet serves (a Ray cluster's hosts take a while to start).
        ready_by = time.monotonic() + 180
        while not read_lines(paths.served) and time.monotonic() < ready_by:
            driver.keep_alive()
            approver.keep_alive()
            time.sleep(0.1)
        t0 = time.monotonic()
        injected: list[Fault] = []
        waiting = list(plan)
        deferred: dict[int, int] = {}
        while waiting:
            fault = waiting.pop(0)
            while time.monotonic() - t0 < fault.at_s:
                driver.keep_alive()
                approver.keep_alive()
                time.sleep(0.05)
            if _inject(fault, store, cluster, driver, approver, rng.choice):
                injected.append(fault)
                say(f"  {time.monotonic() - t0:6.1f}s {fault.kind} {fault.target or ''}")
            elif deferred.get(id(fault), 0) < DEFERRALS:
                # Its target is not there yet (no MCP server started since the last driver kill):
                # tried again a little later (the children kept alive meanwhile), so a short run
                # still gets every kind it planned, if need be a little after its nominal end.
                deferred[id(fault)] = deferred.get(id(fault), 0) + 1
                fault.at_s = round(time.monotonic() - t0 + DEFER_S, 3)
                waiting = sorted([*waiting, fault], key=lambda f: f.at_s)
            time.sleep(0.2)  # a killed process is started again after a moment, as a supervisor would
            driver.keep_alive()
            approver.keep_alive()
        while time.monotonic() - t0 < seconds:
            driver.keep_alive()
            approver.keep_alive()
            time.sleep(0.05)
        say("chaos: quiescing (no more faults; waiting for every accepted turn)")
        paths.quiesce.touch()
        quiesce_started = time.monotonic()
        deadline = quiesce_started + cfg.quiesce_timeout_s
        while time.monotonic() < deadline and not paths.quiesced.exists():
            driver.keep_alive()
            approver.keep_alive()
            time.sleep(0.1)
            stalled = time.monotonic() - quiesce_started > STALL_S * (outcome.quiesce_restarts + 1)
            if cfg.backend == "local" and stalled and outcome.quiesce_restarts < 3:
                # A safety net, said in the outcome, never hidden: a turn the driver let go of
                # without an end (its store away past every retry) is finished by its next start.
                # Decisions no longer drive runs in the approver's process (it decides through
                # the driver's web UI), so a killed approver leaves nothing open.
                driver.kill()
                outcome.quiesce_restarts += 1
                say(f"chaos: quiesce stalled {STALL_S:.0f} s: driver restarted to recover open turns")
        outcome.quiesced = paths.quiesced.exists()
        driver.stop(timeout=30)
        paths.stop_approver.touch()
        approver.stop(timeout=30)
        ended_ms = now_ms()
        outcome.unexpected_exits = driver.unexpected + approver.unexpected
        served = sorted(line["at_ms"] for line in read_lines(paths.served))
        delays = []
        for fault in injected:
            after = fault.ended_ms or fault.at_ms or 0
            fault.recovered_at_ms = next((at for at in served if at > after), None)
            if fault.recovered_at_ms is not None and fault.at_ms is not None:
                delays.append((fault.recovered_at_ms - fault.at_ms) / 1000)
            outcome.faults[fault.kind] = outcome.faults.get(fault.kind, 0) + 1
            append_line(paths.faults, fault.line())
        outcome.recoveries = len(delays)
        outcome.fault_to_serving_p50_s = _percentile(delays, 0.5)
        outcome.fault_to_serving_p99_s = _percentile(delays, 0.99)
        for line in read_lines(paths.decisions):
            outcome.decisions[line["decision"]] = outcome.decisions.get(line["decision"], 0) + 1
        outcome.ledger_lines = len(read_lines(paths.ledger))
        retried = read_lines(paths.errors)
        outcome.retried_errors = len(retried)
        outcome.store_full_errors = sum(str(line.get("error", "")).startswith("StoreFull") for line in retried)
        asyncio.run(_export_and_count(store.url, paths, outcome))
        paths.run_json.write_text(
            json.dumps(
                {
                    "store_url": store.kept_url,
                    "store_url_while_running": store.url,
                    "backend": cfg.backend,
                    "seed": cfg.seed,
                    "minutes": cfg.minutes,
                    "started_ms": started_ms,
                    "ended_ms": ended_ms,
                    "export_dir": str(paths.export),
                    "ledger_tools": list(LEDGER_TOOLS),
                },
                indent=2,
            )
        )
        _check(store.url, paths, outcome)
    finally:
        for child in children:  # a run cut short (a test's timeout) still reaps what it started
            if child.proc is not None and child.proc.poll() is None:
                child.proc.kill()
                child.proc.wait()
        for pid in find_processes(lambda argv: any(str(paths.root) in a for a in argv)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # only this run's own children are left behind
        if cluster is not None:
            cluster.shutdown()
        store.close()
    (paths.root / "summary.json").write_text(json.dumps(asdict(outcome), indent=2))
    return outcome
