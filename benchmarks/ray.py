"""Ray: the Ray backend's turn overhead, throughput per host, creations, memory, event latency, host crash.

A session host is a Ray actor holding many sessions; every call to it is a Ray hop. So what a turn
pays for the hop, how many turns and creations one host serves, what an idle session costs it, how
soon its events reach a client and how soon it serves again after a crash are read against the
targets of issue 21, with the local backend and Ray's own floors beside them.

One local Ray instance (``ray.init(address="local")``) is started here and shut down at the end,
and only it. Each part opens its own runtime on a fresh SQLite file (WAL, durability normal) with
one shared host (``hosts=1``: every figure is "through one host") and ``keep_hosts=False``. The
model is a zero-delay ``ScriptedModel`` answering every request with one short text: a turn is one
model step. The host is ``BenchHost``, a ``SessionHost`` subclass created under the name the
runtime derives from the store URL before ``Runtime.start``, which then finds it and uses it as its
own. It adds methods only (event stamps, a one-hop ``run_turn`` prototype, cProfile on the host's
event loop thread, boot times): every product path is the product's own code.

1. overhead: ``await handle.run(...)`` one at a time, round-robin over a few sessions, through Ray
   and on the local backend, split into ``send()`` and ``result()``; beside it a bare Ray round trip
   (``host.ping``, ``host.metadata``), the one-hop prototype (one Ray call a turn), ``run_turn``
   timed inside the host, and ``send()`` of a turn that only queues. Both backends also time
   ``handle.run`` after the process idled 2 ms, as a Ray host idles between its calls (a turn back
   to back with the last finds its code and data in the CPU's caches), so the overhead is given
   both ways.
2. load: N sessions each run T turns, all at once, three ways: ``handle.run``, the host's
   ``send_many`` in batches of 256 (completion read from the store), the one-hop prototype; CPU
   seconds of the client, the host, Ray's other processes and unrelated ones (psutil) over each
   window. A smaller run is profiled with cProfile on both event loop threads.
3. create: ``rt.create_session`` one at a time and 100 at once, the host's ``create_session``
   directly, its ``create_sessions`` (100 and 1,000 a call, the host profiled over a few batches),
   ``ray.get_actor`` by name; next to one trivial Ray actor per session (their creation and each
   process's memory) and a few ``placement="dedicated"`` sessions (a host process each).
4. memory: the host's resident set (psutil: RSS, PSS, USS) after a warm-up, after N sessions are
   created (rows only), activated (``metadata()``), after one turn each, and passivated; growth / N.
5. events: from an event published in the host (a listener stamps ``time.time()`` right after the
   commit) to the client receiving it from ``handle.events()`` (same clock), and from ``event.at``
   (stamped at emit, before the commit): one session alone, the same under unwatched load, then M
   sessions each with its own stream.
6. crash: N sessions resident, ``ray.kill(host, no_restart=False)``; once the old process is gone,
   the time from the kill to the first call served: ``handle.metadata()``, ``handle.run()`` and the
   host's ``metadata`` retried every 10 ms through the bare actor handle.

Node hard failure (a multi-node cluster) is ``benchmarks.ray_failover``.

``python -m benchmarks.ray [--quick] [--only overhead,load,create,memory,events,crash]``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import cProfile
import gc
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import psutil  # type: ignore[import-untyped]  # no stubs in the dev install
import ray

from benchmarks.harness.command import Options, main
from benchmarks.harness.figures import Figures, Target, percentile
from benchmarks.harness.local_ray import local_ray
from benchmarks.harness.profiling import Key, by_category, label, stats_of, top_by_tottime, total_tottime
from repertory import Agent
from repertory.actors.bootstrap import store_url_for_hosts
from repertory.actors.client import RayHostClient
from repertory.actors.host import SessionHost
from repertory.actors.names import PREFIX, deployment_namespace, shared_host_name
from repertory.core.ids import new_id
from repertory.core.messages import ModelMessage
from repertory.core.model import ToolSpec
from repertory.core.principal import Principal, to_model_message
from repertory.core.store import TreeStore
from repertory.core.tree import NewSession, SessionEvent
from repertory.storage.url import open_store
from repertory.testing import ScriptedModel
from repertory.tree.handle import SessionHandle
from repertory.tree.runtime import Runtime

PARTS = ("overhead", "load", "create", "memory", "events", "crash")
SIZES: dict[str, dict[str, int]] = {
    "full": {"overhead_sessions": 20, "overhead_rounds": 1_000, "load_sessions": 1_000, "load_turns": 5,
             "profile_sessions": 300, "create_per_call": 2_000, "create_batched": 20_000, "dedicated_actors": 100,
             "dedicated_sessions": 3, "memory_sessions": 10_000, "event_turns": 300, "event_streams": 100,
             "crash_sessions": 10_000},
    "quick": {"overhead_sessions": 10, "overhead_rounds": 200, "load_sessions": 200, "load_turns": 3,
              "profile_sessions": 100, "create_per_call": 300, "create_batched": 2_000, "dedicated_actors": 20,
              "dedicated_sessions": 1, "memory_sessions": 1_000, "event_turns": 60, "event_streams": 30,
              "crash_sessions": 1_000},
}  # fmt: skip
AGENT, SLOW = "assistant", "slow"
IDLE_TIMEOUT = 3600.0  # nothing is passivated behind the benchmark's back
BATCH = 100
IDLE_BEFORE = 0.002
"""Seconds idle before each "after idle" turn: about one Ray round trip, what a host waits between calls."""
IDLE = "idle (epoll wait)"
RAY_MARKS = ("raylet", "gcs_server", "ray::", "default_worker", "/ray/", "ray/_private", "dashboard")
"""Command-line marks of Ray's own processes (raylet, GCS, workers, the dashboard)."""
GROUPS = ("client", "host", "ray_other", "unrelated")
CREATIONS = Target(1_000, at_most=False)


