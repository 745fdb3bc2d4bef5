"""Ray backend benchmark: turn overhead, host throughput, creations, memory, event latency, host crash.

Run ``python -m benchmarks.ray [--quick] [--only overhead,load,create,memory,events,crash]``. It
prints a table and writes ``benchmarks/results/ray.json`` with the machine, the versions, the
durability, the targets, every figure and whether each target is met. Nothing here asserts a speed
or a size (DESIGN.md, rule 8).

One local Ray instance (``ray.init(address="local", num_cpus=2)``) is started by this script and
shut down by it at the end, and only it: Ray is never stopped machine-wide. Each part opens its own
runtime on a fresh SQLite file (WAL, ``synchronous=NORMAL``) in a temporary folder, with one shared
host (``hosts=1``: every figure is "through one host") and ``keep_hosts=False``, so its detached
host and supervisor are killed when the part closes. The model is a zero-delay ``ScriptedModel``
that answers every request with one short text reply, so a turn is one model step.

The host is ``BenchHost``, a ``SessionHost`` subclass created under the name (and namespace) the
runtime derives from the store URL, with the runtime's actor options, before ``Runtime.start``,
which then finds it (``get_if_exists``) and uses it as its own. It adds methods only: event stamps,
a one-hop ``run_turn`` prototype, cProfile on the host's event loop thread, boot times. Every
product path (``handle.run``, ``send``, ``events``, creation, restart) is the product's own code.

1. Turn overhead: wall time of ``await handle.run(...)``, one at a time, round-robin over a few
   sessions, through Ray and on the local backend (same store, same agent), split into ``send()``
   (durable turn row) and ``result()`` (``wait_turn``, then three reads of the client's own store
   connection). Beside it: a bare Ray round trip (``host.ping``: the floor of one hop), the one-hop
   prototype (send, wait and read the reply in the host: one Ray call per turn), and ``send()`` of
   a turn that only queues (its session busy) next to one whose turn starts at once.
2. Turns/s per host under load: N sessions each run T turns one after another, all N at once, three
   ways: ``handle.run`` (the product path: concurrent runs queued in batches, one Ray call per batch,
   results back on the client's event channel), the same
   work queued with the host's ``send_many`` in batches of 256 (completion read from the store: the
   host's own capacity without per-turn calls), and the one-hop prototype. CPU seconds of the
   client, the host, Ray's other processes and unrelated processes are read from /proc over each
   timed window. A smaller run is profiled with cProfile on both sides (the client's and the host's
   event loop threads; Ray's C++ threads and the store's writer thread are not seen by cProfile:
   their cost shows in the CPU seconds).
3. Session creations through one host: ``rt.create_session`` one at a time and 100 at once (client
   -> supervisor -> host: two Ray hops), the host's ``create_session`` called directly (one hop),
   and its ``create_sessions(batch)`` (100 and 1,000 a call, the host profiled over a few batches);
   next to one dedicated Ray actor per session (a trivial ``@ray.remote`` class: the first five one
   at a time, the rest all at once; memory of each process from smaps_rollup) and a few real
   ``placement="dedicated"`` sessions (a ``SessionHost`` process of their own).
4. Memory per idle hosted session: the host's VmRSS (``/proc/<pid>/status``, pid from ``ping()``)
   after a warm-up, after N sessions are created (rows only), activated (``metadata()`` brings each
   ``SessionActor`` into memory), after one turn each, and after ``passivate_idle(0)``; growth / N.
5. Event latency: from an event being published in the host (the bus publishes right after the
   commit that makes it durable; a listener stamps ``time.time()``) to the client receiving it from
   ``handle.events()`` (``time.time()``, same machine clock). The same figure from ``event.at``
   (epoch ms, set when the event is emitted, before its commit) is reported beside it. One session
   with turns one after another; the same stream while M unwatched sessions run turns; then M
   sessions each with its own stream, all running turns.
6. Host crash: N sessions are created and activated, then ``ray.kill(host, no_restart=False)``; once
   the old process is gone (``ray.kill`` only asks; until then the old process may still answer),
   the time from the kill until the first call on one of its sessions is served: ``handle.metadata()``
   and ``handle.run()`` through the client (its own retry and back-off), and the host's ``metadata``
   retried every 10 ms through the bare actor handle. Sessions are re-activated before each kill.

Node hard failure (a multi-node ``ray.cluster_utils.Cluster``, a node killed, its sessions served
elsewhere; target <= 5 s) is measured by ``benchmarks/ray_failover.py``, which needs a cluster of
its own.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import cProfile
import gc
import hashlib
import json
import os
import platform
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pydantic
import ray

from benchmarks._report import machine_info
from benchmarks._report import percentile as _pct
from benchmarks._suite import row
from repertory import Agent
from repertory.actors.bootstrap import store_url_for_hosts as _store_url_for_hosts
from repertory.actors.client import VERSION
from repertory.actors.host import SessionHost
from repertory.actors.supervisor import shared_host_name
from repertory.core.ids import new_id
from repertory.core.messages import ModelMessage
from repertory.core.model import ToolSpec
from repertory.core.principal import Principal, to_model_message
from repertory.core.tree import NewSession, SessionEvent
from repertory.storage.url import open_store
from repertory.testing import ScriptedModel
from repertory.tree.handle import SessionHandle
from repertory.tree.runtime import Runtime

RESULTS = Path(__file__).resolve().parent / "results" / "ray.json"
AGENT = "assistant"
SLOW = "slow"
DURABILITY = "normal"
IDLE_TIMEOUT = 3600.0  # nothing is passivated behind the benchmark's back
BATCH = 100

TARGETS: dict[str, float] = {
    "turn_overhead_p50_ms": 2.0,
    "turn_overhead_p99_ms": 10.0,
    "turns_per_s_per_host": 1_000,
    "creations_per_s_one_per_call": 1_000,
    "creations_per_s_batched": 10_000,
    "idle_session_bytes": 10 * 1024,
    "event_latency_p50_ms": 5.0,
    "host_crash_to_served_s": 5.0,
    "node_failure_to_served_s": 5.0,
}

SIZES: dict[str, dict[str, int]] = {
    "full": {
        "overhead_sessions": 20,
        "overhead_rounds": 1_000,
        "load_sessions": 1_000,
        "load_turns": 5,
        "profile_sessions": 300,
        "create_per_call": 2_000,
        "create_batched": 20_000,
        "dedicated_actors": 100,
        "dedicated_sessions": 3,
        "memory_sessions": 10_000,
        "event_turns": 300,
        "event_streams": 100,
        "crash_sessions": 10_000,
    },
    "quick": {
        "overhead_sessions": 10,
        "overhead_rounds": 200,
        "load_sessions": 200,
        "load_turns": 3,
        "profile_sessions": 100,
        "create_per_call": 300,
        "create_batched": 2_000,
        "dedicated_actors": 20,
        "dedicated_sessions": 1,
        "memory_sessions": 1_000,
        "event_turns": 60,
        "event_streams": 30,
        "crash_sessions": 1_000,
    },
}


# -- shared pieces ------------------------------------------------------------------------------------


def _reply(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """Every request gets the same short final reply (usage given: no token estimate scans)."""
    return {"text": "ok", "usage": {"input_tokens": 8, "output_tokens": 1}}


def _agents() -> dict[str, Agent]:
    return {
        AGENT: Agent(name=AGENT, model=ScriptedModel(_reply), instructions="Answer in one word."),
        # Holds its session busy so that further sends only queue (part 1's split of send()).
        SLOW: Agent(name=SLOW, model=ScriptedModel(_reply, delay=30.0)),
    }


class BenchHost(SessionHost):
    """``SessionHost`` plus what only a benchmark needs; the product's methods are untouched.

    - ``stamp``/``stamps``: a listener stamps ``time.time()`` when each event of a watched session is
      published, which the bus does right after the commit that made it durable;
    - ``run_turn``: a prototype of a one-hop ``run`` (send, wait and read the reply inside the host),
      to measure what a single Ray call per turn would cost next to the client's two calls and reads;
    - ``profile_start``/``profile_stop``: cProfile on the host's event loop thread;
    - ``boot_times``: when this process started, when ``__init__`` ran and when the store was open.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._init_at = time.time()
        super().__init__(*args, **kwargs)
        self._stamps: dict[str, dict[int, float]] = {}
        self._profiler: cProfile.Profile | None = None
        self._booted_at: float | None = None
        self._booting.add_done_callback(lambda _: setattr(self, "_booted_at", time.time()))

    async def stamp(self, session_ids: list[str]) -> None:
        """Start stamping the events of ``session_ids``."""
        host = await self._ready()
        for session_id in session_ids:
            stamps = self._stamps.setdefault(session_id, {})

            def on_event(event: SessionEvent, stamps: dict[int, float] = stamps) -> None:
                if event.seq is not None:
                    stamps[event.seq] = time.time()

            host.listen(session_id, on_event)

    async def stamps(self, session_ids: list[str]) -> dict[str, dict[int, float]]:
        """The stamps taken so far: session id -> seq -> publish time (epoch seconds)."""
        return {sid: dict(self._stamps.get(sid, {})) for sid in session_ids}

    async def bench_run_turn(self, session_id: str, message: ModelMessage, submission_id: str) -> str | None:
        """One call per turn: queue it, wait for it to rest, return its reply text."""
        host = await self._ready()
        await host.send(session_id, message, "message", "enqueue", None, submission_id)
        await host.wait_turn(session_id, submission_id)
        turn = await host.store.load_turn(submission_id)
        run = await host.store.load_run(turn.run_id) if turn is not None else None
        return run.result if run is not None and isinstance(run.result, str) else None

    async def profile_start(self) -> None:
        """Start cProfile on the event loop thread (where sessions and async methods run)."""
        self._profiler = cProfile.Profile()
        self._profiler.enable()

    async def profile_stop(self, turns: int) -> dict[str, Any]:
        """Stop the profiler; its figures per turn."""
        assert self._profiler is not None
        self._profiler.disable()
        report = _profile_report(self._profiler, turns)
        self._profiler = None
        return report

    async def boot_times(self) -> dict[str, float | None]:
        """Epoch seconds: process start, ``__init__``, store open."""
        return {
            "process_started_at": _process_started_at(os.getpid()),
            "init_at": self._init_at,
            "booted_at": self._booted_at,
        }


