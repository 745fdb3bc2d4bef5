"""Sessions: memory per session, session creation rate, many concurrent sessions, one turn's anatomy.

Everything runs on the local backend (``Runtime.start(store="sqlite:///...", agents=...)``), on a
SQLite file in a fresh temporary folder, durability ``normal`` (WAL + ``synchronous=NORMAL``)
unless a figure says ``full``. Each part runs in a fresh interpreter of its own (``--child``), so
one part's heap, caches and resident set do not leak into the next one's figures. Targets: an
idle resident session at most 10 KB with its history cache aside, ~0 passivated, 2,000 sessions
created per second.

1. Memory per idle resident session. N sessions (10,000) each run one short turn, so each has an
   activated ``SessionActor``; memory is read with the history cache kept (as the turn left it)
   and cleared (``drop_cached_history()``, the figure the target is about). tracemalloc's traced
   size after ``gc.collect()``, minus the same reading before the sessions existed, over N, is the
   headline: every Python allocation and nothing else, attributed to the repertory line that asked
   for it. The resident set grows by more (allocator slack, SQLite's page cache) and hardly
   shrinks when objects are freed, so it is read in a separate, untraced interpreter, as growth.
2. Memory per passivated session: ``passivate_idle(0)``, then the same readings.
3. Sessions created per second: ``rt.create_session`` in a loop and in ``asyncio.gather`` batches
   of 100, then the same work one layer down at a time (the host, the store with records built
   beforehand, the record alone), and the loop with durability full.
4. Concurrent sessions: N sessions (100, 1,000, 10,000) each run 5 turns one after another, all N
   launched at once, against ``ScriptedModel`` with a 200 ms delay. A turn's overhead is its wall
   time minus the 200 ms, split by a model that stamps its requests into before the model, the
   model's sleep running late (event loop lag) and after the model; a task sleeping 10 ms in a
   loop measures the loop's lag throughout. N is halved after a run past its time limit; the
   largest N that finished is reported.
5. Where the time goes: one concurrent run under cProfile (event loop thread only), grouped by
   layer; and one turn on an idle loop: its time sequentially, its SQL statements and write
   transactions (trace callbacks), its store calls and thread hops (counting wrappers), a turn
   with durability full, and how a turn's cost grows with the turns already in the session.

A floor
that is not a session's: pydantic-core caches up to ~16,000 short strings it parsed (~1.2 MB), so a
few hundred bytes per passivated session can remain in a small run. The model's reply gives
``usage``, so the model keeps no token-estimate memo (memory of the model, not of the sessions).

``python -m benchmarks.sessions [--quick]``.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import cProfile
import gc
import inspect
import json
import os
import resource
import sys
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psutil  # type: ignore[import-untyped]  # no stubs in the dev install

from benchmarks.harness.children import ChildFailed, run_json
from benchmarks.harness.command import Options, main
from benchmarks.harness.figures import Figures, Target
from benchmarks.harness.gctime import GcTimer
from benchmarks.harness.profiling import Key, by_category, label, short_path, stats_of, top_by_tottime, total_tottime
from benchmarks.harness.sqlcount import SqlCounter
from repertory import Agent
from repertory.core.ids import new_id, now_ms
from repertory.core.messages import ModelMessage
from repertory.core.model import ModelEvent, ModelResponse, ModelSettings, ToolSpec
from repertory.core.tree import Lineage, NewSession, SessionRecord
from repertory.runtime.host import LocalHost
from repertory.storage.sqlite.store import SqliteSessionStore
from repertory.testing import ScriptedModel
from repertory.tree.handle import SessionHandle
from repertory.tree.runtime import Runtime

AGENT = "assistant"
DURABILITY = "normal"
FRAMES = 10
IDLE = "idle: waiting in epoll"
SIZES: dict[str, dict[str, Any]] = {
    "full": {"memory": 10_000, "warmup": 200, "create": 10_000, "rounds": 3, "full_n": 2_000, "turns": 5,
             "delay": 0.2, "ladder": [100, 1_000, 10_000], "profile": 1_000, "anatomy": (200, 400, 50), "limit": 1800},
    "quick": {"memory": 100, "warmup": 20, "create": 200, "rounds": 1, "full_n": 20, "turns": 2, "delay": 0.02,
              "ladder": [20], "profile": 20, "anatomy": (10, 20, 5), "limit": 600},
}  # fmt: skip
STATES = {
    "kept": "resident, history cache kept",
    "cleared": "resident, history cache cleared",
    "passivated": "passivated",
}


def _reply(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """Every request gets the same short final reply, with ``usage`` (no token estimate, no memo)."""
    return {"text": "ok", "usage": {"input_tokens": 8, "output_tokens": 1}}


class StampedModel(ScriptedModel):
    """``ScriptedModel`` that records when each request starts and its reply is ready, by its last message."""

    def __init__(self, delay: float) -> None:
        super().__init__(_reply, delay=delay)
        self.started: dict[str, float] = {}
        self.replied: dict[str, float] = {}

    async def request(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        """The scripted reply, stamped at the start and when the response is ready."""
        key = messages[-1].text
        self.started[key] = time.perf_counter()
        async for event in super().request(messages, tools, settings):
            if isinstance(event, ModelResponse):
                self.replied[key] = time.perf_counter()
            yield event


async def _runtime(folder: str, name: str, model: ScriptedModel, durability: str = DURABILITY) -> Runtime:
    agent = Agent(name=AGENT, model=model, instructions="Answer in one word.")
    url = f"sqlite:///{os.path.join(folder, name)}?durability={durability}"
    return await Runtime.start(store=url, agents={AGENT: agent}, idle_timeout=3600.0)


def _host(rt: Runtime) -> LocalHost:
    assert isinstance(rt.host, LocalHost)
    return rt.host


def _rss() -> tuple[int, int]:
    """This process's resident set now and at its peak, bytes."""
    return int(psutil.Process().memory_info().rss), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _top(d: dict[str, float], n: int = 12, fmt: str = "{:.1f}") -> str:
    """The ``n`` largest entries of ``d`` as one line (a fact)."""
    return ", ".join(f"{k} {fmt.format(v)}" for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:n]) or "-"


