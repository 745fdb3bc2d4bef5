"""The benchmark's session host and the runtime around it: ``BenchHost``, one shared host, helpers.

``BenchHost`` is a ``SessionHost`` subclass created under the name (and namespace) the runtime
derives from the store URL, with the runtime's actor options, before ``Runtime.start``, which then
finds it (``get_if_exists``) and uses it as its own. It adds methods only; every product path
(``handle.run``, ``send``, ``events``, creation, restart) is the product's own code.
"""

from __future__ import annotations

import asyncio
import cProfile
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import ray

from benchmarks.harness.procfs import process_started_at
from benchmarks.ray.profile import profile_figures
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

__all__ = [
    "AGENT",
    "BATCH",
    "SLOW",
    "BenchHost",
    "Trivial",
    "activate",
    "bulk_sessions",
    "client_of",
    "create_spec",
    "gather_chunked",
    "host_of",
    "message",
    "send_many",
    "start_runtime",
    "wait_no_open_turns",
]

AGENT = "assistant"
SLOW = "slow"
DURABILITY = "normal"
IDLE_TIMEOUT = 3600.0  # nothing is passivated behind the benchmark's back
BATCH = 100


def reply(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """Every request gets the same short final reply (usage given: no token estimate scans)."""
    return {"text": "ok", "usage": {"input_tokens": 8, "output_tokens": 1}}


def agents() -> dict[str, Agent]:
    """The agent every part runs, and one that holds its session busy (so further sends only queue)."""
    return {
        AGENT: Agent(name=AGENT, model=ScriptedModel(reply), instructions="Answer in one word."),
        SLOW: Agent(name=SLOW, model=ScriptedModel(reply, delay=30.0)),
    }


class BenchHost(SessionHost):
    """``SessionHost`` plus what only a benchmark needs; the product's methods are untouched.

    - ``stamp``/``stamps``: a listener stamps ``time.time()`` when each event of a watched session is
      published, which the bus does right after the commit that made it durable;
    - ``bench_run_turn``: a prototype of a one-hop ``run`` (send, wait and read the reply inside the
      host), to measure what a single Ray call per turn costs next to the client's calls and reads;
    - ``profile_start``/``profile_stop``: cProfile on the host's event loop thread;
    - ``boot_times``: when this process started, when ``__init__`` ran and when the store was open.
    """

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
        """Start stamping the events of ``session_ids``."""
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
        """One call per turn: queue it, wait for it to rest, return its reply text."""
        host = await self.local_host()
        await host.send(session_id, message, "message", "enqueue", None, submission_id)
        await host.wait_turn(session_id, submission_id)
        turn = await host.store.load_turn(submission_id)
        run = await host.store.load_run(turn.run_id) if turn is not None else None
        return run.result if run is not None and isinstance(run.result, str) else None

    async def bench_timed_run(self, session_id: str, message: ModelMessage, submission_id: str) -> float:
        """``LocalHost.run_turn`` timed inside the host: seconds of a turn's own work, without the Ray call."""
        host = await self.local_host()
        t0 = time.perf_counter()
        await host.run_turn(session_id, message, "message", None, submission_id)
        return time.perf_counter() - t0

    async def profile_start(self) -> None:
        """Start cProfile on the event loop thread (where sessions and async methods run)."""
        self.profiler = cProfile.Profile()
        self.profiler.enable()

    async def profile_stop(self, turns: int) -> dict[str, Any]:
        """Stop the profiler; its figures per turn (``RayProfile``'s fields: plain data crosses Ray)."""
        assert self.profiler is not None
        self.profiler.disable()
        figures = profile_figures(self.profiler, turns)
        self.profiler = None
        return figures

    async def boot_times(self) -> dict[str, float | None]:
        """Epoch seconds: process start, ``__init__``, store open."""
        return {
            "process_started_at": process_started_at(os.getpid()),
            "init_at": self.init_at,
            "booted_at": self.booted_at,
        }


class Trivial:
    """One dedicated Ray actor per session, as the design card's naive mapping would have it."""

    def ping(self) -> int:
        """The actor's pid."""
        return os.getpid()


async def start_runtime(folder: str, name: str, backend: str = "ray", **options: Any) -> Runtime:
    """A runtime on a fresh SQLite file; on Ray, with ``BenchHost`` as its one shared host."""
    url = f"sqlite:///{os.path.join(folder, name)}?durability={DURABILITY}"
    specs = agents()
    if backend == "local":
        return await Runtime.start(store=url, backend="local", agents=specs, idle_timeout=IDLE_TIMEOUT)
    # Create the runtime's shared host ourselves, from the subclass, under the name (and namespace)
    # start_ray_client derives from the store URL, with its options; Runtime.start then finds it
    # (get_if_exists) and uses it as it would its own.
    store = await open_store(url)
    try:
        assert isinstance(store, TreeStore)
        host_url = store_url_for_hosts(store, url)
    finally:
        await store.close()
    namespace = deployment_namespace(host_url)
    remote: Any = ray.remote
    remote(BenchHost).options(
        name=shared_host_name(PREFIX, 0),
        namespace=namespace,
        lifetime="detached",
        get_if_exists=True,
        max_restarts=-1,
        max_task_retries=0,
        max_concurrency=1000,
        num_cpus=0,
    ).remote(host_url, specs, index=0, hosts=1, idle_timeout=IDLE_TIMEOUT)
    rt = await Runtime.start(
        store=url, backend="ray", agents=specs, hosts=1, idle_timeout=IDLE_TIMEOUT, keep_hosts=False, **options
    )
    try:
        await host_of(rt).stamps.remote([])
    except Exception as exc:
        await rt.close()
        raise RuntimeError("the runtime did not pick up the benchmark's host (did the host naming change?)") from exc
    return rt


def client_of(rt: Runtime) -> RayHostClient:
    """The runtime's Ray client."""
    client = rt.host
    assert isinstance(client, RayHostClient), "a Ray part runs on backend='ray'"
    return client


def host_of(rt: Runtime) -> Any:
    """The actor handle of the runtime's only shared host (looked up by its name, as the supervisor does)."""
    client = client_of(rt)
    return ray.get_actor(shared_host_name(client.prefix, 0), namespace=client.namespace)


def create_spec() -> NewSession:
    """What ``RayHostClient.create_session`` hands on for a root session."""
    return NewSession(agent=AGENT)


async def bulk_sessions(rt: Runtime, n: int) -> list[SessionHandle]:
    """``n`` sessions created through the host's batch method, as handles."""
    host = host_of(rt)
    ids: list[str] = []
    for start in range(0, n, BATCH):
        records = await host.create_sessions.remote([create_spec() for _ in range(min(BATCH, n - start))])
        ids += [r.session_id for r in records]
    return [await rt.session(sid) for sid in ids]


async def gather_chunked(work: Sequence[Callable[[], Awaitable[Any]]], chunk: int = 500) -> list[Any]:
    """Await ``work`` ``chunk`` calls at a time (unbounded pipelining costs the caller memory)."""
    out: list[Any] = []
    for start in range(0, len(work), chunk):
        out += await asyncio.gather(*(w() for w in work[start : start + chunk]))
    return out


async def activate(handles: Sequence[SessionHandle]) -> None:
    """Bring every session's actor into its host's memory (``metadata()`` activates it)."""
    await gather_chunked([h.metadata for h in handles], 1_000)


async def wait_no_open_turns(rt: Runtime, every: float = 0.02) -> None:
    """Until no turn is open anywhere."""
    while True:  # polling: the turns run in another process; the store is the one place that sees them all
        if not await rt.store.list_open_turns():
            return
        await asyncio.sleep(every)


def message(text: str) -> ModelMessage:
    """A user's message, as a handle builds it."""
    return to_model_message(text, Principal.user())[0]


async def send_many(rt: Runtime, handles: Sequence[SessionHandle], turns: int, tag: str) -> int:
    """Queue ``turns`` turns on every session, straight to the host in ``send_many`` batches of 256."""
    items = [
        (h.id, message(f"{tag} {i} {t}"), "message", new_id()) for t in range(turns) for i, h in enumerate(handles)
    ]
    host = host_of(rt)
    await asyncio.gather(*(host.send_many.remote(items[i : i + 256]) for i in range(0, len(items), 256)))
    return len(items)