class Trivial:
    """One dedicated Ray actor per session, as the design card's naive mapping would have it."""

    def ping(self) -> int:
        """The actor's pid."""
        return os.getpid()


async def _runtime(folder: str, name: str, backend: str = "ray", **options: Any) -> Runtime:
    url = f"sqlite:///{os.path.join(folder, name)}?durability={DURABILITY}"
    agents = _agents()
    if backend == "local":
        return await Runtime.start(store=url, backend="local", agents=agents, idle_timeout=IDLE_TIMEOUT)
    # Create the runtime's shared host ourselves, from the subclass, under the name (and namespace)
    # start_ray_client derives from the store URL, with its options; Runtime.start then finds it
    # (get_if_exists) and uses it as it would its own.
    store = await open_store(url)
    try:
        host_url = _store_url_for_hosts(store, url)
    finally:
        await store.close()
    namespace = f"repertory-{hashlib.blake2b(host_url.encode(), digest_size=6).hexdigest()}"
    remote: Any = ray.remote
    remote(BenchHost).options(
        name=shared_host_name(f"repertory-{VERSION}", 0),
        namespace=namespace,
        lifetime="detached",
        get_if_exists=True,
        max_restarts=-1,
        max_task_retries=0,
        max_concurrency=1000,
        num_cpus=0,
    ).remote(host_url, agents, index=0, hosts=1, idle_timeout=IDLE_TIMEOUT)
    rt = await Runtime.start(
        store=url, backend="ray", agents=agents, hosts=1, idle_timeout=IDLE_TIMEOUT, keep_hosts=False, **options
    )
    try:
        await _host(rt).stamps.remote([])
    except Exception as exc:
        await rt.close()
        raise RuntimeError("the runtime did not pick up the benchmark's host (did the host naming change?)") from exc
    return rt


def _host(rt: Runtime) -> Any:
    """The actor handle of the runtime's only shared host."""
    [host] = rt.host._hosts  # type: ignore[union-attr]
    return host


def _create_kwargs() -> NewSession:
    """What ``RayHostClient.create_session`` hands on for a root session (shared placement)."""
    return NewSession(agent=AGENT)


async def _bulk_sessions(rt: Runtime, n: int) -> list[SessionHandle]:
    """``n`` sessions created through the host's batch method, as handles."""
    host = _host(rt)
    ids: list[str] = []
    for start in range(0, n, BATCH):
        records = await host.create_sessions.remote([_create_kwargs() for _ in range(min(BATCH, n - start))])
        ids += [r.session_id for r in records]
    return [await rt.session(sid) for sid in ids]


async def _gather_chunked(work: Sequence[Callable[[], Awaitable[Any]]], chunk: int = 500) -> list[Any]:
    out: list[Any] = []
    for start in range(0, len(work), chunk):
        out += await asyncio.gather(*(w() for w in work[start : start + chunk]))
    return out


async def _activate(handles: Sequence[SessionHandle]) -> None:
    """Bring every session's actor into its host's memory (``metadata()`` activates it)."""
    await _gather_chunked([h.metadata for h in handles], 1_000)


async def _wait_no_open_turns(rt: Runtime, every: float = 0.02) -> None:
    # Polling: the turns run in another process; the store is the one place that sees them all.
    while True:
        if not await rt.store.list_open_turns():
            return
        await asyncio.sleep(every)


async def _send_many(rt: Runtime, handles: Sequence[SessionHandle], turns: int, tag: str) -> int:
    """Queue ``turns`` turns on every session, straight to the host in ``send_many`` batches of 256."""
    message = lambda i, t: to_model_message(f"{tag} {i} {t}", Principal.user())[0]  # noqa: E731
    items = [(h.id, message(i, t), "message", new_id()) for t in range(turns) for i, h in enumerate(handles)]
    host = _host(rt)
    await asyncio.gather(*(host.send_many.remote(items[i : i + 256]) for i in range(0, len(items), 256)))
    return len(items)