# -- parts 1-2: memory ---------------------------------------------------------------------------


def _attribute(snap: tracemalloc.Snapshot, base: tracemalloc.Snapshot, n: int) -> tuple[dict[str, float], ...]:
    """Bytes per session grown since ``base``, by the innermost repertory line (and with the allocating line)."""
    by_line: dict[str, float] = collections.defaultdict(float)
    by_pair: dict[str, float] = collections.defaultdict(float)
    for stat in snap.compare_to(base, "traceback"):
        frames = list(stat.traceback)  # oldest first
        alloc = f"{short_path(frames[-1].filename)}:{frames[-1].lineno}"
        owner = next((f"{short_path(f.filename)}:{f.lineno}" for f in reversed(frames)
                      if "/repertory/" in f.filename.replace("\\", "/")), alloc)  # fmt: skip
        by_line[owner] += stat.size_diff / n
        by_pair[f"{owner} <- {alloc}"] += stat.size_diff / n
    return dict(by_line), dict(by_pair)


async def _memory(folder: str, n: int, traced: bool, warmup: int) -> dict[str, Any]:
    """``n`` sessions (one turn each), the process read before, kept, cleared and passivated."""
    rt = await _runtime(folder, "memory.db", ScriptedModel(_reply))
    host = _host(rt)
    readings: dict[str, dict[str, Any]] = {}
    census: dict[str, collections.Counter[str]] = {}
    base_path = os.path.join(folder, "baseline.snapshot")
    try:
        for _ in range(warmup):  # imports, validators, statement caches, readers: not billed to the sessions
            await (await rt.create_session(agent=AGENT)).run("warm-up")
        host.passivate_idle(0)
        if traced:
            tracemalloc.start(FRAMES)

        def read(state: str) -> None:
            gc.collect()  # the traced size is read while no snapshot is alive: a snapshot is traced memory
            rss, peak = _rss()
            readings[state] = {"resident": host.resident, "rss": rss, "peak": peak}
            if traced:
                readings[state]["traced"] = tracemalloc.get_traced_memory()[0]
                snap = tracemalloc.take_snapshot().filter_traces(
                    [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen *>")]
                )
                if state == "baseline":
                    snap.dump(base_path)
                else:
                    readings[state]["lines"], readings[state]["pairs"] = _attribute(
                        snap, tracemalloc.Snapshot.load(base_path), n
                    )
                del snap
                census[state] = collections.Counter(type(o).__name__ for o in gc.get_objects())

        read("baseline")
        t0 = time.perf_counter()
        ids = []
        for i in range(n):
            h = await rt.create_session(agent=AGENT)
            await h.run(f"hello {i}")
            ids.append(h.id)
        fill = time.perf_counter() - t0
        del h
        read("kept")
        cached = sum([(await host.actor(sid)).session.drop_cached_history() for sid in ids])
        del ids
        read("cleared")
        passivated = host.passivate_idle(0)
        read("passivated")
        tracemalloc.stop()
    finally:
        await rt.close()
    for state in census.keys() - {"baseline"}:
        readings[state]["objects"] = {k: v / n for k, v in (census[state] - census["baseline"]).most_common(20)}
    return {"fill": fill, "cached": cached, "passivated": passivated, "readings": readings}


def _memory_figures(figures: Figures, run: str, n: int, got: dict[str, Any]) -> None:
    r = got["readings"]
    figures.time(f"creating {n:,} sessions, a turn each ({run} run)", got["fill"])
    figures.size(f"RSS before the sessions ({run} run)", r["baseline"]["rss"])
    figures.size(f"peak RSS ({run} run)", r["passivated"]["peak"])
    figures.count(f"sessions with a history cache after their turn ({run} run)", got["cached"])
    figures.count(f"sessions passivated by passivate_idle(0) ({run} run)", got["passivated"])
    for state, title in STATES.items():
        figures.count(f"resident actors, {title} ({run} run)", r[state]["resident"])
        figures.size(f"RSS growth per session, {title} ({run} run)", (r[state]["rss"] - r["baseline"]["rss"]) / n)
        if "traced" not in r[state]:
            continue
        per = (r[state]["traced"] - r["baseline"]["traced"]) / n
        name = {"kept": f"memory per resident session, history cache kept ({n:,} sessions)",
                "cleared": f"memory per idle resident session, history cache aside ({n:,} sessions)",
                "passivated": f"memory per passivated session ({n:,} sessions)"}[state]  # fmt: skip
        figures.size(name, per, target=Target(10 * 1024) if state == "cleared" else None, note="tracemalloc")
        figures.fact(f"bytes per session by repertory line, {title}", _top(r[state]["lines"], fmt="{:,.0f}"))
        figures.fact(f"bytes per session by repertory line and allocator, {title}",
                     _top(r[state]["pairs"], 8, "{:,.0f}"))  # fmt: skip
        figures.fact(f"GC-tracked objects per session, {title}", _top(r[state]["objects"]))


# -- part 3: creation ----------------------------------------------------------------------------


def _records(count: int) -> list[SessionRecord]:
    at = now_ms()
    return [SessionRecord(session_id=(sid := new_id()), agent=AGENT, lineage=Lineage(kind="root"), root_id=sid,
                          created_at=at, updated_at=at) for _ in range(count)]  # fmt: skip


async def _rate(work: Callable[[int], Awaitable[object]], count: int) -> float:
    gc.collect()
    t0 = time.perf_counter()
    await work(count)
    return count / (time.perf_counter() - t0)


async def _creation(folder: str, n: int, rounds: int, full_n: int) -> dict[str, Any]:
    """Creation rates one layer at a time with durability normal, then the runtime loop with durability full."""
    rt = await _runtime(folder, "create.db", ScriptedModel(_reply))
    host = _host(rt)

    async def loop(count: int) -> None:
        for _ in range(count):
            await rt.create_session(agent=AGENT)

    async def gathered(count: int) -> None:
        for _ in range(count // 100):
            await asyncio.gather(*(rt.create_session(agent=AGENT) for _ in range(100)))

    async def host_only(count: int) -> None:
        for _ in range(count):
            await host.create_session(NewSession(agent=AGENT))

    async def store_only(count: int) -> None:
        for record in prepared:
            await rt.store.create_session(record)

    variants = {"runtime loop": loop, "runtime, gather of 100": gathered, "host.create_session": host_only,
                "store.create_session, records built beforehand": store_only}  # fmt: skip
    rates: dict[str, list[float]] = {name: [] for name in variants}
    record_s: list[float] = []
    try:
        await loop(500)  # warm-up
        for _ in range(rounds):
            prepared = _records(n)
            for name, work in variants.items():
                rates[name].append(await _rate(work, n))
            t0 = time.perf_counter()
            _records(n)
            record_s.append((time.perf_counter() - t0) / n)
    finally:
        await rt.close()
    rt = await _runtime(folder, "create_full.db", ScriptedModel(_reply), durability="full")
    try:
        await loop(100)
        rates["runtime loop, durability full"] = [await _rate(loop, full_n) for _ in range(rounds)]
    finally:
        await rt.close()
    return {"rates": rates, "record": record_s}


# -- part 4: concurrent sessions ------------------------------------------------------------------


def _layer(key: Key) -> str:
    """The layer a profiled function belongs to."""
    filename, _, name = key
    if filename == "~":
        for part, layer in (
            ("select.epoll", IDLE),
            ("sqlite3", "SQLite (C)"),
            ("pydantic_core", "pydantic (C)"),
            ("_thread", "thread hops (executor, locks)"),
            ("acquire", "thread hops (executor, locks)"),
        ):
            if part in name:
                return layer
        return "other builtins"
    path = filename.replace("\\", "/")
    base = os.path.basename(path)
    if "/repertory/tree/" in path or ("/repertory/runtime/" in path and base in ("actor.py", "host.py", "events.py")):
        return "actor layer (actor/host/handle/events)"
    for part, layer in (("/repertory/storage/", "store (Python)"), ("/repertory/testing/", "ScriptedModel"),
                        ("/repertory/runtime/", "engine (session/_loop/history/...)"),
                        ("/repertory/core/", "engine (session/_loop/history/...)"), ("/pydantic/", "pydantic (Python)"),
                        ("/asyncio/threads.py", "thread hops (executor, locks)"),
                        ("/concurrent/futures/", "thread hops (executor, locks)"), ("/asyncio/", "asyncio machinery"),
                        ("/json/", "json (stdlib)"), ("/benchmarks/", "benchmark harness")):  # fmt: skip
        if part in path:
            return layer
    if base in ("threading.py", "queue.py"):
        return "thread hops (executor, locks)"
    return "copy (deep copies of RunState)" if base == "copy.py" else "other Python"


KEY_FUNCTIONS = (
    "run", "send", "result", "actor", "_run_turn", "_finish", "start", "_start", "commit", "request",
    "supersede_open_runs", "list_runs", "to_thread", "wait_turn", "append", "_work",
)  # fmt: skip


def _profile(profiler: cProfile.Profile, turns: int) -> dict[str, Any]:
    """The event loop thread's profile per turn: by layer, top functions, store calls, key functions."""
    stats = stats_of(profiler)
    groups = by_category(stats, _layer)
    busy = total_tottime(stats) - groups.get(IDLE, 0.0)
    return {
        "busy": busy / turns,
        "layers": {k: v / turns for k, v in groups.items()},
        "top": {f"{label(k)[-70:]} ({v[1] / turns:.1f} calls)": v[2] / turns * 1e6
                for k, v in top_by_tottime(stats, 15)},
        "store": {k[2]: v[1] / turns for k, v in stats.items()
                  if "/repertory/storage/" in k[0] and not k[2].startswith("_") and k[2] != "<lambda>"},
        "key": {label(k): v[3] / turns * 1e6 for k, v in stats.items()
                if k[2] in KEY_FUNCTIONS and ("/repertory/" in k[0] or "asyncio/threads.py" in k[0])},
    }  # fmt: skip


async def _concurrent(folder: str, n: int, turns: int, delay: float, profile: bool) -> dict[str, Any]:
    """``n`` sessions x ``turns`` turns at once; every turn's overhead and where it went."""
    model = StampedModel(delay)
    rt = await _runtime(folder, f"concurrent_{n}.db", model)
    host = _host(rt)
    try:
        for _ in range(20):  # warm-up outside the figures
            await (await rt.create_session(agent=AGENT)).run("warm-up")
        host.passivate_idle(0)
        t0 = time.perf_counter()
        handles = [await rt.create_session(agent=AGENT) for _ in range(n)]
        create_s = time.perf_counter() - t0
        spans: list[tuple[str, int, float, float]] = []
        failures: collections.Counter[str] = collections.Counter()

        async def one(i: int, h: SessionHandle) -> None:
            for t in range(turns):
                key, start = f"session {i} turn {t}", time.perf_counter()
                try:
                    result = await h.run(key)
                except Exception as exc:  # measured, not asserted: count and go on
                    failures[type(exc).__name__] += 1
                    continue
                if result.status != "done" or result.text != "ok":
                    failures[f"status {result.status}"] += 1
                spans.append((key, t, start, time.perf_counter()))

        lags: list[float] = []
        progress: list[tuple[float, int]] = []
        activations0 = host.activations

        async def sampler() -> None:  # the loop's lag every 10 ms, and the activations over time
            while True:
                t = time.perf_counter()
                await asyncio.sleep(0.01)
                lags.append(time.perf_counter() - t - 0.01)
                progress.append((time.perf_counter(), host.activations))

        lagging = asyncio.get_running_loop().create_task(sampler())
        profiler = cProfile.Profile() if profile else None
        gc.collect()
        with GcTimer() as gc_time:
            cpu0, wall0 = time.process_time(), time.perf_counter()
            if profiler is not None:
                profiler.enable()
            await asyncio.gather(*(one(i, h) for i, h in enumerate(handles)))
            if profiler is not None:
                profiler.disable()
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        lagging.cancel()
        await asyncio.gather(lagging, return_exceptions=True)
        rss, peak = _rss()
        resident, activations = host.resident, host.activations - activations0
    finally:
        await rt.close()
    done = max(len(spans), 1)
    return {
        "create": create_s, "wall": wall, "cpu": cpu, "done": len(spans), "failures": dict(failures),
        "gc": gc_time.seconds, "gc_collections": gc_time.by_generation, "rss": rss, "peak": peak,
        "resident": resident, "activations": activations, "lag": lags,
        "overhead": [e - s - delay for _, _, s, e in spans],
        "first": [e - s - delay for _, t, s, e in spans if t == 0],
        "later": [e - s - delay for _, t, s, e in spans if t > 0],
        "before": [model.started[k] - s for k, _, s, _ in spans],
        "late": [model.replied[k] - model.started[k] - delay for k, *_ in spans],
        "after": [e - model.replied[k] for k, _, _, e in spans],
        "activated": {f"{q:.0%}": next((t - wall0 for t, c in progress if c >= activations0 + q * n), None)
                      for q in (0.1, 0.5, 0.9, 1.0)},
        "profile": _profile(profiler, done) if profiler is not None else None,
    }  # fmt: skip


def _concurrent_figures(figures: Figures, n: int, turns: int, delay: float, got: dict[str, Any]) -> None:
    at = f"{n:,} sessions x {turns} turns, {delay * 1000:.0f} ms model"
    done = max(got["done"], 1)
    figures.value(f"{at}, one process", got["done"] / got["wall"], "turns/s",
                  note=f"ideal wall {turns * delay:g} s")  # fmt: skip
    figures.time(f"{at}: wall", got["wall"])
    figures.time(f"{at}: creating the sessions", got["create"])
    for key, what in (("overhead", "overhead per turn (wall - model delay)"), ("first", "overhead, first turn"),
                      ("later", "overhead, later turns"), ("before", "before the model"),
                      ("late", "the model's sleep running late"), ("after", "after the model"),
                      ("lag", "event loop lag (a 10 ms sleep's lateness)")):  # fmt: skip
        if got[key]:
            figures.time(f"{at}: {what}", got[key])
    figures.time(f"{at}: process CPU", got["cpu"])
    figures.time(f"{at}: CPU per turn", got["cpu"] / done)
    figures.value(f"{at}: CPU utilisation", got["cpu"] / got["wall"], "cores")
    figures.time(
        f"{at}: cyclic GC per turn", got["gc"] / done, note=f"collections by generation {got['gc_collections']}"
    )
    figures.size(f"{at}: RSS at the end", got["rss"])
    figures.size(f"{at}: peak RSS", got["peak"])
    figures.count(f"{at}: turns done", got["done"])
    figures.count(f"{at}: failures", sum(got["failures"].values()))
    if got["failures"]:
        figures.fact(f"{at}: failures", json.dumps(got["failures"]))
    figures.count(f"{at}: resident actors at the end", got["resident"])
    figures.count(f"{at}: activations", got["activations"])
    for share, seconds in got["activated"].items():
        if seconds is not None:
            figures.time(f"{at}: {share} of the sessions activated after", seconds)


# -- part 5: one turn's anatomy -------------------------------------------------------------------


class StoreProbe:
    """Counts and times the store's public coroutine calls, and the hops to a worker thread inside them."""

    def __init__(self, store: SqliteSessionStore) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self.spent: dict[str, float] = collections.defaultdict(float)
        self.current: contextvars.ContextVar[str] = contextvars.ContextVar("store_call", default="(outside the store)")
        for name in dir(type(store)):
            if not name.startswith("_") and inspect.iscoroutinefunction(getattr(type(store), name, None)):
                setattr(store, name, self._counted(name, getattr(store, name)))

    def _add(self, key: str, started: float) -> None:
        self.calls[key] += 1
        self.spent[key] += time.perf_counter() - started

    def _counted(self, name: str, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            token, t0 = self.current.set(name), time.perf_counter()
            try:
                return await method(*args, **kwargs)
            finally:
                self._add(name, t0)
                self.current.reset(token)

        return wrapper

    @contextmanager
    def hops(self) -> Iterator[None]:
        """Count ``asyncio.to_thread`` calls (the store's hops to a reader thread) while inside."""
        original = asyncio.to_thread

        async def to_thread(func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
            key, t0 = f"thread hop: {self.current.get()}", time.perf_counter()
            try:
                return await original(func, *args, **kwargs)
            finally:
                self._add(key, t0)

        asyncio.to_thread = to_thread
        try:
            yield
        finally:
            asyncio.to_thread = original

    def per_turn(self, turns: int) -> dict[str, Any]:
        """Calls and wall microseconds of each store call and hop, per turn; then cleared."""
        out = {"calls": {k: v / turns for k, v in self.calls.items()},
               "us": {k: v / turns * 1e6 for k, v in self.spent.items()}}  # fmt: skip
        self.calls.clear()
        self.spent.clear()
        return out


async def _timed_turns(handles: list[SessionHandle], turns: int, prefix: str) -> list[tuple[str, int, float, float]]:
    spans = []
    for t in range(turns):
        for i, h in enumerate(handles):
            key, start = f"{prefix} {i} turn {t}", time.perf_counter()
            await h.run(key)
            spans.append((key, t, start, time.perf_counter()))
    return spans


async def _anatomy(folder: str, sessions: int, long_turns: int, full_sessions: int) -> dict[str, Any]:
    """Sequential turns, one turn's anatomy (later and activating), durability full, growth with turns."""
    model = StampedModel(0.0)
    rt = await _runtime(folder, "anatomy.db", model)
    out: dict[str, Any] = {}
    try:
        for _ in range(20):
            await (await rt.create_session(agent=AGENT)).run("warm-up")
        _host(rt).passivate_idle(0)
        handles = [await rt.create_session(agent=AGENT) for _ in range(sessions)]
        gc.collect()
        spans = await _timed_turns(handles, 5, "seq")
        out["first"] = [e - s for _, t, s, e in spans if t == 0]
        out["later"] = [e - s for _, t, s, e in spans if t > 0]
        out["before"] = [model.started[k] - s for k, t, s, _ in spans if t > 0]
        out["after"] = [e - model.replied[k] for k, t, _, e in spans if t > 0]
        store = rt.store
        assert isinstance(store, SqliteSessionStore)
        probe = [await rt.create_session(agent=AGENT) for _ in range(20)]
        for h in probe:
            await h.run("first turn, activates the session")
        counter = StoreProbe(store)
        for kind, prompt in (("active", "a later turn on an active session"), ("activating", "a turn that activates")):
            if kind == "activating":
                _host(rt).passivate_idle(0)
            sql = SqlCounter()
            with sql.tracing(store) as readers, counter.hops():
                for h in probe:
                    await h.run(prompt)
            statements, transactions = sql.per_turn(len(probe))
            out[kind] = {**counter.per_turn(len(probe)), "sql": statements, "transactions": transactions}
            out["readers"] = out.get("readers", readers)
    finally:
        await rt.close()
    rt = await _runtime(folder, "anatomy_full.db", StampedModel(0.0), durability="full")
    try:  # every commit synced: a turn's write transactions each cost a sync
        spans = await _timed_turns([await rt.create_session(agent=AGENT) for _ in range(full_sessions)], 3, "full")
        out["full"] = [e - s for _, t, s, e in spans if t > 0]
    finally:
        await rt.close()
    rt = await _runtime(folder, "long.db", StampedModel(0.0))
    try:  # a turn's cost as one session grows
        h = await rt.create_session(agent=AGENT)
        gc.collect()
        times = [e - s for _, _, s, e in await _timed_turns([h], long_turns, "long")]
        t0 = time.perf_counter()
        out["runs"] = len(await rt.store.list_runs(h.id))
        out["list_runs"] = time.perf_counter() - t0
        out["growth"] = {f"turns {a + 1}-{a + 10}": times[a : a + 10]
                         for a in sorted({0, long_turns // 4, long_turns // 2, long_turns - 10})}  # fmt: skip
    finally:
        await rt.close()
    return out


def _anatomy_figures(figures: Figures, got: dict[str, Any]) -> None:
    idle = "one turn on an idle loop (sequential, no model delay)"
    figures.time(f"{idle}: first turn", got["first"])
    figures.time(f"{idle}: later turns", got["later"])
    figures.time(f"{idle}: later turns, before the model", got["before"])
    figures.time(f"{idle}: later turns, after the model", got["after"])
    figures.time(f"{idle}: later turns, durability full", got["full"])
    figures.count("reader connections", got["readers"])
    for kind, title in (("active", "a later turn on an active session"), ("activating", "a turn that activates")):
        a = got[kind]
        figures.value(f"{title}: write transactions", a["transactions"], "per turn")
        figures.value(f"{title}: SQL statements", sum(a["sql"].values()), "per turn")
        figures.value(f"{title}: store calls", sum(v for k, v in a["calls"].items() if ":" not in k), "per turn")
        figures.fact(f"{title}: SQL statements per turn", _top(a["sql"], 20, "{:g}"))
        figures.fact(f"{title}: store calls per turn", _top(a["calls"], 20, "{:g}"))
        figures.fact(f"{title}: store wall us per turn (idle loop)", _top(a["us"], 20, "{:.0f}"))
    for window, times in got["growth"].items():
        figures.time(f"a turn as one session grows, {window}", times)
    figures.time(f"list_runs of that session at the end ({got['runs']} runs)", got["list_runs"])


# -- the parent -----------------------------------------------------------------------------------


async def _part(spec: dict[str, Any], folder: str) -> dict[str, Any]:
    part = spec.pop("part")
    parts: dict[str, Callable[..., Awaitable[dict[str, Any]]]] = {
        "memory": _memory, "create": _creation, "concurrent": _concurrent, "anatomy": _anatomy
    }  # fmt: skip
    work = parts[part]
    result: dict[str, Any] = await work(folder, **spec)
    return result


def _child(spec: dict[str, Any], timeout: float) -> dict[str, Any] | str:
    """One part in a fresh interpreter: its figures, or why it did not finish."""
    print(f"  {spec}", file=sys.stderr, flush=True)
    try:
        got, _ = run_json("benchmarks.sessions", ["--child", json.dumps(spec)], timeout)
    except ChildFailed as exc:
        return str(exc)
    return dict(got)


def scenario(figures: Figures, options: Options) -> None:
    """Every part, each in its own interpreter; a part that did not finish fails the run (a ladder rung aside)."""
    s = SIZES[options.mode]
    figures.fact("store", f"SQLite file (WAL), fresh temporary folder per part, durability {DURABILITY} "
                 "unless a figure says full; the local backend")  # fmt: skip
    unfinished: list[str] = []
    for run, traced in (("untraced", False), ("tracemalloc", True)):
        got = _child({"part": "memory", "n": s["memory"], "traced": traced, "warmup": s["warmup"]}, s["limit"] * 2)
        if isinstance(got, str):
            unfinished.append(got)
        else:
            _memory_figures(figures, run, s["memory"], got)
    got = _child({"part": "create", "n": s["create"], "rounds": s["rounds"], "full_n": s["full_n"]}, s["limit"])
    if isinstance(got, dict):
        for name, rates in got["rates"].items():
            figures.value(f"sessions created per second, {name}", rates, "sessions/s",
                          target=Target(2_000, at_most=False) if name == "runtime loop" else None)  # fmt: skip
        figures.time("building a SessionRecord alone", got["record"])
    else:
        unfinished.append(got)
    sessions, long_turns, full_sessions = s["anatomy"]
    got = _child({"part": "anatomy", "sessions": sessions, "long_turns": long_turns, "full_sessions": full_sessions},
                 s["limit"])  # fmt: skip
    if isinstance(got, str):
        unfinished.append(got)
    else:
        _anatomy_figures(figures, got)
    finished: list[int] = []
    for n in s["ladder"]:
        while True:
            got = _child({"part": "concurrent", "n": n, "turns": s["turns"], "delay": s["delay"], "profile": False},
                         s["limit"])  # fmt: skip
            if isinstance(got, dict):
                _concurrent_figures(figures, n, s["turns"], s["delay"], got)
                finished.append(n)
                break
            figures.fact(f"{n:,} concurrent sessions", f"did not finish: {got[:300]}")
            if n // 2 <= s["ladder"][0] or n // 2 in finished:
                break
            n //= 2
    figures.count("largest N of concurrent sessions that finished", max(finished, default=0))
    n = s["profile"]
    got = _child({"part": "concurrent", "n": n, "turns": s["turns"], "delay": s["delay"], "profile": True}, s["limit"])
    if isinstance(got, dict) and got["profile"] is not None:
        p, at = got["profile"], f"cProfile, {n:,} concurrent sessions x {s['turns']} turns"
        figures.value(f"{at}: turns/s under the profiler", got["done"] / got["wall"], "turns/s")
        figures.time(f"{at}: busy per turn", p["busy"], note="event loop thread; profiler overhead included")
        for layer, seconds in p["layers"].items():
            figures.time(f"{at}: {layer}, per turn", seconds)
        figures.fact(f"{at}: top functions by self time, us per turn", _top(p["top"], 15, "{:.1f}"))
        figures.fact(f"{at}: store calls per turn", _top(p["store"], 20, "{:.1f}"))
        figures.fact(f"{at}: cumulative us per turn of key functions", _top(p["key"], 20, "{:.0f}"))
    elif isinstance(got, str):
        unfinished.append(got)
    if unfinished:
        raise RuntimeError(f"{len(unfinished)} part(s) did not finish: {unfinished[0][:500]}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:  # --child SPEC --result PATH
        with tempfile.TemporaryDirectory(prefix="repertory-sessions-db-") as work:
            out = asyncio.run(_part(json.loads(sys.argv[2]), work))
        with open(sys.argv[4], "w") as f:
            json.dump(out, f)
    else:
        main("sessions", __doc__, scenario=scenario)