def _reply(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """Every request gets the same short final reply (usage given: no token estimate scans)."""
    return {"text": "ok", "usage": {"input_tokens": 8, "output_tokens": 1}}


def _agents() -> dict[str, Agent]:
    """The agent every part runs, and one that holds its session busy (so further sends only queue)."""
    return {AGENT: Agent(name=AGENT, model=ScriptedModel(_reply), instructions="Answer in one word."),
            SLOW: Agent(name=SLOW, model=ScriptedModel(_reply, delay=30.0))}  # fmt: skip


def _layer(key: Key) -> str:
    """The layer a profiled function belongs to."""
    f, name = key[0].replace("\\", "/"), key[2]
    if "select.epoll" in name:
        return IDLE
    for mark, layer in (("/repertory/actors/", "repertory.actors"), ("/repertory/storage/", "repertory.storage"),
                        ("/repertory/", "repertory"), ("__main__", "repertory"), ("/benchmarks/", "repertory"),
                        ("/ray/", "ray (python side)"), ("/pydantic", "pydantic"), ("/asyncio/", "asyncio"),
                        ("selectors", "asyncio"), ("sqlite3", "sqlite3")):  # fmt: skip
        if mark in f:
            return layer
    if "sqlite3" in name:
        return "sqlite3"
    if f.startswith("~") or not f:
        return "pydantic" if "pydantic" in name else "ray (C++ bindings)" if "_raylet" in name or "ray." in name \
            else "builtins (C)"  # fmt: skip
    return "other"


def _profiled(profiler: cProfile.Profile, per: int) -> dict[str, Any]:
    """Own seconds per turn (or session) by layer, busy (idle wait apart) and the top functions: plain data,
    as a host returns it across Ray."""
    stats = stats_of(profiler)
    layers = by_category(stats, _layer)
    top = [f"{label(k, basename=True)} {s[2] / per * 1e6:.1f} us" for k, s in top_by_tottime(stats, 8)]
    busy = (total_tottime(stats) - layers.get(IDLE, 0.0)) / per
    return {"busy": busy, "layers": {k: v / per for k, v in layers.items()}, "top": top}


def _record_profile(figures: Figures, name: str, p: dict[str, Any], per: str = "turn") -> None:
    figures.time(f"{name}: busy per {per}", p["busy"], note="cProfile; the idle epoll wait apart")
    figures.fact(f"{name}, by layer per {per}", "; ".join(f"{k} {v * 1e6:.1f} us" for k, v in p["layers"].items()))
    figures.fact(f"{name}, top functions by own time per {per}", "; ".join(p["top"]))


class BenchHost(SessionHost):
    """``SessionHost`` plus what only a benchmark needs; the product's methods are untouched."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.init_at = time.time()
        super().__init__(*args, **kwargs)
        self.stamped: dict[str, dict[int, float]] = {}
        self.profiler: cProfile.Profile | None = None
        self.booted_at: float | None = None
        self.boot_watch = asyncio.get_event_loop().create_task(self.note_boot())

    async def note_boot(self) -> None:
        """Stamp when the host's store is open and its sessions recovered."""
        await self.local_host()
        self.booted_at = time.time()

    async def stamp(self, session_ids: list[str]) -> None:
        """Stamp ``time.time()`` as each event of ``session_ids`` is published (right after its commit)."""
        host = await self.local_host()
        for session_id in session_ids:
            stamps = self.stamped.setdefault(session_id, {})

            def on_event(event: SessionEvent, stamps: dict[int, float] = stamps) -> None:
                if event.seq is not None:
                    stamps[event.seq] = time.time()

            host.listen(session_id, on_event)

    async def stamps(self, session_ids: list[str]) -> dict[str, dict[int, float]]:
        """The stamps taken so far: session id -> seq -> publish time (epoch seconds)."""
        return {sid: dict(self.stamped.get(sid, {})) for sid in session_ids}

    async def bench_run_turn(self, session_id: str, message: ModelMessage, submission_id: str) -> str | None:
        """A one-hop ``run``: queue the turn, wait for it to rest, return its reply text."""
        host = await self.local_host()
        await host.send(session_id, message, "message", "enqueue", None, submission_id)
        await host.wait_turn(session_id, submission_id)
        turn = await host.store.load_turn(submission_id)
        run = await host.store.load_run(turn.run_id) if turn is not None else None
        return run.result if run is not None and isinstance(run.result, str) else None

    async def bench_timed_run(self, session_id: str, message: ModelMessage, submission_id: str) -> float:
        """``LocalHost.run_turn`` timed inside the host: a turn's own work, without the Ray call."""
        host = await self.local_host()
        t0 = time.perf_counter()
        await host.run_turn(session_id, message, "message", None, submission_id)
        return time.perf_counter() - t0

    async def profile_start(self) -> None:
        """Start cProfile on the event loop thread (where sessions and async methods run)."""
        self.profiler = cProfile.Profile()
        self.profiler.enable()

    async def profile_stop(self, per: int) -> dict[str, Any]:
        """Stop the profiler; its figures per turn."""
        assert self.profiler is not None
        self.profiler.disable()
        out, self.profiler = _profiled(self.profiler, per), None
        return out

    async def boot_times(self) -> dict[str, float | None]:
        """Epoch seconds: process start, ``__init__``, store open."""
        started = psutil.Process(os.getpid()).create_time()
        return {"worker process started": started, "host __init__ ran": self.init_at,
                "store open and recovered": self.booted_at}  # fmt: skip


class Trivial:
    """One dedicated Ray actor per session, as the design card's naive mapping would have it."""

    def ping(self) -> int:
        """The actor's pid."""
        return os.getpid()


async def start_runtime(folder: str, name: str, backend: str = "ray") -> Runtime:
    """A runtime on a fresh SQLite file; on Ray, with ``BenchHost`` as its one shared host."""
    url = f"sqlite:///{os.path.join(folder, name)}?durability=normal"
    specs = _agents()
    if backend == "local":
        return await Runtime.start(store=url, backend="local", agents=specs, idle_timeout=IDLE_TIMEOUT)
    store = await open_store(url)  # the name (and namespace) start_ray_client derives from the URL
    try:
        assert isinstance(store, TreeStore)
        host_url = store_url_for_hosts(store, url)
    finally:
        await store.close()
    remote: Any = ray.remote
    remote(BenchHost).options(
        name=shared_host_name(PREFIX, 0), namespace=deployment_namespace(host_url), lifetime="detached",
        get_if_exists=True, max_restarts=-1, max_task_retries=0, max_concurrency=1000, num_cpus=0,
    ).remote(host_url, specs, index=0, hosts=1, idle_timeout=IDLE_TIMEOUT)  # fmt: skip
    rt = await Runtime.start(store=url, backend="ray", agents=specs, hosts=1, idle_timeout=IDLE_TIMEOUT,
                             keep_hosts=False)  # fmt: skip
    try:
        await host_of(rt).stamps.remote([])
    except Exception as exc:
        await rt.close()
        raise RuntimeError("the runtime did not pick up the benchmark's host (did the host naming change?)") from exc
    return rt


def client_of(rt: Runtime) -> RayHostClient:
    """The runtime's Ray client."""
    assert isinstance(rt.host, RayHostClient), "a Ray part runs on backend='ray'"
    return rt.host


def host_of(rt: Runtime) -> Any:
    """The actor handle of the runtime's only shared host (looked up by its name, as the supervisor does)."""
    client = client_of(rt)
    return ray.get_actor(shared_host_name(client.prefix, 0), namespace=client.namespace)


async def bulk_sessions(rt: Runtime, n: int) -> list[SessionHandle]:
    """``n`` sessions created through the host's batch method, as handles."""
    ids: list[str] = []
    for start in range(0, n, BATCH):
        specs = [NewSession(agent=AGENT) for _ in range(min(BATCH, n - start))]
        ids += [r.session_id for r in await host_of(rt).create_sessions.remote(specs)]
    return [await rt.session(sid) for sid in ids]


async def activate(handles: Sequence[SessionHandle]) -> None:
    """Bring every session's actor into its host's memory (``metadata()`` activates it), 1,000 at a time."""
    for start in range(0, len(handles), 1_000):
        await asyncio.gather(*(h.metadata() for h in handles[start : start + 1_000]))


async def wait_no_open_turns(rt: Runtime) -> None:
    """Until no turn is open anywhere."""
    while await rt.store.list_open_turns():  # noqa: ASYNC110  # the turns run in another process: the store sees them
        await asyncio.sleep(0.02)


def message(text: str) -> ModelMessage:
    """A user's message, as a handle builds it."""
    return to_model_message(text, Principal.user())[0]


async def send_many(rt: Runtime, handles: Sequence[SessionHandle], turns: int, tag: str) -> None:
    """Queue ``turns`` turns on every session, straight to the host in ``send_many`` batches of 256."""
    items = [
        (h.id, message(f"{tag} {i} {t}"), "message", new_id()) for t in range(turns) for i, h in enumerate(handles)
    ]
    host = host_of(rt)
    await asyncio.gather(*(host.send_many.remote(items[i : i + 256]) for i in range(0, len(items), 256)))


async def _timed(work: Awaitable[Any]) -> float:
    t0 = time.perf_counter()
    await work
    return time.perf_counter() - t0


def _memory(pid: int) -> Any:
    """RSS, PSS and USS (what the process adds beside shared pages) of a process."""
    return psutil.Process(pid).memory_full_info()


def _alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def _cpu(host_pid: int) -> dict[str, float]:
    """CPU seconds so far by group (client, host, Ray's other processes, unrelated) and of the busy machine."""
    groups = dict.fromkeys(GROUPS, 0.0)
    for proc in psutil.process_iter(["pid", "cmdline", "cpu_times"]):
        times, cmd, pid = proc.info["cpu_times"], " ".join(proc.info["cmdline"] or ()), proc.info["pid"]
        if times is not None:
            mark = any(m in cmd for m in RAY_MARKS)
            group = (
                "client" if pid == os.getpid() else "host" if pid == host_pid else "ray_other" if mark else "unrelated"
            )
            groups[group] += times.user + times.system
    machine = psutil.cpu_times()
    groups["machine"] = sum(machine) - machine.idle - getattr(machine, "iowait", 0.0)
    return groups


async def overhead(rt: Runtime, sessions: int, rounds: int) -> dict[str, list[float]]:
    """``handle.run`` one at a time round-robin, split in ``send()`` and ``result()``; Ray's floors beside it."""
    handles = [await rt.create_session(agent=AGENT) for _ in range(sessions)]
    for i in range(max(20, sessions * 2)):
        await handles[i % sessions].run(f"warm {i}")
    out: dict[str, list[float]] = collections.defaultdict(list)
    gc.collect()
    for i in range(rounds):
        t0 = time.perf_counter()
        turn = await handles[i % sessions].send(f"turn {i}")
        t1 = time.perf_counter()
        if (await turn.result()).text != "ok":
            raise RuntimeError("a turn did not answer ok")
        out["send()+result()"].append(time.perf_counter() - t0)
        out["send()"].append(t1 - t0)
        out["result()"].append(time.perf_counter() - t1)
    for i in range(min(rounds, 200)):  # handle.run() itself, back to back
        out["handle.run"].append(await _timed(handles[i % sessions].run(f"run {i}")))
    for i in range(min(rounds, 200)):  # each after the process idled, as a Ray host does between its calls
        await asyncio.sleep(IDLE_BEFORE)
        out["handle.run after a 2 ms idle"].append(await _timed(handles[i % sessions].run(f"idle {i}")))
    if rt.backend != "ray":
        return out
    host = host_of(rt)
    for i in range(500):
        out["bare Ray call (host.ping)"].append(await _timed(host.ping.remote()))
        out["bare Ray call (host.metadata)"].append(await _timed(host.metadata.remote(handles[i % sessions].id)))
    for i in range(rounds):
        out["one-hop prototype run"].append(await _timed(host.bench_run_turn.remote(
            handles[i % sessions].id, message(f"hop {i}"), new_id())))  # fmt: skip
    for i in range(rounds):
        sid = handles[i % sessions].id
        out["run_turn timed inside the host"].append(
            await host.bench_timed_run.remote(sid, message(f"t {i}"), new_id())
        )
    busy = await rt.create_session(agent=SLOW)  # send() whose turn only queues, its session busy
    await busy.send("hold the session")
    for i in range(min(rounds, 300)):
        out["send() that only queues (session busy)"].append(await _timed(busy.send(f"queued {i}")))
    await busy.cancel()
    return out


def record_overhead(figures: Figures, by: dict[str, dict[str, list[float]]]) -> None:
    """Every timing of both backends, then Ray's overhead over local at p50 and p99 (targets 2 and 10 ms)."""
    for backend, samples in by.items():
        for name, values in samples.items():
            figures.time(f"1. {name}, {backend}", values)
    ray_run, local_run = by["ray"]["handle.run"], by["local"]["handle.run"]
    for q, target in ((50, 2e-3), (99, 10e-3)):
        figures.time(f"1. turn overhead via Ray (handle.run minus local), p{q}",
                     percentile(ray_run, q) - percentile(local_run, q), target=Target(target))  # fmt: skip
    ray_idle, local_idle = by["ray"]["handle.run after a 2 ms idle"], by["local"]["handle.run after a 2 ms idle"]
    figures.time("1. turn overhead via Ray, both after a 2 ms idle (handle.run minus local), p50",
                 percentile(ray_idle, 50) - percentile(local_idle, 50),
                 note="a Ray host's turn always follows a wait")  # fmt: skip


async def load(figures: Figures, rt: Runtime, n: int, turns: int, profile: bool) -> None:
    """N sessions x T turns through one host, three ways; with ``profile``, cProfile on both sides."""
    host = host_of(rt)
    handles = await bulk_sessions(rt, n)
    await asyncio.gather(*(h.run("warm") for h in handles))  # every session active, client caches filled
    host_pid = (await host.ping.remote())["pid"]
    count = n * turns

    async def measured(way: str, work: Callable[[], Awaitable[list[float]]]) -> None:
        gc.collect()
        client = cProfile.Profile()
        if profile:
            await host.profile_start.remote()
            client.enable()
        before, t0 = _cpu(host_pid), time.perf_counter()
        latencies = await work()
        wall, after = time.perf_counter() - t0, _cpu(host_pid)
        client.disable()
        name = f"2. {'profiled: ' if profile else ''}turns/s per host, {way}"
        figures.value(name, count / wall, "turns/s", target=None if profile else Target(1_000, at_most=False),
                      note=f"{n:,} sessions x {turns} turns")  # fmt: skip
        if profile:
            _record_profile(figures, f"2. client profile, {way}", _profiled(client, count))
            _record_profile(figures, f"2. host profile, {way}", await host.profile_stop.remote(count))
            return
        for group in GROUPS:
            figures.time(f"2. CPU per turn, {way}, {group}", (after[group] - before[group]) / count)
        figures.value(f"2. CPUs busy, {way}", (after["machine"] - before["machine"]) / wall, "CPUs")
        if latencies:
            figures.time(f"2. turn latency under load, {way}", latencies)

    async def each(call: Callable[[SessionHandle, int], Awaitable[Any]]) -> list[float]:
        latencies: list[float] = []

        async def one(h: SessionHandle) -> None:
            for t in range(turns):
                latencies.append(await _timed(call(h, t)))

        await asyncio.gather(*(one(h) for h in handles))
        return latencies

    async def batched() -> list[float]:
        queued = await _timed(send_many(rt, handles, turns, "batched"))
        await wait_no_open_turns(rt)
        if not profile:
            figures.time("2. send_many batches of 256: all queued", queued, note="completion polled from the store")
        return []

    await measured("handle.run, one client", lambda: each(lambda h, t: h.run(f"load {t}")))
    await measured("send_many batches", batched)
    await measured("one-hop prototype", lambda: each(lambda h, t: host.bench_run_turn.remote(
        h.id, message(f"hop {t}"), new_id())))  # fmt: skip


async def create(figures: Figures, rt: Runtime, n_call: int, n_batch: int, n_actors: int, n_dedicated: int) -> None:
    """Creations per second one per call (client and host), batched; dedicated actors and sessions beside them."""
    host = host_of(rt)
    for _ in range(50):
        await rt.create_session(agent=AGENT)
    await host.create_sessions.remote([NewSession(agent=AGENT) for _ in range(BATCH)])

    async def chunks(total: int, size: int, make: Callable[[int], Awaitable[Any]]) -> None:
        for start in range(0, total, size):
            await make(min(size, total - start))

    async def loop(call: Callable[[], Awaitable[Any]]) -> None:
        for _ in range(n_call):
            await call()

    async def many(k: int, call: Callable[[], Awaitable[Any]]) -> None:
        await asyncio.gather(*(call() for _ in range(k)))

    def in_host() -> Awaitable[Any]:
        ref: Awaitable[Any] = host.create_session.remote(NewSession(agent=AGENT))
        return ref

    def in_rt() -> Awaitable[Any]:
        return rt.create_session(agent=AGENT)

    def batch(k: int) -> Awaitable[Any]:
        ref: Awaitable[Any] = host.create_sessions.remote([NewSession(agent=AGENT) for _ in range(k)])
        return ref

    ways: list[tuple[str, Awaitable[None], int, Target | None, str]] = [
        ("rt.create_session, one at a time", loop(in_rt), n_call, CREATIONS, "client -> host"),
        ("rt.create_session, 100 concurrent", chunks(n_call, BATCH, lambda k: many(k, in_rt)), n_call, CREATIONS,
         "client -> host; one tick coalesced into one call"),
        ("host.create_session, one at a time", loop(in_host), n_call, CREATIONS, "one hop"),
        ("host.create_session, 100 concurrent", chunks(n_call, BATCH, lambda k: many(k, in_host)), n_call, CREATIONS,
         "one hop"),
        ("host.create_sessions(batch of 100)", chunks(n_batch, BATCH, batch), n_batch, Target(10_000, at_most=False),
         ""),
        ("host.create_sessions(batch of 1,000)", chunks(n_batch, 1_000, batch), n_batch, None, ""),
    ]  # fmt: skip
    for name, work, count, target, note in ways:
        gc.collect()
        figures.value(f"3. creations/s, {name}", count / await _timed(work), "/s", target=target, note=note)
    await host.profile_start.remote()
    wall = await _timed(chunks(10 * BATCH, BATCH, batch))
    _record_profile(figures, "3. host profile, create_sessions(100)", await host.profile_stop.remote(10 * BATCH),
                    "session")  # fmt: skip
    figures.time("3. create_sessions(100) while profiled, wall per session", wall / (10 * BATCH))
    client = client_of(rt)
    name = shared_host_name(client.prefix, 0)
    lookups = []
    for _ in range(200):
        t0 = time.perf_counter()
        ray.get_actor(name, namespace=client.namespace)
        lookups.append(time.perf_counter() - t0)
    figures.time("3. ray.get_actor by name", lookups)
    await trivial_actors(figures, n_actors)
    created, first_turn = [], []
    for i in range(n_dedicated):
        t0 = time.perf_counter()
        h = await rt.create_session(agent=AGENT, placement="dedicated")
        created.append(time.perf_counter() - t0)
        first_turn.append(await _timed(h.run(f"hello {i}")))
    figures.time("3. dedicated session (a host process of its own): creation", created)
    figures.time("3. dedicated session: first turn", first_turn)
    mem = [_memory(f["pid"]) for f in await client.ping() if f["dedicated"]]
    if mem:
        figures.size("3. dedicated session: host RSS", statistics.median(m.rss for m in mem))
        figures.size("3. dedicated session: host private memory (USS)", statistics.median(m.uss for m in mem))


async def trivial_actors(figures: Figures, n: int) -> None:
    """Create ``n`` trivial actors: the first 5 one at a time, the rest all at once; memory of each."""
    remote: Any = ray.remote
    cls = remote(num_cpus=0)(Trivial)
    actors: list[Any] = []
    sequential: list[float] = []
    try:
        for _ in range(min(5, n)):
            t0 = time.perf_counter()
            actors.append(cls.remote())
            await actors[-1].ping.remote()
            sequential.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        batch = [cls.remote() for _ in range(n - len(actors))]
        await asyncio.gather(*(a.ping.remote() for a in batch))
        at_once = time.perf_counter() - t0
        actors += batch
        mem = [_memory(pid) for pid in await asyncio.gather(*(a.ping.remote() for a in actors))]
    finally:
        for actor in actors:
            with contextlib.suppress(Exception):
                ray.kill(actor)
    figures.time("3. dedicated Ray actor per session: one at a time", sequential)
    if batch:
        figures.value("3. dedicated Ray actor per session: created/s", len(batch) / at_once, "/s",
                      note=f"{len(batch)} trivial actors all at once")  # fmt: skip
    for kind, attr in (("RSS", "rss"), ("PSS", "pss"), ("private memory (USS)", "uss")):
        figures.size(f"4. dedicated Ray actor per session: {kind}", statistics.median(getattr(m, attr) for m in mem),
                     note="median per actor")  # fmt: skip


async def memory(figures: Figures, rt: Runtime, n: int) -> None:
    """The host's resident set after a warm-up, N sessions created, activated, after a turn each, passivated."""
    host = host_of(rt)
    pid = (await host.ping.remote())["pid"]
    rss: dict[str, int] = {}

    async def read(stage: str) -> None:
        await asyncio.sleep(0.2)
        mem, resident = _memory(pid), (await host.ping.remote())["resident"]
        rss[stage] = mem.rss
        for kind, attr in (("RSS", "rss"), ("PSS", "pss"), ("USS", "uss")):
            figures.size(f"4. host {kind}, {stage}", getattr(mem, attr))
        figures.count(f"4. sessions resident in the host, {stage}", resident)

    warm = await bulk_sessions(rt, 500)  # code paths, caches and the connection warmed up, then passivated
    await activate(warm)
    await send_many(rt, warm, 1, "warm")
    await wait_no_open_turns(rt)
    await host.passivate_idle.remote(0)
    await read("baseline")
    handles = await bulk_sessions(rt, n)
    await read("created")
    await activate(handles)
    await read("activated")
    await send_many(rt, handles, 1, "one")
    await wait_no_open_turns(rt)
    await read("after one turn")
    figures.count("4. sessions passivated", await host.passivate_idle.remote(0))
    await read("passivated")
    for stage, note in (("created", "rows only"), ("activated", ""), ("after one turn", "its history and run kept"),
                        ("passivated", "")):  # fmt: skip
        figures.size(f"4. host RSS per idle hosted session ({stage})", (rss[stage] - rss["baseline"]) / n,
                     target=Target(10 * 1024) if stage in ("activated", "after one turn") else None,
                     note=f"{n:,} sessions; {note}".rstrip("; "))  # fmt: skip


async def events(figures: Figures, rt: Runtime, turns: int, streams: int) -> None:
    """One watched session alone; the same under unwatched load; M sessions each with its own stream."""
    host = host_of(rt)
    single = (await bulk_sessions(rt, 1))[0]
    many, quiet = await bulk_sessions(rt, streams), await bulk_sessions(rt, streams)
    await host.stamp.remote([single.id, *(h.id for h in many)])
    received: dict[str, list[tuple[int, str, int, float]]] = collections.defaultdict(list)

    async def reader(h: SessionHandle) -> None:
        async for event in h.events():
            now = time.time()
            if event.seq is not None:
                received[h.id].append((event.seq, event.type, event.at, now))

    async def settle(ids: Sequence[str], expected: int) -> None:
        deadline = time.monotonic() + 30
        while sum(1 for sid in ids for e in received[sid] if e[1] == "turn.completed") < expected:
            if time.monotonic() > deadline:
                raise RuntimeError("events did not arrive within 30 s")
            await asyncio.sleep(0.01)  # polling: events arrive from another process

    async def record(phase: str, ids: list[str], note: str) -> None:
        stamps = await host.stamps.remote(ids)
        precise = [now - stamps[sid][seq] for sid in ids for seq, _, _, now in received[sid] if seq in stamps[sid]]
        figures.time(f"5. event latency, {phase}", precise, target=Target(5e-3), note=note)
        from_at = [now - at / 1000 for sid in ids for _, _, at, now in received[sid]]
        figures.time(f"5. event latency from event.at, {phase}", from_at, note="event.at: stamped before the commit")

    async def run_n(h: SessionHandle, n: int) -> None:
        for i in range(n):
            await h.run(f"many {i}")

    tasks = [asyncio.create_task(reader(single))]
    try:
        await single.run("warm")
        await settle([single.id], 1)
        received[single.id].clear()
        for i in range(turns):
            await single.run(f"turn {i}")
        await settle([single.id], turns)
        await record("one stream, idle host", [single.id], "host publish (after the commit) to the client")
        for kind, k in collections.Counter(e[1] for e in received[single.id]).items():
            figures.value(f"5. {kind} events per turn", k / turns, "events")
        # The same stream while as many sessions as in the next phase run turns with nobody watching.
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

        watched = asyncio.create_task(watched_loop())
        wall = await _timed(asyncio.gather(*(run_n(h, per_quiet) for h in quiet)))
        others_done = True
        await settle([single.id], await watched)
        await record("one stream, host under load", [single.id], f"{len(quiet)} unwatched sessions running")
        figures.value("5. turns/s of the unwatched sessions", len(quiet) * per_quiet / wall, "turns/s")
        tasks += [asyncio.create_task(reader(h)) for h in many]
        await asyncio.gather(*(h.run("warm") for h in many))
        await settle([h.id for h in many], len(many))
        for h in many:
            received[h.id].clear()
        wall = await _timed(asyncio.gather(*(run_n(h, per) for h in many)))
        await settle([h.id for h in many], len(many) * per)
        await record("a stream per running session", [h.id for h in many], f"{len(many)} streams")
        figures.value("5. turns/s of the sessions with a stream each", len(many) * per / wall, "turns/s")
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


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


async def crash(figures: Figures, rt: Runtime, n: int) -> None:
    """Kill the host three times (sessions re-activated before each); time the first call served after."""
    host = host_of(rt)
    t0 = time.perf_counter()
    handles = await bulk_sessions(rt, n)
    figures.time("6. creating the sessions", time.perf_counter() - t0, note=f"{n:,} sessions")
    probe = handles[n // 2]
    await probe.run("before the crash")

    async def run_turn() -> None:
        if (await probe.run("after the crash")).text != "ok":
            raise RuntimeError("a turn after the crash did not answer ok")

    ways: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("handle_metadata", probe.metadata), ("handle_run", run_turn),
        ("bare_actor_metadata_polled_10ms", lambda: _retry(lambda: host.metadata.remote(probe.id)))]  # fmt: skip
    for way, served in ways:
        figures.time(f"6. activating every session before a kill ({way})", await _timed(activate(handles)))
        before = await host.ping.remote()
        killed_at, t0 = time.time(), time.perf_counter()
        ray.kill(host, no_restart=False)
        # ray.kill only asks: until the old process is gone it may still serve a call, which would time
        # nothing. Wait for it to die (the clock runs from the kill), then call.
        for _ in range(6000):  # polling: another process's death, nothing here to await
            if not _alive(before["pid"]):
                break
            await asyncio.sleep(0.005)
        gone_at = time.time()
        await served()
        took, served_at = time.perf_counter() - t0, time.time()
        after = await _retry(host.ping.remote)
        if after["pid"] == before["pid"]:
            raise RuntimeError("the host was not restarted")
        figures.time(f"6. host crash -> first served call ({way})", took, target=Target(5.0),
                     note=f"{before['resident']:,} sessions resident")  # fmt: skip
        figures.count(f"6. sessions resident after the crash ({way})", after["resident"])
        stamps = {"old process gone": gone_at, **await host.boot_times.remote(), "first call served": served_at}
        for stage, at in stamps.items():  # a prestarted worker process started before the kill: negative
            if at is not None:
                figures.time(f"6. after the kill: {stage} ({way})", at - killed_at)


async def _part(figures: Figures, folder: str, name: str, work: Callable[[Runtime], Awaitable[Any]],
                backend: str = "ray") -> Any:  # fmt: skip
    print(f"  {name} ({backend}) ...", flush=True)
    t0 = time.perf_counter()
    rt = await start_runtime(folder, f"{name}-{backend}.db", backend=backend)
    try:
        out = await work(rt)
    finally:
        await rt.close()
    figures.time(f"{name} part ({backend}), runtime start and close included", time.perf_counter() - t0)
    return out


async def _parts(figures: Figures, options: Options) -> None:
    size, only = SIZES[options.mode], set((options.args.only or ",".join(PARTS)).split(","))
    with tempfile.TemporaryDirectory(prefix="repertory-ray-bench-") as folder:
        if "overhead" in only:
            by = {b: await _part(figures, folder, "overhead", lambda rt: overhead(rt, size["overhead_sessions"],
                                 size["overhead_rounds"]), b) for b in ("local", "ray")}  # fmt: skip
            record_overhead(figures, by)
        if "load" in only:
            await _part(figures, folder, "load", lambda rt: load(figures, rt, size["load_sessions"],
                                                                 size["load_turns"], False))  # fmt: skip
            await _part(figures, folder, "profile", lambda rt: load(figures, rt, size["profile_sessions"],
                                                                    size["load_turns"], True))  # fmt: skip
        if "create" in only:
            await _part(figures, folder, "create", lambda rt: create(figures, rt, size["create_per_call"],
                        size["create_batched"], size["dedicated_actors"], size["dedicated_sessions"]))  # fmt: skip
        if "memory" in only:
            await _part(figures, folder, "memory", lambda rt: memory(figures, rt, size["memory_sessions"]))
        if "events" in only:
            await _part(figures, folder, "events", lambda rt: events(figures, rt, size["event_turns"],
                                                                     size["event_streams"]))  # fmt: skip
        if "crash" in only:
            await _part(figures, folder, "crash", lambda rt: crash(figures, rt, size["crash_sessions"]))


def scenario(figures: Figures, options: Options) -> None:
    """Start a local Ray, measure the parts asked for (all by default), stop it."""
    figures.fact("backend", f"ray {ray.__version__} (a local instance started here, one node), one shared host; "
                 "local where stated")  # fmt: skip
    figures.fact("store", "SQLite file (WAL, synchronous=NORMAL), a fresh one per part")
    figures.fact("model", "ScriptedModel, zero delay, one text reply per request (one model step per turn)")
    figures.fact("sizes", ", ".join(f"{k} {v:,}" for k, v in SIZES[options.mode].items()))
    with local_ray():
        asyncio.run(_parts(figures, options))


def _args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--only", default=None, help=f"comma-separated parts: {','.join(PARTS)}")


if __name__ == "__main__":
    main("ray", __doc__, scenario=scenario, add_args=_args)