def _dist_ms(values: Sequence[float]) -> dict[str, float]:
    """p50, p90, p99, max, mean and min of seconds, in milliseconds."""
    if not values:
        return {}
    return {
        "n": len(values),
        "p50_ms": round(_pct(values, 0.5) * 1e3, 3),
        "p90_ms": round(_pct(values, 0.9) * 1e3, 3),
        "p99_ms": round(_pct(values, 0.99) * 1e3, 3),
        "max_ms": round(max(values) * 1e3, 3),
        "mean_ms": round(statistics.fmean(values) * 1e3, 3),
        "min_ms": round(min(values) * 1e3, 3),
    }


def _proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in bytes."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out


def _private_bytes(pid: int) -> dict[str, int]:
    """Rss, Pss and private (unshared) bytes of a process, from smaps_rollup."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("Rss", "Pss", "Private_Clean", "Private_Dirty"):
                out[key] = int(value.split()[0]) * 1024
    return {"rss": out["Rss"], "pss": out["Pss"], "private": out["Private_Clean"] + out["Private_Dirty"]}


_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent not idle (all cores)."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    return (sum(values) - values[3] - values[4]) / _TICK


def _process_started_at(pid: int) -> float:
    """When a process started, in epoch seconds (boot time + its start tick)."""
    with open("/proc/stat") as f:
        btime = next(int(line.split()[1]) for line in f if line.startswith("btime"))
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return btime + int(fields[19]) / _TICK


_RAY_MARKS = ("raylet", "gcs_server", "ray::", "default_worker", "/ray/", "ray/_private", "dashboard")


def _cpu_by_process(client_pid: int, host_pid: int) -> dict[str, float]:
    """CPU seconds so far of every process, summed by group: client, host, Ray's others, unrelated."""
    groups: collections.Counter[str] = collections.Counter()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            seconds = _cpu_seconds(pid)
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # gone meanwhile
        if pid == client_pid:
            group = "client"
        elif pid == host_pid:
            group = "host"
        elif any(mark in cmdline for mark in _RAY_MARKS):
            group = "ray_other"  # raylet, GCS, the supervisor, idle workers
        else:
            group = "unrelated"  # whatever else runs on this machine (other jobs, the kernel's threads)
        groups[group] += seconds
    return dict(groups)


class _CpuWindow:
    """CPU seconds of the client, the host, Ray's other processes, the rest and the machine over a window."""

    def __init__(self, host_pid: int) -> None:
        self.host_pid = host_pid
        self.groups = _cpu_by_process(os.getpid(), host_pid)
        self.machine = _machine_busy_seconds()
        self.wall = time.perf_counter()

    def close(self) -> dict[str, float]:
        wall = time.perf_counter() - self.wall
        groups = _cpu_by_process(os.getpid(), self.host_pid)
        machine = _machine_busy_seconds() - self.machine
        out: dict[str, float] = {
            "wall_s": round(wall, 3),
            "machine_busy_cpu_s": round(machine, 3),
            "machine_cpus_busy": round(machine / wall, 3),
        }
        for group in ("client", "host", "ray_other", "unrelated"):
            out[f"{group}_cpu_s"] = round(groups.get(group, 0.0) - self.groups.get(group, 0.0), 3)
        return out


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- 1. turn overhead ---------------------------------------------------------------------------------


async def _turn_overhead(rt: Runtime, sessions: int, rounds: int) -> dict[str, Any]:
    handles = [await rt.create_session(agent=AGENT) for _ in range(sessions)]
    for i in range(max(20, sessions * 2)):
        await handles[i % sessions].run(f"warm {i}")
    runs: list[float] = []
    sends: list[float] = []
    results: list[float] = []
    gc.collect()
    for i in range(rounds):
        h = handles[i % sessions]
        t0 = time.perf_counter()
        turn = await h.send(f"turn {i}")
        t1 = time.perf_counter()
        result = await turn.result()
        t2 = time.perf_counter()
        assert result.text == "ok"
        runs.append(t2 - t0)
        sends.append(t1 - t0)
        results.append(t2 - t1)
    # handle.run() is send() + result(); one more pass through run() itself, to show it is the same.
    direct: list[float] = []
    for i in range(min(rounds, 200)):
        t0 = time.perf_counter()
        await handles[i % sessions].run(f"run {i}")
        direct.append(time.perf_counter() - t0)
    out: dict[str, Any] = {
        "backend": rt.backend,
        "sessions": sessions,
        "rounds": rounds,
        "run": _dist_ms(runs),
        "send": _dist_ms(sends),
        "result": _dist_ms(results),
        "run_direct": _dist_ms(direct),
    }
    if rt.backend == "ray":
        host = _host(rt)
        pings: list[float] = []
        meta: list[float] = []
        for i in range(500):
            t0 = time.perf_counter()
            await host.ping.remote()
            t1 = time.perf_counter()
            await host.metadata.remote(handles[i % sessions].id)
            meta.append(time.perf_counter() - t1)
            pings.append(t1 - t0)
        out["bare_ray_call_ping"] = _dist_ms(pings)
        out["bare_ray_call_metadata"] = _dist_ms(meta)
        one_hop: list[float] = []
        for i in range(rounds):
            t0 = time.perf_counter()
            message = to_model_message(f"hop {i}", Principal.user())[0]
            text = await host.bench_run_turn.remote(handles[i % sessions].id, message, new_id())
            one_hop.append(time.perf_counter() - t0)
            assert text == "ok"
        out["one_hop_prototype_run"] = _dist_ms(one_hop)
        # send() whose turn only queues (its session is busy) next to one whose turn starts at once.
        busy = await rt.create_session(agent=SLOW)
        await busy.send("hold the session")
        queued: list[float] = []
        for i in range(min(rounds, 300)):
            t0 = time.perf_counter()
            await busy.send(f"queued {i}")
            queued.append(time.perf_counter() - t0)
        await busy.cancel()
        out["send_that_only_queues"] = _dist_ms(queued)
    return out


# -- 2. turns/s under load ----------------------------------------------------------------------------


async def _load(rt: Runtime, n: int, turns: int, profile: bool = False) -> dict[str, Any]:
    """N sessions x T turns through one host, three ways; with ``profile``, cProfile on both sides."""
    host = _host(rt)
    handles = await _bulk_sessions(rt, n)
    await asyncio.gather(*(h.run("warm") for h in handles))  # every session active, client caches filled
    host_pid = (await host.ping.remote())["pid"]

    async def measured(work: Callable[[], Awaitable[dict[str, Any]]], count: int) -> dict[str, Any]:
        gc.collect()
        client_profiler = cProfile.Profile() if profile else None
        if profile:
            await host.profile_start.remote()
        window = _CpuWindow(host_pid)
        if client_profiler is not None:
            client_profiler.enable()
        extra = await work()
        if client_profiler is not None:
            client_profiler.disable()
        cpu = window.close()
        result: dict[str, Any] = {
            "turns": count,
            "turns_per_s": round(count / cpu["wall_s"], 1),
            "cpu": cpu,
            "cpu_ms_per_turn": {
                k.removesuffix("_cpu_s"): round(v / count * 1e3, 3) for k, v in cpu.items() if k.endswith("_cpu_s")
            },
            **extra,
        }
        if profile:
            assert client_profiler is not None
            result["host_profile"] = await host.profile_stop.remote(count)
            result["client_profile"] = _profile_report(client_profiler, count)
        return result

    async def handle_run() -> dict[str, Any]:
        latencies: list[float] = []

        async def one(h: SessionHandle) -> None:
            for t in range(turns):
                t0 = time.perf_counter()
                await h.run(f"load {t}")
                latencies.append(time.perf_counter() - t0)

        await asyncio.gather(*(one(h) for h in handles))
        return {"turn_latency": _dist_ms(latencies)}

    async def send_many() -> dict[str, Any]:
        t0 = time.perf_counter()
        await _send_many(rt, handles, turns, "batched")
        queued_s = time.perf_counter() - t0
        await _wait_no_open_turns(rt)
        return {
            "send_many_batch": 256,
            "queued_in_s": round(queued_s, 3),
            "completion": "polled from the store (list_open_turns every 20 ms)",
        }

    async def one_hop() -> dict[str, Any]:
        latencies: list[float] = []

        async def one(h: SessionHandle) -> None:
            for t in range(turns):
                t0 = time.perf_counter()
                message = to_model_message(f"hop {t}", Principal.user())[0]
                await host.bench_run_turn.remote(h.id, message, new_id())
                latencies.append(time.perf_counter() - t0)

        await asyncio.gather(*(one(h) for h in handles))
        return {"turn_latency": _dist_ms(latencies)}

    out: dict[str, Any] = {"sessions": n, "turns_per_session": turns, "max_in_flight": 256}
    out["handle_run"] = await measured(handle_run, n * turns)
    out["send_many"] = await measured(send_many, n * turns)
    out["one_hop_prototype"] = await measured(one_hop, n * turns)
    return out


def _layer(filename: str, name: str) -> str:
    f = filename.replace("\\", "/")
    if "poll' of 'select.epoll" in name or "select.epoll" in name:
        return "idle (epoll wait)"
    if "/repertory/actors/" in f:
        return "repertory.actors"
    if "/repertory/storage/" in f:
        return "repertory.storage"
    if "/repertory/" in f or "__main__" in f or f.endswith("benchmarks/ray.py"):
        return "repertory (runtime, handles, records)"
    if "/ray/" in f:
        return "ray (python side)"
    if "/pydantic" in f:
        return "pydantic"
    if "/asyncio/" in f or "selectors" in f:
        return "asyncio"
    if "sqlite3" in f or "sqlite3" in name:
        return "sqlite3"
    if f.startswith("~") or f == "":
        if "pydantic" in name:
            return "pydantic"
        if "_raylet" in name or "ray." in name:
            return "ray (C++ bindings)"
        return "builtins (C)"
    return "other"


def _profile_report(profiler: cProfile.Profile, turns: int) -> dict[str, Any]:
    """Own time per turn, grouped by layer (idle wait apart), and the top functions."""
    stats = pstats.Stats(profiler)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    layers: collections.Counter[str] = collections.Counter()
    rows = []
    total = 0.0
    for (filename, line, name), (_cc, calls, tottime, cumtime, _callers) in raw.items():
        total += tottime
        layers[_layer(filename, name)] += tottime
        rows.append((tottime, cumtime, calls, f"{os.path.basename(filename)}:{line}({name})"))
    rows.sort(reverse=True)
    idle = layers.get("idle (epoll wait)", 0.0)
    return {
        "profiled_seconds": round(total, 3),
        "busy_seconds": round(total - idle, 3),
        "busy_us_per_turn": round((total - idle) / turns * 1e6, 1),
        "by_layer_us_per_turn": {k: round(v / turns * 1e6, 1) for k, v in layers.most_common()},
        "top_tottime": [
            {"function": r[3], "tottime_s": round(r[0], 3), "calls": r[2], "us_per_turn": round(r[0] / turns * 1e6, 1)}
            for r in rows[:30]
        ],
    }


# -- 3. creations -------------------------------------------------------------------------------------


async def _creations(rt: Runtime, n_call: int, n_batch: int, n_actors: int, n_dedicated: int) -> dict[str, Any]:
    host = _host(rt)
    for _ in range(50):
        await rt.create_session(agent=AGENT)
    await host.create_sessions.remote([_create_kwargs() for _ in range(BATCH)])

    async def rate(work: Callable[[], Awaitable[None]], count: int) -> float:
        gc.collect()
        t0 = time.perf_counter()
        await work()
        return round(count / (time.perf_counter() - t0), 1)

    async def loop() -> None:
        for _ in range(n_call):
            await rt.create_session(agent=AGENT)

    async def concurrent() -> None:
        for start in range(0, n_call, BATCH):
            await asyncio.gather(*(rt.create_session(agent=AGENT) for _ in range(min(BATCH, n_call - start))))

    async def host_loop() -> None:
        for _ in range(n_call):
            await host.create_session.remote(_create_kwargs())

    async def host_concurrent() -> None:
        for start in range(0, n_call, BATCH):
            await asyncio.gather(
                *(host.create_session.remote(_create_kwargs()) for _ in range(min(BATCH, n_call - start)))
            )

    async def batched() -> None:
        for start in range(0, n_batch, BATCH):
            await host.create_sessions.remote([_create_kwargs() for _ in range(min(BATCH, n_batch - start))])

    async def batched_1000() -> None:
        for start in range(0, n_batch, 1000):
            await host.create_sessions.remote([_create_kwargs() for _ in range(min(1000, n_batch - start))])

    out: dict[str, Any] = {
        "per_call_loop_per_s": await rate(loop, n_call),
        "per_call_concurrent_100_per_s": await rate(concurrent, n_call),
        "host_direct_loop_per_s": await rate(host_loop, n_call),
        "host_direct_concurrent_100_per_s": await rate(host_concurrent, n_call),
        "batched_100_per_s": await rate(batched, n_batch),
        "batched_1000_per_s": await rate(batched_1000, n_batch),
        "per_call_sessions": n_call,
        "batched_sessions": n_batch,
        "path_per_call": "rt.create_session -> supervisor.create_session -> host.create_session (two Ray hops)",
    }
    # Where a batched creation's time goes in the host (event loop thread).
    await host.profile_start.remote()
    t0 = time.perf_counter()
    for _ in range(10):
        await host.create_sessions.remote([_create_kwargs() for _ in range(BATCH)])
    profiled_s = time.perf_counter() - t0
    out["batched_100_host_profile"] = await host.profile_stop.remote(10 * BATCH)
    out["batched_100_host_profile"]["wall_us_per_session"] = round(profiled_s / (10 * BATCH) * 1e6, 1)
    # The supervisor looks its shared host up by name (ray.get_actor) on every creation: what that costs.
    lookups: list[float] = []
    name = shared_host_name(rt.host.prefix, 0)  # type: ignore[union-attr]
    for _ in range(200):
        t0 = time.perf_counter()
        ray.get_actor(name, namespace=rt.host.namespace)  # type: ignore[union-attr]
        lookups.append(time.perf_counter() - t0)
    out["ray_get_actor_by_name"] = _dist_ms(lookups)
    out["dedicated_trivial_actors"] = await _trivial_actors(n_actors)
    out["dedicated_sessions"] = await _dedicated_sessions(rt, n_dedicated)
    return out


async def _trivial_actors(n: int) -> dict[str, Any]:
    """Create ``n`` trivial actors: the first 5 one at a time, the rest all at once; memory of each."""
    cls = ray.remote(num_cpus=0)(Trivial)
    actors: list[Any] = []
    sequential: list[float] = []
    try:
        for _ in range(min(5, n)):
            t0 = time.perf_counter()
            actor = cls.remote()
            actors.append(actor)
            await actor.ping.remote()
            sequential.append(time.perf_counter() - t0)
        rest = n - len(actors)
        t0 = time.perf_counter()
        batch = [cls.remote() for _ in range(rest)]
        actors += batch
        await asyncio.gather(*(a.ping.remote() for a in batch))
        concurrent_s = time.perf_counter() - t0
        pids = await asyncio.gather(*(a.ping.remote() for a in actors))
        mem = [_private_bytes(pid) for pid in pids]
    finally:
        for actor in actors:
            with contextlib.suppress(Exception):
                ray.kill(actor)
    return {
        "actors": n,
        "one_at_a_time_s": _dist_ms(sequential),
        "all_at_once": {
            "actors": n - len(sequential),
            "seconds": round(concurrent_s, 3),
            "per_s": round((n - len(sequential)) / concurrent_s, 2) if concurrent_s else None,
        },
        "rss_mb_median": round(statistics.median(m["rss"] for m in mem) / 1e6, 1),
        "pss_mb_median": round(statistics.median(m["pss"] for m in mem) / 1e6, 1),
        "private_mb_median": round(statistics.median(m["private"] for m in mem) / 1e6, 1),
        "note": "private = Private_Clean + Private_Dirty (smaps_rollup): what each actor adds; rss counts shared pages",
    }


async def _dedicated_sessions(rt: Runtime, n: int) -> dict[str, Any]:
    """Real ``placement="dedicated"`` sessions: a SessionHost process each."""
    created: list[float] = []
    first_turn: list[float] = []
    for i in range(n):
        t0 = time.perf_counter()
        h = await rt.create_session(agent=AGENT, placement="dedicated")
        t1 = time.perf_counter()
        await h.run(f"hello {i}")
        created.append(t1 - t0)
        first_turn.append(time.perf_counter() - t1)
    facts = [f for f in await rt.host.ping() if f["dedicated"]]  # type: ignore[union-attr]
    mem = [_private_bytes(f["pid"]) for f in facts]
    return {
        "sessions": n,
        "create_s": _dist_ms(created),
        "first_turn_s": _dist_ms(first_turn),
        "rss_mb_median": round(statistics.median(m["rss"] for m in mem) / 1e6, 1) if mem else None,
        "private_mb_median": round(statistics.median(m["private"] for m in mem) / 1e6, 1) if mem else None,
    }


# -- 4. memory per idle hosted session ----------------------------------------------------------------


async def _memory(rt: Runtime, n: int) -> dict[str, Any]:
    host = _host(rt)
    pid = (await host.ping.remote())["pid"]
    readings: dict[str, dict[str, int]] = {}

    async def read(label: str) -> None:
        await asyncio.sleep(0.2)
        facts = await host.ping.remote()
        readings[label] = {
            **_proc_status(pid),
            **{f"smaps_{k}": v for k, v in _private_bytes(pid).items()},
            "resident": facts["resident"],
        }

    warm = await _bulk_sessions(rt, 500)  # code paths, caches and the connection warmed up, then passivated
    await _activate(warm)
    await _send_many(rt, warm, 1, "warm")
    await _wait_no_open_turns(rt)
    await host.passivate_idle.remote(0)
    await read("baseline")
    handles = await _bulk_sessions(rt, n)
    await read("created")
    await _activate(handles)
    await read("activated")
    await _send_many(rt, handles, 1, "one")
    await _wait_no_open_turns(rt)
    await read("after_one_turn")
    passivated = await host.passivate_idle.remote(0)
    await read("passivated")
    base = readings["baseline"]["VmRSS"]
    per = {k: round((v["VmRSS"] - base) / n, 1) for k, v in readings.items() if k != "baseline"}
    return {
        "sessions": n,
        "host_pid": pid,
        "readings": readings,
        "rss_growth_bytes_per_session": per,
        "passivated": passivated,
        "note": "VmRSS of the host process, read from /proc/<pid>/status; growth over the baseline, over N. "
        "RSS includes allocator slack and SQLite's page cache and hardly shrinks when objects are freed.",
    }


# -- 5. event latency ---------------------------------------------------------------------------------


async def _events(rt: Runtime, turns: int, streams: int) -> dict[str, Any]:
    host = _host(rt)
    single = (await _bulk_sessions(rt, 1))[0]
    many = await _bulk_sessions(rt, streams)
    quiet = await _bulk_sessions(rt, streams)
    await host.stamp.remote([single.id, *(h.id for h in many)])
    received: dict[str, list[tuple[int, str, int, float]]] = collections.defaultdict(list)

    async def reader(h: SessionHandle) -> None:
        async for event in h.events():
            now = time.time()
            if event.seq is not None:
                received[h.id].append((event.seq, event.type, event.at, now))

    def latencies(ids: Sequence[str], stamps: dict[str, dict[int, float]]) -> tuple[list[float], list[float]]:
        precise: list[float] = []
        from_at: list[float] = []
        for sid in ids:
            for seq, _type, at, now in received[sid]:
                if seq in stamps[sid]:
                    precise.append(now - stamps[sid][seq])
                from_at.append(now - at / 1000)
        return precise, from_at

    async def settle(ids: Sequence[str], expected: int) -> None:
        deadline = time.monotonic() + 30
        while sum(1 for sid in ids for e in received[sid] if e[1] == "turn.completed") < expected:
            if time.monotonic() > deadline:
                raise RuntimeError("events did not arrive within 30 s")
            await asyncio.sleep(0.01)

    tasks = [asyncio.create_task(reader(single))]
    try:
        await single.run("warm")
        await settle([single.id], 1)
        received[single.id].clear()
        for i in range(turns):
            await single.run(f"turn {i}")
        await settle([single.id], turns)
        stamps = await host.stamps.remote([single.id])
        precise_one, at_one = latencies([single.id], stamps)
        types = collections.Counter(e[1] for e in received[single.id])

        # The same one stream while as many sessions as in the next phase run turns with nobody watching.
        per, per_quiet = 10, 30  # the unwatched load runs longer: the watched session gets 1/M of the host
        await asyncio.gather(*(h.run("warm") for h in quiet))
        received[single.id].clear()
        others_done = False

        async def watched_loop() -> int:
            i = 0
            while not others_done or i < 3:
                await single.run(f"under load {i}")
                i += 1
            return i

        t0 = time.perf_counter()
        watched = asyncio.create_task(watched_loop())
        await asyncio.gather(*(_run_n(h, per_quiet) for h in quiet))
        quiet_wall = time.perf_counter() - t0
        others_done = True
        watched_turns = await watched
        await settle([single.id], watched_turns)
        stamps = await host.stamps.remote([single.id])
        precise_loaded, at_loaded = latencies([single.id], stamps)

        tasks += [asyncio.create_task(reader(h)) for h in many]
        await asyncio.gather(*(h.run("warm") for h in many))
        await settle([h.id for h in many], len(many))
        for h in many:
            received[h.id].clear()
        t0 = time.perf_counter()
        await asyncio.gather(*(_run_n(h, per) for h in many))
        wall = time.perf_counter() - t0
        await settle([h.id for h in many], len(many) * per)
        stamps = await host.stamps.remote([h.id for h in many])
        precise_many, at_many = latencies([h.id for h in many], stamps)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return {
        "one_session": {
            "turns": turns,
            "events_per_turn": {k: round(v / turns, 2) for k, v in types.items()},
            "publish_to_client": _dist_ms(precise_one),
            "event_at_to_client": _dist_ms(at_one),
        },
        "one_stream_under_load": {
            "sessions_running_unwatched": len(quiet),
            "turns_per_session": per_quiet,
            "turns_per_s": round(len(quiet) * per_quiet / quiet_wall, 1),
            "watched_turns": watched_turns,
            "publish_to_client": _dist_ms(precise_loaded),
            "event_at_to_client": _dist_ms(at_loaded),
        },
        "many_streams": {
            "sessions_each_with_a_stream": len(many),
            "turns_per_session": per,
            "turns_per_s": round(len(many) * per / wall, 1),
            "publish_to_client": _dist_ms(precise_many),
            "event_at_to_client": _dist_ms(at_many),
        },
        "note": "publish_to_client: host publish stamp (right after the commit, time.time() in the host) to the "
        "client's receive (time.time()); event_at_to_client uses event.at (ms, stamped at emit, before "
        "the commit), so it also counts the commit and up to 1 ms of truncation.",
    }


async def _run_n(h: SessionHandle, n: int) -> None:
    for i in range(n):
        await h.run(f"many {i}")


# -- 6. host crash ------------------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def _retry(call: Callable[[], Awaitable[Any]], within: float = 30.0) -> Any:
    """``call()`` until it does not fail (a restarting actor refuses calls for a while)."""
    deadline = time.monotonic() + within
    while True:
        try:
            return await call()
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.01)


async def _crash(rt: Runtime, n: int) -> dict[str, Any]:
    host = _host(rt)
    t0 = time.perf_counter()
    handles = await _bulk_sessions(rt, n)
    created_s = time.perf_counter() - t0
    probe = handles[n // 2]
    await probe.run("before the crash")
    rounds: dict[str, Any] = {}

    async def kill_and_time(label: str, served: Callable[[], Awaitable[Any]]) -> None:
        t0 = time.perf_counter()
        await _activate(handles)
        activate_s = time.perf_counter() - t0
        before = await host.ping.remote()
        killed_at = time.time()
        t0 = time.perf_counter()
        ray.kill(host, no_restart=False)
        # ray.kill only asks: until the old process is gone it may still serve a call, which would
        # time nothing. Wait for it to die (the clock runs from the kill), then call.
        for _ in range(6000):  # polling: another process's death, nothing here to await
            if not _alive(before["pid"]):
                break
            await asyncio.sleep(0.005)
        gone_at = time.time()
        await served()
        took = time.perf_counter() - t0
        served_at = time.time()
        after = await _retry(host.ping.remote)
        assert after["pid"] != before["pid"], "the host was not restarted"
        boot = await host.boot_times.remote()
        since = lambda at: None if at is None else round(at - killed_at, 3)  # noqa: E731
        rounds[label] = {
            "seconds": round(took, 3),
            "resident_before_kill": before["resident"],
            "activate_all_s": round(activate_s, 3),
            "resident_after": after["resident"],
            "after_kill_s": {
                "old_process_gone": since(gone_at),
                "worker_process_started": since(boot["process_started_at"]),  # Ray may reuse a prestarted one
                "host_init_ran": since(boot["init_at"]),
                "store_open_and_recovered": since(boot["booted_at"]),
                "first_call_served": since(served_at),
            },
        }

    async def bare_poll() -> None:
        await _retry(lambda: host.metadata.remote(probe.id))

    async def run_turn() -> None:
        result = await probe.run("after the crash")
        assert result.text == "ok"

    await kill_and_time("handle_metadata", probe.metadata)
    await kill_and_time("handle_run", run_turn)
    await kill_and_time("bare_actor_metadata_polled_10ms", bare_poll)
    return {"sessions": n, "created_in_s": round(created_s, 3), "rounds": rounds}


# -- the run ------------------------------------------------------------------------------------------


def _versions() -> dict[str, str]:
    import sqlite3

    import repertory

    return {
        "repertory": repertory.__version__,
        "ray": ray.__version__,
        "pydantic": pydantic.VERSION,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
    }


async def _part(
    folder: str, name: str, fn: Callable[[Runtime], Awaitable[dict[str, Any]]], backend: str = "ray"
) -> dict[str, Any]:
    _say(f"  {name} ({backend}) ...")
    t0 = time.perf_counter()
    rt = await _runtime(folder, f"{name}-{backend}.db", backend=backend)
    try:
        out = await fn(rt)
    finally:
        await rt.close()
    out["part_seconds"] = round(time.perf_counter() - t0, 1)
    return out


async def _run(mode: str, only: set[str] | None) -> dict[str, Any]:
    size = SIZES[mode]
    want = lambda part: only is None or part in only  # noqa: E731
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="repertory-ray-bench-") as folder:
        if want("overhead"):
            report["turn_overhead"] = {
                backend: await _part(
                    folder,
                    "overhead",
                    lambda rt: _turn_overhead(rt, size["overhead_sessions"], size["overhead_rounds"]),
                    backend,
                )
                for backend in ("local", "ray")
            }
        if want("load"):
            report["load"] = await _part(
                folder, "load", lambda rt: _load(rt, size["load_sessions"], size["load_turns"])
            )
            report["load_profile"] = await _part(
                folder, "profile", lambda rt: _load(rt, size["profile_sessions"], size["load_turns"], profile=True)
            )
        if want("create"):
            report["creations"] = await _part(
                folder,
                "create",
                lambda rt: _creations(
                    rt,
                    size["create_per_call"],
                    size["create_batched"],
                    size["dedicated_actors"],
                    size["dedicated_sessions"],
                ),
            )
        if want("memory"):
            report["memory"] = await _part(folder, "memory", lambda rt: _memory(rt, size["memory_sessions"]))
        if want("events"):
            report["event_latency"] = await _part(
                folder, "events", lambda rt: _events(rt, size["event_turns"], size["event_streams"])
            )
        if want("crash"):
            report["host_crash"] = await _part(folder, "crash", lambda rt: _crash(rt, size["crash_sessions"]))
    return report


def _summary(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per figure read against a target: the value, the target and whether it is met."""
    rows: list[dict[str, Any]] = []

    def add(name: str, value: float | None, target: float | None, at_most: bool, unit: str, note: str = "") -> None:
        rows.append(row(name, value, unit, target, at_most, note))

    if "turn_overhead" in report:
        ray_o, local_o = report["turn_overhead"]["ray"], report["turn_overhead"]["local"]
        hop = ray_o["one_hop_prototype_run"]
        for q in ("p50", "p99"):
            ray_ms, local_ms = ray_o["run_direct"][f"{q}_ms"], local_o["run_direct"][f"{q}_ms"]
            add(
                f"1. turn overhead via Ray (handle.run minus local), {q}",
                round(ray_ms - local_ms, 3),
                TARGETS[f"turn_overhead_{q}_ms"],
                True,
                "ms",
                f"handle.run {ray_ms:.2f} ms vs local {local_ms:.2f} ms; send()+result() {ray_o['run'][f'{q}_ms']:.2f}"
                f" ms; one-hop prototype {hop[f'{q}_ms']:.2f} ms; bare Ray call "
                f"{ray_o['bare_ray_call_ping'][f'{q}_ms']:.2f} ms",
            )
    if "load" in report:
        load = report["load"]
        shape = f"{load['sessions']:,} sessions x {load['turns_per_session']} turns"
        add(
            "2. turns/s per host, handle.run, one client",
            load["handle_run"]["turns_per_s"],
            TARGETS["turns_per_s_per_host"],
            False,
            "turns/s",
            shape,
        )
        add(
            "2. turns/s per host, send_many batches",
            load["send_many"]["turns_per_s"],
            TARGETS["turns_per_s_per_host"],
            False,
            "turns/s",
            "no per-turn client calls",
        )
        add(
            "2. turns/s per host, one-hop prototype",
            load["one_hop_prototype"]["turns_per_s"],
            TARGETS["turns_per_s_per_host"],
            False,
            "turns/s",
            "one Ray call per turn (benchmark-side method)",
        )
    if "creations" in report:
        c = report["creations"]
        add(
            "3. creations/s, rt.create_session, one at a time",
            c["per_call_loop_per_s"],
            TARGETS["creations_per_s_one_per_call"],
            False,
            "/s",
            "client -> host (shared placement: no supervisor; one tick coalesced into one call)",
        )
        add(
            "3. creations/s, rt.create_session, 100 concurrent",
            c["per_call_concurrent_100_per_s"],
            TARGETS["creations_per_s_one_per_call"],
            False,
            "/s",
            "client -> host (shared placement: no supervisor; one tick coalesced into one call)",
        )
        add(
            "3. creations/s, host.create_session, one at a time",
            c["host_direct_loop_per_s"],
            TARGETS["creations_per_s_one_per_call"],
            False,
            "/s",
            "one hop, no supervisor",
        )
        add(
            "3. creations/s, host.create_session, 100 concurrent",
            c["host_direct_concurrent_100_per_s"],
            TARGETS["creations_per_s_one_per_call"],
            False,
            "/s",
            "one hop, no supervisor",
        )
        add(
            "3. creations/s, host.create_sessions(batch of 100)",
            c["batched_100_per_s"],
            TARGETS["creations_per_s_batched"],
            False,
            "/s",
            f"batch of 1,000: {c['batched_1000_per_s']:,.0f}/s",
        )
        t = c["dedicated_trivial_actors"]
        add(
            "3. dedicated Ray actor per session: created/s",
            t["all_at_once"]["per_s"],
            None,
            False,
            "/s",
            f"{t['actors']} trivial actors; one at a time {t['one_at_a_time_s']['p50_ms']:.0f} ms each",
        )
        add(
            "4. dedicated Ray actor per session: private memory",
            t["private_mb_median"],
            None,
            True,
            "MB",
            f"RSS {t['rss_mb_median']} MB, PSS {t['pss_mb_median']} MB (median per actor)",
        )
    if "memory" in report:
        m = report["memory"]
        per = m["rss_growth_bytes_per_session"]
        add(
            "4. host RSS per idle hosted session (activated)",
            per["activated"],
            TARGETS["idle_session_bytes"],
            True,
            "B",
            f"{m['sessions']:,} sessions; rows only {per['created']:,.0f} B; passivated {per['passivated']:,.0f} B",
        )
        add(
            "4. host RSS per idle hosted session (after 1 turn)",
            per["after_one_turn"],
            TARGETS["idle_session_bytes"],
            True,
            "B",
            "its history and run kept in memory",
        )
    if "event_latency" in report:
        e = report["event_latency"]
        one, loaded, many = e["one_session"], e["one_stream_under_load"], e["many_streams"]
        add(
            "5. event latency p50, one stream, idle host",
            one["publish_to_client"]["p50_ms"],
            TARGETS["event_latency_p50_ms"],
            True,
            "ms",
            f"p99 {one['publish_to_client']['p99_ms']:.1f} ms; "
            f"from event.at p50 {one['event_at_to_client']['p50_ms']:.1f}",
        )
        add(
            "5. event latency p50, one stream, host under load",
            loaded["publish_to_client"]["p50_ms"],
            TARGETS["event_latency_p50_ms"],
            True,
            "ms",
            f"{loaded['sessions_running_unwatched']} unwatched sessions running; "
            f"p99 {loaded['publish_to_client']['p99_ms']:.1f} ms",
        )
        add(
            "5. event latency p50, a stream per running session",
            many["publish_to_client"]["p50_ms"],
            TARGETS["event_latency_p50_ms"],
            True,
            "ms",
            f"{many['sessions_each_with_a_stream']} streams; p99 {many['publish_to_client']['p99_ms']:.1f} ms",
        )
    if "host_crash" in report:
        h = report["host_crash"]
        for label, r in h["rounds"].items():
            add(
                f"6. host crash -> first served call ({label})",
                r["seconds"],
                TARGETS["host_crash_to_served_s"],
                True,
                "s",
                f"{r['resident_before_kill']:,} sessions resident; host __init__ after "
                f"{r['after_kill_s']['host_init_ran']} s",
            )
    return rows


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _profile_lines(title: str, p: dict[str, Any], top: int = 10, unit: str = "turn") -> list[str]:
    lines = [f"{title}: {p['busy_us_per_turn']:.0f} us busy per {unit} (idle epoll wait apart)"]
    lines += [f"    {k:40} {v:9.1f} us/{unit}" for k, v in p["by_layer_us_per_turn"].items()]
    lines += ["  top functions by own time:"]
    lines += [f"    {t['us_per_turn']:9.1f} us/{unit}  {t['function']}" for t in p["top_tottime"][:top]]
    return lines


def render(report: dict[str, Any]) -> str:
    """The summary table (every target, its figure, whether it is met), then where the time goes."""
    m = report["machine"]
    head = (
        f"repertory Ray benchmark ({report['mode']}) - {m['platform']}, {m['cpu_count']} CPUs, Python {m['python']}, "
        f"Ray {report['versions']['ray']}; SQLite {m['sqlite_version']} durability {DURABILITY} "
        f"(WAL + synchronous=NORMAL); one host; load average before/after "
        f"{m['load_average_before'][0]:.2f}/{m['load_average_after'][0]:.2f}"
    )
    rows = [
        [
            r["figure"],
            _fmt(r["value"]),
            r["unit"],
            "-" if r["target"] is None else f"{'<=' if r['target_is'] == 'at most' else '>='} {_fmt(r['target'])}",
            {True: "yes", False: "NO", None: "-"}[r["met"]],
            r["note"],
        ]
        for r in report["summary"]
    ]
    headers = ["figure", "value", "unit", "target", "met", "note"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = [
        head,
        "",
        "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    for r in rows:
        cells = [r[0].ljust(widths[0]), r[1].rjust(widths[1])]
        cells += [c.ljust(w) for c, w in zip(r[2:], widths[2:], strict=True)]
        lines.append("  ".join(cells).rstrip())
    if "turn_overhead" in report:
        o = report["turn_overhead"]
        lines += ["", "1. turn overhead split (p50 / p99 ms):"]
        for backend in ("local", "ray"):
            b = o[backend]
            lines.append(
                f"  {backend:5}  run {b['run']['p50_ms']:.2f} / {b['run']['p99_ms']:.2f}   "
                f"send {b['send']['p50_ms']:.2f} / {b['send']['p99_ms']:.2f}   "
                f"result {b['result']['p50_ms']:.2f} / {b['result']['p99_ms']:.2f}"
            )
        r = o["ray"]
        lines.append(
            f"  bare Ray call p50: ping {r['bare_ray_call_ping']['p50_ms']:.2f} ms, "
            f"metadata {r['bare_ray_call_metadata']['p50_ms']:.2f} ms; one-hop prototype run "
            f"{r['one_hop_prototype_run']['p50_ms']:.2f} / {r['one_hop_prototype_run']['p99_ms']:.2f} ms"
        )
        lines.append(
            f"  send() p50: {r['send']['p50_ms']:.2f} ms when its turn starts at once, "
            f"{r['send_that_only_queues']['p50_ms']:.2f} ms when it only queues (session busy)"
        )
    if "load" in report:
        lines += ["", "2. CPU ms per turn under load (client / host / Ray's other processes / unrelated processes):"]
        for label in ("handle_run", "send_many", "one_hop_prototype"):
            d = report["load"][label]
            c = d["cpu_ms_per_turn"]
            lines.append(
                f"  {label:18} {d['turns_per_s']:8,.0f} turns/s   {c['client']:.2f} / {c['host']:.2f} / "
                f"{c['ray_other']:.2f} / {c['unrelated']:.2f}   ({d['cpu']['machine_cpus_busy']:.2f} of "
                f"{m['cpu_count']} CPUs busy)"
            )
    if "load_profile" in report:
        lp = report["load_profile"]
        lines += [""]
        lines += _profile_lines(
            "2. client profile, handle.run (cProfile, event loop thread)", lp["handle_run"]["client_profile"]
        )
        lines += _profile_lines(
            "2. host profile, handle.run (cProfile, host event loop thread)", lp["handle_run"]["host_profile"]
        )
        lines += _profile_lines(
            "2. host profile, send_many (cProfile, host event loop thread)", lp["send_many"]["host_profile"], 6
        )
        lines += _profile_lines(
            "2. host profile, one-hop prototype (cProfile, host event loop thread)",
            lp["one_hop_prototype"]["host_profile"],
            6,
        )
    if "creations" in report:
        c = report["creations"]
        lines += [
            "",
            f"3. ray.get_actor by name (the supervisor does one per creation): p50 "
            f"{c['ray_get_actor_by_name']['p50_ms']:.2f} ms",
        ]
        lines += _profile_lines("3. host profile, create_sessions(100)", c["batched_100_host_profile"], 6, "session")
    if "host_crash" in report:
        lines += [
            "",
            "6. seconds after ray.kill: old process gone / worker process started (a prestarted one: "
            "before the kill) / host __init__ / store open / first call served",
        ]
        for label, r in report["host_crash"]["rounds"].items():
            a = r["after_kill_s"]
            lines.append(
                f"  {label:32} {a['old_process_gone']} / {a['worker_process_started']} / "
                f"{a['host_init_ran']} / {a['store_open_and_recovered']} / {a['first_call_served']}"
            )
    lines += ["", "node hard failure (multi-node): python -m benchmarks.ray_failover"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse arguments, start a local Ray, measure, print the table and write the JSON report."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ray", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (1,000 sessions for memory and crash)")
    parser.add_argument("--only", default=None, help="comma-separated parts: overhead,load,create,memory,events,crash")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"JSON report path (default: {RESULTS})")
    args = parser.parse_args(argv)
    report = measure(args.quick, set(args.only.split(",")) if args.only else None)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(f"\nwrote {args.out}")


def run_suite(quick: bool, out_dir: Path = RESULTS.parent, peers: bool = True) -> dict[str, Any]:
    """The suite's entry (``python -m benchmarks``): measure every part, write ``out_dir/ray.json``."""
    report = measure(quick, None)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "ray.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    return report


def measure(quick: bool, only: set[str] | None) -> dict[str, Any]:
    """Start a local Ray, measure the parts in ``only`` (all when ``None``), print the table, return the report."""
    mode = "quick" if quick else "full"
    if ray.is_initialized():
        raise SystemExit("Ray is already initialised in this process; this benchmark starts its own local instance")
    if __name__ != "__main__":
        # Ray pickles this module's classes and functions by reference unless told otherwise; the
        # hosts need not be able to import ``benchmarks``.
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    machine = machine_info()
    started = time.perf_counter()
    ray.init(address="local", num_cpus=os.cpu_count() or 2, include_dashboard=False, log_to_driver=False)
    try:
        results = asyncio.run(_run(mode, only))
    finally:
        ray.shutdown()  # the instance this script started, nothing else
    machine["load_average_after"] = list(os.getloadavg())
    report: dict[str, Any] = {
        "benchmark": "ray",
        "mode": mode,
        "backend": "ray (local instance started by this script, one node) vs local where stated",
        "store": "SQLite file (WAL), a fresh one per part in a temporary folder",
        "durability": f"{DURABILITY} (WAL + synchronous=NORMAL: survives a process crash, may lose the last commits "
        "on power loss)",
        "hosts": 1,
        "model": "ScriptedModel, zero delay, one text reply per request (one model step per turn)",
        "machine": machine,
        "versions": _versions(),
        "sizes": SIZES[mode],
        "targets": TARGETS,
        "seconds": None,
        **results,
        "out_of_scope": ["node hard failure to sessions served elsewhere (multi-node): not measured by this script"],
    }
    report["summary"] = _summary(report)
    report["seconds"] = round(time.perf_counter() - started, 1)
    print(render(report))
    return report


if __name__ == "__main__":
    main()
