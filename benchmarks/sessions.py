"""Session benchmark: memory per session, session creation rate, and many concurrent sessions.

Run ``python -m benchmarks.sessions [--quick]``. It prints a table and writes
``benchmarks/results/sessions.json`` with the machine, the durability of every figure, the targets
and every figure measured. Nothing here asserts a speed or a size (DESIGN.md, rule 8).

Everything runs on the local backend (``Runtime.start(store="sqlite:///...", agents=...)``), on a
SQLite file in a fresh temporary folder, durability ``normal`` (WAL + ``synchronous=NORMAL``)
unless a figure says ``full``. Each part runs in a fresh interpreter of its own, so one part's
heap, caches and resident set do not leak into the next one's figures.

1. Memory per idle resident session. N sessions (10,000; ``--quick`` 1,000) are created and
   each runs one short turn, so each has an activated ``SessionActor``; memory is then read with
   the session's history cache kept (``actor.session._history`` as the turn left it) and cleared
   (``actor.session._history = None``, the figure the target is about). tracemalloc's traced
   size after ``gc.collect()``, minus the same reading taken before the sessions existed, over N,
   is the headline: it counts every Python allocation and nothing else. The resident set (RSS)
   grows by more (allocator slack, SQLite's page cache) and hardly shrinks when objects are freed,
   so it is read in a separate, untraced interpreter and reported as growth, not as a cost.
2. Memory per passivated session: ``rt.host.passivate_idle(0)``, then the same readings and
   ``rt.host.resident``.
3. Sessions created per second: ``rt.create_session`` in a loop and in ``asyncio.gather``
   batches of 100, then the same work one layer down at a time (the host, the store, the record
   alone) so the figure can be split.
4. Concurrent sessions: N sessions (100, 1,000, 10,000; ``--quick`` 100 and 500) each run 5
   turns, ``await handle.run(...)`` one after another, all N launched at once with
   ``asyncio.gather``, against ``ScriptedModel`` with a 200 ms delay. Per-turn overhead is the
   turn's wall time minus the 200 ms; the model is a ``ScriptedModel`` subclass that only stamps
   when its request starts and when its reply is ready, which splits the overhead into before
   the model, the model's sleep running late (event loop lag) and after the model. A task that
   sleeps 10 ms in a loop measures the event loop's lag throughout. The largest N that finishes
   within its time limit is reported; a run that does not finish is reported as such.
5. Where the time goes: one concurrent run under cProfile (event loop thread only: worker threads
   are not profiled), grouped by layer, and an "anatomy" of one turn run sequentially on an idle
   loop: its SQL statements and write transactions (SQLite trace callbacks on the store's
   connections), its store calls and thread hops (counting wrappers on the store instance), and
   how a turn's cost grows with the turns already in the session.

A floor that is not a session's: pydantic-core keeps a process-wide cache of short strings it
parsed from JSON (ids, statuses), up to ~16,000 of them (~1.2 MB here, measured), so after
passivation a few hundred bytes per session can remain in a small run, bounded in total.

The step function returns ``{"text": "ok", "usage": {...}}``: with ``usage`` given the model does
not estimate tokens, which would scan the conversation and keep a memo of up to 4,096
conversations in the model object, memory that belongs to the model, not to the sessions.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import gc
import inspect
import json
import os
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks._report import machine_info
from benchmarks._suite import dist_ms
from repertory import Agent
from repertory.core.messages import ModelMessage
from repertory.core.model import ModelEvent, ModelResponse, ModelSettings, ToolSpec
from repertory.core.tree import Lineage, NewSession, SessionRecord
from repertory.testing import ScriptedModel
from repertory.tree.runtime import Runtime

RESULTS = Path(__file__).resolve().parent / "results" / "sessions.json"
ROOT = Path(__file__).resolve().parent.parent

TARGET_IDLE_BYTES = 10 * 1024
TARGET_CREATE_PER_S = 2_000
DELAY_S = 0.2
TURNS = 5
DURABILITY = "normal"
AGENT = "assistant"
WARMUP_SESSIONS = 200
BATCH = 100


# -- shared pieces ------------------------------------------------------------------------------------


def _reply(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """Every request gets the same short final reply, so the script never runs out."""
    return {"text": "ok", "usage": {"input_tokens": 8, "output_tokens": 1}}


class StampedModel(ScriptedModel):
    """``ScriptedModel`` that records when each request starts and when its reply is ready.

    A request is named by its last message (the turn's prompt, unique per turn in part 4).
    """

    def __init__(self, delay: float) -> None:
        super().__init__(_reply, delay=delay)
        self.started: dict[str, float] = {}
        self.replied: dict[str, float] = {}

    async def request(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        key = messages[-1].text
        self.started[key] = time.perf_counter()
        async for event in super().request(messages, tools, settings):
            if isinstance(event, ModelResponse):
                self.replied[key] = time.perf_counter()
            yield event


def _agent(model: ScriptedModel) -> Agent:
    return Agent(name=AGENT, model=model, instructions="Answer in one word.")


async def _runtime(
    folder: str, name: str, model: ScriptedModel, durability: str = DURABILITY, idle_timeout: float = 3600.0
) -> Runtime:
    path = os.path.join(folder, name)
    return await Runtime.start(
        store=f"sqlite:///{path}?durability={durability}", agents={AGENT: _agent(model)}, idle_timeout=idle_timeout
    )


def _proc_status() -> dict[str, int]:
    """VmRSS and VmHWM (peak) of this process, in bytes."""
    out: dict[str, int] = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out


def _where(filename: str) -> str:
    """A traceback file name shortened to the part a reader recognises."""
    for marker in ("/site-packages/", "/lib/python3"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    try:
        return str(Path(filename).resolve().relative_to(ROOT))
    except ValueError:
        return filename


# -- part 1 and 2: memory -------------------------------------------------------------------------------


def _census() -> collections.Counter[str]:
    """GC-tracked objects by type name (strings and ints are not tracked, so this is a partial view)."""
    return collections.Counter(type(o).__name__ for o in gc.get_objects())


def _owner(traceback: tracemalloc.Traceback) -> tuple[str, str]:
    """(the innermost repertory frame, the frame that allocated) of a traceback.

    Most of a session's memory is allocated inside pydantic, copy or asyncio; the repertory line
    that asked for it is the one a fix would change.
    """
    frames = list(traceback)  # oldest first
    alloc = f"{_where(frames[-1].filename)}:{frames[-1].lineno}"
    for frame in reversed(frames):
        if "/repertory/" in frame.filename.replace("\\", "/"):
            return f"{_where(frame.filename)}:{frame.lineno}", alloc
    return alloc, alloc


def _attribute(snap: tracemalloc.Snapshot, base: tracemalloc.Snapshot, n: int) -> dict[str, Any]:
    """Memory growth since ``base`` by repertory line (and by allocating line), per session."""
    by_owner: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    by_pair: dict[tuple[str, str], list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    for stat in snap.compare_to(base, "traceback"):
        owner, alloc = _owner(stat.traceback)
        for table, key in ((by_owner, owner), (by_pair, (owner, alloc))):
            table[key][0] += stat.size_diff
            table[key][1] += stat.count_diff
    return {
        "by_repertory_line": [
            {"site": k, "bytes_per_session": v[0] / n, "blocks_per_session": v[1] / n}
            for k, v in sorted(by_owner.items(), key=lambda kv: -kv[1][0])[:20]
        ],
        "by_repertory_line_and_allocator": [
            {"site": k[0], "allocated_in": k[1], "bytes_per_session": v[0] / n, "blocks_per_session": v[1] / n}
            for k, v in sorted(by_pair.items(), key=lambda kv: -kv[1][0])[:30]
        ],
    }


_FRAMES = 10


async def _memory(folder: str, n: int, traced: bool, warmup: int = WARMUP_SESSIONS) -> dict[str, Any]:
    model = ScriptedModel(_reply)
    rt = await _runtime(folder, "memory.db", model)
    try:
        # Warm-up: imports, pydantic validators, SQLite statement caches, reader connections and
        # executor threads are made once here, so they are not billed to the measured sessions.
        for _ in range(warmup):
            h = await rt.create_session(agent=AGENT)
            await h.run("warm-up")
        rt.host.passivate_idle(0)
        del h
        gc.collect()

        readings: dict[str, dict[str, Any]] = {}
        attribution: dict[str, dict[str, Any]] = {}
        censuses: dict[str, collections.Counter[str]] = {}
        base_path = os.path.join(folder, "baseline.snapshot")
        if traced:
            tracemalloc.start(_FRAMES)

        def read(label: str) -> None:
            # The traced size is read while no snapshot is alive: a snapshot is itself traced memory.
            gc.collect()
            reading: dict[str, Any] = {"resident": rt.host.resident, **_proc_status()}
            if traced:
                reading["traced_bytes"] = tracemalloc.get_traced_memory()[0]
                snap = tracemalloc.take_snapshot().filter_traces(
                    [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen *>")]
                )
                if label == "baseline":
                    snap.dump(base_path)
                else:
                    attribution[label] = _attribute(snap, tracemalloc.Snapshot.load(base_path), n)
                del snap
                censuses[label] = _census()
            readings[label] = reading

        read("baseline")
        t0 = time.perf_counter()
        ids = []
        for i in range(n):
            h = await rt.create_session(agent=AGENT)
            await h.run(f"hello {i}")
            ids.append(h.id)
        fill_s = time.perf_counter() - t0
        del h
        actors = [rt.host._actors[sid] for sid in ids]  # the host's own actors, to clear their caches
        cached_history = sum(1 for a in actors if a.session._history is not None)
        del ids
        del actors
        read("resident_history_kept")
        for actor in rt.host._actors.values():
            actor.session._history = None
        read("resident_history_cleared")
        passivated = rt.host.passivate_idle(0)
        read("passivated")
        if traced:
            tracemalloc.stop()
    finally:
        await rt.close()

    base = readings["baseline"]
    out: dict[str, Any] = {
        "sessions": n,
        "traced": traced,
        "fill_seconds": fill_s,
        "traceback_frames": _FRAMES if traced else None,
        "sessions_with_history_cache_after_turn": cached_history,
        "passivated_by_passivate_idle_0": passivated,
        "readings": readings,
    }
    states: dict[str, Any] = {}
    for label in ("resident_history_kept", "resident_history_cleared", "passivated"):
        r = readings[label]
        state: dict[str, Any] = {
            "resident": r["resident"],
            "rss_delta_bytes_per_session": (r["VmRSS"] - base["VmRSS"]) / n,
        }
        if traced:
            state["traced_bytes_per_session"] = (r["traced_bytes"] - base["traced_bytes"]) / n
            state.update(attribution[label])
            growth = censuses[label] - censuses["baseline"]
            state["gc_objects_per_session"] = {k: v / n for k, v in growth.most_common(20)}
        states[label] = state
    out["states"] = states
    return out


# -- part 3: creation rate ------------------------------------------------------------------------------


async def _creation(folder: str, n: int, rounds: int, full_n: int) -> dict[str, Any]:
    model = ScriptedModel(_reply)
    out: dict[str, Any] = {"sessions_per_round": n, "rounds": rounds}

    async def rate(work: Callable[[int], Any], count: int) -> float:
        gc.collect()
        t0 = time.perf_counter()
        await work(count)
        return count / (time.perf_counter() - t0)

    rt = await _runtime(folder, "create.db", model)
    try:

        async def loop(count: int) -> None:
            for _ in range(count):
                await rt.create_session(agent=AGENT)

        async def batched(count: int) -> None:
            for _ in range(count // BATCH):
                await asyncio.gather(*(rt.create_session(agent=AGENT) for _ in range(BATCH)))

        async def host_only(count: int) -> None:
            for _ in range(count):
                await rt.host.create_session(NewSession(agent=AGENT))

        from repertory.core.ids import new_id, now_ms

        def records(count: int) -> list[SessionRecord]:
            at = now_ms()
            out = []
            for _ in range(count):
                sid = new_id()
                out.append(
                    SessionRecord(
                        session_id=sid,
                        agent=AGENT,
                        lineage=Lineage(kind="root"),
                        root_id=sid,
                        created_at=at,
                        updated_at=at,
                    )
                )
            return out

        async def store_only(count: int) -> float:
            """Sessions per second of the store alone, records built beforehand."""
            prepared = records(count)
            store = rt.store
            gc.collect()
            t0 = time.perf_counter()
            for record in prepared:
                await store.create_session(record)
            return count / (time.perf_counter() - t0)

        await loop(500)  # warm-up
        variants: dict[str, list[float]] = {"runtime_loop": [], "runtime_gather_100": [], "host_create_session": []}
        store_rates: list[float] = []
        record_us: list[float] = []
        for _ in range(rounds):
            variants["runtime_loop"].append(await rate(loop, n))
            variants["runtime_gather_100"].append(await rate(batched, n))
            variants["host_create_session"].append(await rate(host_only, n))
            store_rates.append(await store_only(n))
            gc.collect()
            t0 = time.perf_counter()
            records(n)
            record_us.append((time.perf_counter() - t0) / n * 1e6)
        summary: dict[str, Any] = {}
        for name, rates in {**variants, "store_create_session_prebuilt_records": store_rates}.items():
            summary[name] = {
                "median_per_s": statistics.median(rates),
                "best_per_s": max(rates),
                "rounds_per_s": rates,
                "median_us_each": 1e6 / statistics.median(rates),
            }
        summary["build_session_record_alone"] = {"median_us_each": statistics.median(record_us)}
        out["normal"] = summary
    finally:
        await rt.close()

    rt = await _runtime(folder, "create_full.db", model, durability="full")
    try:

        async def loop_full(count: int) -> None:
            for _ in range(count):
                await rt.create_session(agent=AGENT)

        await loop_full(100)
        full_rates = [await rate(loop_full, full_n) for _ in range(rounds)]
        out["full"] = {
            "sessions_per_round": full_n,
            "runtime_loop": {
                "median_per_s": statistics.median(full_rates),
                "best_per_s": max(full_rates),
                "rounds_per_s": full_rates,
                "median_us_each": 1e6 / statistics.median(full_rates),
            },
        }
    finally:
        await rt.close()
    return out


# -- part 4: concurrent sessions ------------------------------------------------------------------------


class _GcTimer:
    """A ``gc.callbacks`` entry adding up the time the cyclic collector runs, by generation."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._start
            self.collections[info["generation"]] += 1


async def _lag_sampler(lags: list[float], progress: list[tuple[float, int]], host: Any, interval: float = 0.01) -> None:
    """Event loop lag every ``interval``, and the host's activation count over time."""
    while True:
        t0 = time.perf_counter()
        await asyncio.sleep(interval)
        now = time.perf_counter()
        lags.append(now - t0 - interval)
        progress.append((now, host.activations))


async def _concurrent(folder: str, n: int, turns: int, delay: float, profile: bool) -> dict[str, Any]:
    model = StampedModel(delay)
    rt = await _runtime(folder, f"concurrent_{n}.db", model, idle_timeout=3600.0)
    try:
        # Warm-up outside the figures (imports, validators, reader connections, executor threads).
        for _ in range(20):
            h = await rt.create_session(agent=AGENT)
            await h.run("warm-up")
        rt.host.passivate_idle(0)
        model.started.clear()
        model.replied.clear()

        t0 = time.perf_counter()
        handles = [await rt.create_session(agent=AGENT) for _ in range(n)]
        create_s = time.perf_counter() - t0

        spans: list[tuple[str, int, float, float]] = []
        failures: collections.Counter[str] = collections.Counter()

        async def one(i: int, h: Any) -> None:
            for t in range(turns):
                key = f"session {i} turn {t}"
                start = time.perf_counter()
                try:
                    result = await h.run(key)
                except Exception as exc:  # measured, not asserted: count and go on
                    failures[type(exc).__name__] += 1
                    continue
                end = time.perf_counter()
                if result.status != "done" or result.text != "ok":
                    failures[f"status {result.status}"] += 1
                spans.append((key, t, start, end))

        lags: list[float] = []
        progress: list[tuple[float, int]] = []
        activations0 = rt.host.activations
        sampler = asyncio.get_running_loop().create_task(_lag_sampler(lags, progress, rt.host))
        profiler = cProfile.Profile() if profile else None
        gc.collect()
        gc_time = _GcTimer()
        gc.callbacks.append(gc_time)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        if profiler is not None:
            profiler.enable()
        await asyncio.gather(*(one(i, h) for i, h in enumerate(handles)))
        if profiler is not None:
            profiler.disable()
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
        gc.callbacks.remove(gc_time)
        sampler.cancel()
        await asyncio.gather(sampler, return_exceptions=True)
        status = _proc_status()
        resident = rt.host.resident
        activations = rt.host.activations - activations0
    finally:
        await rt.close()

    done = len(spans)
    overhead = [end - start - delay for _, _, start, end in spans]
    before = [model.started[k] - start for k, _, start, _ in spans]
    late = [model.replied[k] - model.started[k] - delay for k, _, _, _ in spans]
    after = [end - model.replied[k] for k, _, _, end in spans]
    first = [end - start - delay for _, t, start, end in spans if t == 0]
    later = [end - start - delay for _, t, start, end in spans if t > 0]

    def activated_by(share: float) -> float | None:
        """Seconds after launch until ``share`` of the sessions had an actor (10 ms resolution)."""
        goal = activations0 + share * n
        return next((t - wall0 for t, count in progress if count >= goal), None)

    out: dict[str, Any] = {
        "sessions": n,
        "turns_per_session": turns,
        "seconds_until_activated": {f"{int(q * 100)}%": activated_by(q) for q in (0.1, 0.5, 0.9, 1.0)},
        "model_delay_ms": delay * 1e3,
        "turns_done": done,
        "failures": dict(failures),
        "create_sessions_seconds": create_s,
        "wall_seconds": wall,
        "ideal_wall_seconds": turns * delay,
        "turns_per_s": done / wall if wall else 0.0,
        "process_cpu_seconds": cpu,
        "cpu_ms_per_turn": cpu / done * 1e3 if done else None,
        "cpu_utilisation_cores": cpu / wall if wall else None,
        "gc": {
            "seconds": gc_time.seconds,
            "ms_per_turn": gc_time.seconds / done * 1e3 if done else None,
            "collections_by_generation": gc_time.collections,
        },
        "per_turn_overhead": dist_ms(overhead),
        "overhead_first_turn": dist_ms(first),
        "overhead_later_turns": dist_ms(later),
        "split": {
            "before_model": dist_ms(before),
            "model_sleep_late": dist_ms(late),
            "after_model": dist_ms(after),
        },
        "event_loop_lag": dist_ms(lags),
        "resident_actors_at_end": resident,
        "activations": activations,
        "rss_bytes_at_end": status["VmRSS"],
        "peak_rss_bytes": status["VmHWM"],
    }
    if profiler is not None:
        out["profile"] = _profile_report(profiler, done)
    return out


def _group(filename: str, name: str) -> str:
    """The layer a profiled function belongs to."""
    if filename == "~":
        if "select.epoll" in name:
            return "idle: waiting in epoll"
        if "sqlite3" in name:
            return "SQLite (C)"
        if "pydantic_core" in name:
            return "pydantic (C)"
        if "_thread" in name or "acquire" in name:
            return "thread hops (executor, locks)"
        return "other builtins"
    path = filename.replace("\\", "/")
    base = os.path.basename(path)
    if "/repertory/storage/" in path:
        return "store (Python)"
    if "/repertory/runtime/" in path:
        if base in ("actor.py", "host.py", "handle.py", "events.py", "runtime.py"):
            return "actor layer (actor/host/handle/events)"
        if base == "testing.py":
            return "ScriptedModel"
        return "engine (session/_loop/history/...)"
    if "/pydantic/" in path:
        return "pydantic (Python)"
    if "/asyncio/threads.py" in path or "/concurrent/futures/" in path or base in ("threading.py", "queue.py"):
        return "thread hops (executor, locks)"
    if "/asyncio/" in path:
        return "asyncio machinery"
    if base == "copy.py":
        return "copy (deep copies of RunState)"
    if "/json/" in path:
        return "json (stdlib)"
    if "/benchmarks/" in path:
        return "benchmark harness"
    return "other Python"


def _label(key: tuple[str, int, str]) -> str:
    filename, line, name = key
    return name if filename == "~" else f"{_where(filename)}:{line}({name})"


def _profile_report(profiler: cProfile.Profile, turns: int) -> dict[str, Any]:
    stats = pstats.Stats(profiler)
    table: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in table.values())
    groups: dict[str, float] = collections.defaultdict(float)
    for key, (_, _, tottime, _, _) in table.items():
        groups[_group(key[0], key[2])] += tottime
    busy = total - groups.get("idle: waiting in epoll", 0.0)
    top = sorted(table.items(), key=lambda kv: -kv[1][2])[:30]
    store_calls = {
        key[2]: v[1] / turns
        for key, v in table.items()
        if "/repertory/storage/" in key[0] and not key[2].startswith("_") and key[2] != "<lambda>"
    }
    cumulative = {
        _label(key): {"ncalls_per_turn": v[1] / turns, "cumtime_us_per_turn": v[3] / turns * 1e6}
        for key, v in table.items()
        if key[2]
        in (
            "run",
            "send",
            "result",
            "actor",
            "_run_turn",
            "_finish",
            "start",
            "_start",
            "commit",
            "request",
            "supersede_open_runs",
            "list_runs",
            "to_thread",
            "wait_turn",
            "append",
            "_work",
        )
        and ("/repertory/" in key[0] or "asyncio/threads.py" in key[0])
    }
    return {
        "turns": turns,
        "profiled_seconds": total,
        "busy_seconds": busy,
        "busy_us_per_turn": busy / turns * 1e6,
        "groups": {
            k: {
                "seconds": v,
                "share_of_busy": (v / busy if busy and not k.startswith("idle") else None),
                "us_per_turn": v / turns * 1e6,
            }
            for k, v in sorted(groups.items(), key=lambda kv: -kv[1])
        },
        "top_by_tottime": [
            {
                "function": _label(k),
                "ncalls_per_turn": v[1] / turns,
                "tottime_us_per_turn": v[2] / turns * 1e6,
                "cumtime_us_per_turn": v[3] / turns * 1e6,
                "top_callers": {
                    _label(c): {"ncalls_per_turn": cv[1] / turns, "cumtime_us_per_turn": cv[3] / turns * 1e6}
                    for c, cv in sorted(v[4].items(), key=lambda kv: -kv[1][3])[:4]
                },
            }
            for k, v in top
        ],
        "store_calls_per_turn": dict(sorted(store_calls.items(), key=lambda kv: -kv[1])),
        "cumulative_of_key_functions": dict(sorted(cumulative.items(), key=lambda kv: -kv[1]["cumtime_us_per_turn"])),
        "note": "event loop thread only (worker threads are not profiled); profiler overhead included",
    }


# -- part 5: anatomy of one turn ------------------------------------------------------------------------

_VERB = re.compile(r"^\s*(\w+)")
_TABLE = re.compile(r"\b(?:FROM|INTO|UPDATE)\s+(\w+)", re.IGNORECASE)


class _SqlCounter:
    """Counts statements by verb and table, and write transactions, from SQLite trace callbacks."""

    def __init__(self) -> None:
        self.statements: collections.Counter[str] = collections.Counter()
        self.transactions = 0
        self.autocommit_writes = 0
        self._in_txn: dict[int, bool] = {}
        self._lock = threading.Lock()

    def callback(self, conn_id: int) -> Callable[[str], None]:
        def trace(sql: str) -> None:
            verb = (_VERB.match(sql) or [None, "?"])[1].upper()
            table = _TABLE.search(sql)
            with self._lock:
                self.statements[f"{verb} {table.group(1) if table else ''}".strip()] += 1
                if verb == "BEGIN":
                    self._in_txn[conn_id] = True
                    self.transactions += 1
                elif verb in ("COMMIT", "ROLLBACK", "END"):
                    self._in_txn[conn_id] = False
                elif verb in ("INSERT", "UPDATE", "DELETE") and not self._in_txn.get(conn_id):
                    self.autocommit_writes += 1

        return trace


def _count_store_calls(store: Any, calls: collections.Counter[str], spent: dict[str, float]) -> None:
    """Wrap every coroutine method of ``store`` (on the instance) so each call is counted and timed.

    Timing is wall time, meaningful on an idle loop only (where it is used): nested calls
    (``list_runs`` -> ``_read``) are timed at both levels.
    """
    for name in dir(type(store)):
        if name.startswith("__"):
            continue
        attr = getattr(type(store), name, None)
        if not inspect.iscoroutinefunction(attr):
            continue
        original = getattr(store, name)

        if name == "_read":

            async def wrapper(action: str, *a: Any, _original: Any = original, **k: Any) -> Any:
                key = f"thread hop: {action}"
                calls[key] += 1
                t0 = time.perf_counter()
                try:
                    return await _original(action, *a, **k)
                finally:
                    spent[key] = spent.get(key, 0.0) + time.perf_counter() - t0
        else:

            async def wrapper(*a: Any, _original: Any = original, _name: str = name, **k: Any) -> Any:
                calls[_name] += 1
                t0 = time.perf_counter()
                try:
                    return await _original(*a, **k)
                finally:
                    spent[_name] = spent.get(_name, 0.0) + time.perf_counter() - t0

        setattr(store, name, wrapper)


async def _anatomy(folder: str, sessions: int, long_turns: int, full_sessions: int = 50) -> dict[str, Any]:
    model = StampedModel(0.0)
    out: dict[str, Any] = {}
    rt = await _runtime(folder, "anatomy.db", model)
    try:
        for _ in range(20):
            h = await rt.create_session(agent=AGENT)
            await h.run("warm-up")
        rt.host.passivate_idle(0)
        # Sequential turns on an idle loop, no model delay: the least a turn can cost here.
        handles = [await rt.create_session(agent=AGENT) for _ in range(sessions)]
        spans: list[tuple[str, int, float, float]] = []
        gc.collect()
        for t in range(TURNS):
            for i, h in enumerate(handles):
                key = f"seq {i} turn {t}"
                start = time.perf_counter()
                await h.run(key)
                spans.append((key, t, start, time.perf_counter()))
        out["sequential"] = {
            "sessions": sessions,
            "turns_per_session": TURNS,
            "model_delay_ms": 0.0,
            "first_turn_ms": dist_ms([e - s for _, t, s, e in spans if t == 0]),
            "later_turns_ms": dist_ms([e - s for _, t, s, e in spans if t > 0]),
            "before_model_later_turns_ms": dist_ms([model.started[k] - s for k, t, s, _ in spans if t > 0]),
            "after_model_later_turns_ms": dist_ms([e - model.replied[k] for k, t, _, e in spans if t > 0]),
        }

        # One turn's store calls, thread hops, SQL statements and write transactions.
        store: Any = rt.store
        calls: collections.Counter[str] = collections.Counter()
        spent: dict[str, float] = {}
        sql = _SqlCounter()
        probe = [await rt.create_session(agent=AGENT) for _ in range(20)]
        for h in probe:
            await h.run("first turn, activates the session")
        _count_store_calls(store, calls, spent)
        conns = [store._writer, *store._all_readers]
        for conn in conns:
            conn.set_trace_callback(sql.callback(id(conn)))
        for h in probe:
            await h.run("a later turn on an active session")
        for conn in conns:
            conn.set_trace_callback(None)
        n = len(probe)
        out["later_turn_on_active_session"] = {
            "store_calls_per_turn": {k: v / n for k, v in calls.most_common()},
            "store_call_us_per_turn": {k: v / n * 1e6 for k, v in sorted(spent.items(), key=lambda kv: -kv[1])},
            "sql_statements_per_turn": {k: v / n for k, v in sql.statements.most_common()},
            "write_transactions_per_turn": (sql.transactions + sql.autocommit_writes) / n,
            "reader_connections": len(store._all_readers),
        }
        calls.clear()
        spent.clear()
        sql = _SqlCounter()
        rt.host.passivate_idle(0)
        for conn in conns:
            conn.set_trace_callback(sql.callback(id(conn)))
        for h in probe:
            await h.run("a turn that activates the session again")
        for conn in conns:
            conn.set_trace_callback(None)
        out["turn_that_activates"] = {
            "store_calls_per_turn": {k: v / n for k, v in calls.most_common()},
            "store_call_us_per_turn": {k: v / n * 1e6 for k, v in sorted(spent.items(), key=lambda kv: -kv[1])},
            "sql_statements_per_turn": {k: v / n for k, v in sql.statements.most_common()},
            "write_transactions_per_turn": (sql.transactions + sql.autocommit_writes) / n,
        }
    finally:
        await rt.close()

    # The same sequential turns with every commit synced (durability full): a turn's write
    # transactions each cost a sync then.
    model = StampedModel(0.0)
    rt = await _runtime(folder, "anatomy_full.db", model, durability="full")
    try:
        handles = [await rt.create_session(agent=AGENT) for _ in range(full_sessions)]
        times = []
        for t in range(3):
            for h in handles:
                start = time.perf_counter()
                await h.run(f"full {t}")
                if t > 0:
                    times.append(time.perf_counter() - start)
        out["later_turns_durability_full_ms"] = dist_ms(times)
    finally:
        await rt.close()

    # A turn's cost as the session grows: one session, many turns, sequential, no delay.
    model = StampedModel(0.0)
    rt = await _runtime(folder, "long.db", model)
    try:
        h = await rt.create_session(agent=AGENT)
        times: list[float] = []
        gc.collect()
        for t in range(long_turns):
            start = time.perf_counter()
            await h.run(f"long turn {t}")
            times.append(time.perf_counter() - start)
        store = rt.store
        t0 = time.perf_counter()
        runs = await store.list_runs(h.id)
        list_runs_ms = (time.perf_counter() - t0) * 1e3
        window = 10
        out["growth_with_turns_in_session"] = {
            "turns": long_turns,
            "median_turn_ms_by_window": {
                f"turns {a + 1}-{a + window}": statistics.median(times[a : a + window]) * 1e3
                for a in sorted({0, long_turns // 4, long_turns // 2, long_turns - window})
            },
            "list_runs_of_the_session_ms_at_end": list_runs_ms,
            "runs_in_session": len(runs),
        }
    finally:
        await rt.close()
    return out


# -- the parent: one fresh interpreter per part ---------------------------------------------------------


def _child(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run one part in a fresh interpreter; its figures come back as JSON, or why they did not."""
    with tempfile.TemporaryDirectory(prefix="repertory-sessions-") as folder:
        out_path = os.path.join(folder, "result.json")
        cmd = [sys.executable, "-m", "benchmarks.sessions", "--child", json.dumps(spec), "--out", out_path]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"spec": spec, "finished": False, "why": f"did not finish within {timeout:.0f} s"}
        elapsed = time.perf_counter() - t0
        if proc.returncode != 0 or not os.path.exists(out_path):
            return {"spec": spec, "finished": False, "why": f"exit {proc.returncode}: {proc.stderr[-2000:]}"}
        with open(out_path) as f:
            result: dict[str, Any] = json.load(f)
        result["finished"] = True
        result["child_seconds"] = elapsed
        return result


def _run_child(spec: dict[str, Any], out_path: str) -> None:
    folder = tempfile.mkdtemp(prefix="repertory-sessions-db-", dir=os.path.dirname(out_path))
    load_before = list(os.getloadavg())  # the machine may be shared: a busy one slows every figure
    try:
        part = spec["part"]
        if part == "memory":
            result = asyncio.run(_memory(folder, spec["n"], spec["traced"], spec.get("warmup", WARMUP_SESSIONS)))
        elif part == "create":
            result = asyncio.run(_creation(folder, spec["n"], spec["rounds"], spec["full_n"]))
        elif part == "concurrent":
            result = asyncio.run(_concurrent(folder, spec["n"], spec["turns"], spec["delay"], spec["profile"]))
        elif part == "anatomy":
            result = asyncio.run(_anatomy(folder, spec["sessions"], spec["long_turns"], spec.get("full_sessions", 50)))
        else:
            raise SystemExit(f"unknown part {part!r}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    result["load_average_before_after"] = [load_before, list(os.getloadavg())]
    with open(out_path, "w") as f:
        json.dump(result, f)


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(quick: bool, smoke: bool = False) -> dict[str, Any]:
    """Every part, each in its own interpreter; returns the report.

    ``smoke`` (the suite's ``--quick``) shrinks every part to a fraction of a second: it proves
    the code runs, its figures mean nothing.
    """
    machine = machine_info()
    n_mem = 100 if smoke else 1_000 if quick else 10_000
    n_create = 200 if smoke else 2_000 if quick else 10_000
    ladder = [20] if smoke else [100, 500] if quick else [100, 1_000, 10_000]
    n_profile = 20 if smoke else 200 if quick else 1_000
    turns, delay = (2, 0.02) if smoke else (TURNS, DELAY_S)
    small: dict[str, Any] = {"warmup": 20} if smoke else {}
    report: dict[str, Any] = {
        "benchmark": "sessions",
        "mode": "smoke" if smoke else "quick" if quick else "full",
        "backend": "local",
        "store": "SQLite file (WAL), fresh temporary folder per part, same disk as the work tree",
        "durability": f"{DURABILITY} (WAL + synchronous=NORMAL) unless a figure says full",
        "machine": machine,
        "targets": {
            "idle_resident_session_bytes_history_cache_aside": TARGET_IDLE_BYTES,
            "passivated_session_bytes": "~0",
            "sessions_created_per_s": TARGET_CREATE_PER_S,
        },
    }
    _say(f"1-2. memory, {n_mem:,} sessions (untraced, for RSS)")
    report["memory_rss"] = _child({"part": "memory", "n": n_mem, "traced": False, **small}, 1800)
    _say(f"1-2. memory, {n_mem:,} sessions (tracemalloc)")
    if smoke:  # tracemalloc's snapshots take seconds whatever the number of sessions
        report["memory_traced"] = {"finished": False, "why": "skipped in smoke mode", "spec": {"part": "memory"}}
    else:
        report["memory_traced"] = _child({"part": "memory", "n": n_mem, "traced": True}, 2400)
    _say(f"3. creation, {n_create:,} per round")
    report["creation"] = _child(
        {"part": "create", "n": n_create, "rounds": 1 if smoke else 3, "full_n": 20 if smoke else 2_000}, 1800
    )
    _say("5. anatomy of a turn")
    report["anatomy"] = _child(
        {
            "part": "anatomy",
            "sessions": 10 if smoke else 100 if quick else 200,
            "long_turns": 20 if smoke else 100 if quick else 400,
            "full_sessions": 5 if smoke else 50,
        },
        1800,
    )
    runs: list[dict[str, Any]] = []
    for n in ladder:
        _say(f"4. {n:,} concurrent sessions x {turns} turns")
        limit = 600 if quick else 1800
        result = _child({"part": "concurrent", "n": n, "turns": turns, "delay": delay, "profile": False}, limit)
        runs.append(result)
        while not result["finished"] and n > ladder[0]:
            n //= 2
            _say(f"   did not finish ({result['why'][:200]}); trying {n:,}")
            result = _child({"part": "concurrent", "n": n, "turns": turns, "delay": delay, "profile": False}, limit)
            runs.append(result)
        if not result["finished"]:
            break
    finished = [r["sessions"] for r in runs if r.get("finished")]
    report["concurrency"] = {"runs": runs, "largest_finished": max(finished) if finished else None}
    _say(f"5. cProfile of {n_profile:,} concurrent sessions")
    report["profile_run"] = _child(
        {"part": "concurrent", "n": n_profile, "turns": turns, "delay": delay, "profile": True}, 1800
    )
    report["machine"]["load_average_after"] = list(os.getloadavg())
    return report


# -- the printed summary --------------------------------------------------------------------------------


def _table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    out = [
        title,
        "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    out += [
        "  ".join([r[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True))]) for r in rows
    ]
    return "\n".join(out)


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:,.2f}"


def _kb(b: float | None) -> str:
    return "-" if b is None else f"{b / 1024:,.2f}"


def render(report: dict[str, Any]) -> str:
    """The human-readable summary; the JSON holds every figure."""
    m = report["machine"]
    parts = [
        f"repertory sessions benchmark ({report['mode']}), backend local, SQLite durability "
        f"{DURABILITY} - {m['platform']}, Python {m['python']}, {m['cpu_count']} CPUs, SQLite "
        f"{m['sqlite_version']}; load average before/after {m['load_average_before'][0]:.2f}/"
        f"{m.get('load_average_after', [float('nan')])[0]:.2f}"
    ]
    mem_t, mem_r = report["memory_traced"], report["memory_rss"]
    if mem_t.get("finished") and mem_r.get("finished"):
        rows = []
        for label, title in (
            ("resident_history_kept", "resident, history cache kept"),
            ("resident_history_cleared", "resident, history cache cleared"),
            ("passivated", "passivated"),
        ):
            t, r = mem_t["states"][label], mem_r["states"][label]
            rows.append(
                [title, f"{t['resident']:,}", _kb(t["traced_bytes_per_session"]), _kb(r["rss_delta_bytes_per_session"])]
            )
        parts.append(
            _table(
                f"\n1-2. memory per session, {mem_t['sessions']:,} sessions after one turn each (targets: <= "
                f"{TARGET_IDLE_BYTES // 1024} KB resident with the history cache aside, ~0 passivated)",
                ["state", "resident", "tracemalloc KB/session", "RSS growth KB/session (untraced run)"],
                rows,
            )
        )
        top = mem_t["states"]["resident_history_cleared"]["by_repertory_line"][:12]
        parts.append(
            _table(
                "\n   where a resident session's memory is (history cache cleared; tracemalloc, by the "
                "repertory line that allocated it, directly or through pydantic/asyncio/copy)",
                ["repertory line", "bytes/session", "blocks/session"],
                [[s["site"][-70:], f"{s['bytes_per_session']:,.0f}", f"{s['blocks_per_session']:.2f}"] for s in top],
            )
        )
        objs = mem_t["states"]["resident_history_cleared"]["gc_objects_per_session"]
        parts.append(
            "   GC-tracked objects per resident session: "
            + ", ".join(f"{k} {v:.1f}" for k, v in list(objs.items())[:12])
        )
    else:
        parts.append(f"\n1-2. memory: NOT MEASURED: {mem_t.get('why') or mem_r.get('why')}")

    cr = report["creation"]
    if cr.get("finished"):
        normal = cr["normal"]
        rows = [
            [name, f"{v['median_per_s']:,.0f}", f"{v.get('best_per_s', 0):,.0f}", f"{v['median_us_each']:.1f}"]
            for name, v in normal.items()
            if "median_per_s" in v
        ]
        alone = normal["build_session_record_alone"]["median_us_each"]
        rows.append(["build SessionRecord alone", "", "", f"{alone:.1f}"])
        full = cr["full"]["runtime_loop"]
        rows.append(
            [
                f"runtime_loop, durability full ({cr['full']['sessions_per_round']:,}/round)",
                f"{full['median_per_s']:,.0f}",
                f"{full['best_per_s']:,.0f}",
                f"{full['median_us_each']:.1f}",
            ]
        )
        parts.append(
            _table(
                f"\n3. sessions created per second, median of {cr['rounds']} rounds of "
                f"{cr['sessions_per_round']:,} (target >= {TARGET_CREATE_PER_S:,}/s, durability normal)",
                ["variant", "median/s", "best/s", "us each"],
                rows,
            )
        )
    else:
        parts.append(f"\n3. creation: NOT MEASURED: {cr.get('why')}")

    rows = []
    for r in report["concurrency"]["runs"]:
        if not r.get("finished"):
            rows.append([f"{r['spec']['n']:,}", "did not finish", "", "", "", "", "", "", "", ""])
            continue
        o, s = r["per_turn_overhead"], r["split"]
        rows.append(
            [
                f"{r['sessions']:,}",
                f"{r['wall_seconds']:.1f}",
                f"{r['turns_per_s']:,.0f}",
                f"{o['p50_ms']:,.1f}",
                f"{o['p99_ms']:,.1f}",
                f"{o['max_ms']:,.1f}",
                f"{s['before_model']['p50_ms']:,.1f}",
                f"{s['model_sleep_late']['p50_ms']:,.1f}",
                f"{s['after_model']['p50_ms']:,.1f}",
                f"{r['cpu_ms_per_turn']:.2f}",
            ]
        )
    parts.append(
        _table(
            f"\n4. N concurrent sessions x {TURNS} turns, ScriptedModel delay {DELAY_S * 1e3:.0f} ms "
            f"(ideal wall {TURNS * DELAY_S:.1f} s); overhead = turn wall - delay, ms",
            [
                "sessions",
                "wall s",
                "turns/s",
                "ovh p50",
                "ovh p99",
                "ovh max",
                "pre p50",
                "sleep-late p50",
                "post p50",
                "CPU ms/turn",
            ],
            rows,
        )
    )
    for r in report["concurrency"]["runs"]:
        if r.get("finished"):
            lag = r["event_loop_lag"]
            first = r["overhead_first_turn"]["p50_ms"]
            parts.append(
                f"   {r['sessions']:>6,}: first-turn overhead p50 {first:,.1f} ms, "
                f"later turns p50 {r['overhead_later_turns']['p50_ms']:,.1f} ms; event loop lag p50 "
                f"{lag.get('p50_ms', float('nan')):,.1f} / p99 {lag.get('p99_ms', float('nan')):,.1f} ms; "
                f"CPU {r['cpu_utilisation_cores']:.2f} cores; peak RSS {r['peak_rss_bytes'] / 2**20:,.0f} MB; "
                f"GC {r['gc']['ms_per_turn']:.2f} ms/turn; "
                f"50%/100% of sessions activated after {_s(r['seconds_until_activated']['50%'])}/"
                f"{_s(r['seconds_until_activated']['100%'])} s; "
                f"failures {r['failures'] or 0}"
            )
    parts.append(f"   largest N that finished: {report['concurrency']['largest_finished']}")

    an = report["anatomy"]
    if an.get("finished"):
        seq = an["sequential"]
        parts.append(
            f"\n5. one turn on an idle loop (sequential, no delay): first turn p50 "
            f"{seq['first_turn_ms']['p50_ms']:.2f} ms, "
            f"later turns p50 {seq['later_turns_ms']['p50_ms']:.2f} ms "
            f"(before the model {seq['before_model_later_turns_ms']['p50_ms']:.2f}, after "
            f"{seq['after_model_later_turns_ms']['p50_ms']:.2f})"
        )
        later = an["later_turn_on_active_session"]
        parts.append(
            f"   a later turn: {later['write_transactions_per_turn']:.1f} write transactions, "
            f"{sum(later['sql_statements_per_turn'].values()):.1f} SQL statements, store calls: "
            + ", ".join(f"{k} {v:g}" for k, v in later["store_calls_per_turn"].items())
        )
        parts.append(f"   later turn with durability full: p50 {an['later_turns_durability_full_ms']['p50_ms']:.2f} ms")
        parts.append(
            "   store wall us per later turn (idle loop): "
            + ", ".join(f"{k} {v:.0f}" for k, v in later["store_call_us_per_turn"].items())
        )
        act = an["turn_that_activates"]
        parts.append(
            f"   a turn that activates: {act['write_transactions_per_turn']:.1f} write transactions, "
            f"{sum(act['sql_statements_per_turn'].values()):.1f} SQL statements, store calls: "
            + ", ".join(f"{k} {v:g}" for k, v in act["store_calls_per_turn"].items())
        )
        g = an["growth_with_turns_in_session"]
        parts.append(
            "   turn ms as one session grows: "
            + ", ".join(f"{k} {v:.2f}" for k, v in g["median_turn_ms_by_window"].items())
            + f"; list_runs of that session at the end {g['list_runs_of_the_session_ms_at_end']:.1f} ms "
            f"({g['runs_in_session']} runs)"
        )
    pr = report["profile_run"]
    if pr.get("finished"):
        prof = pr["profile"]
        parts.append(
            _table(
                f"\n   cProfile, {pr['sessions']:,} concurrent sessions x {TURNS} turns (event loop "
                f"thread; profiler overhead included): {prof['busy_us_per_turn']:,.0f} us busy per turn",
                ["group", "share of busy", "us/turn"],
                [
                    [k, "-" if v["share_of_busy"] is None else f"{v['share_of_busy']:.0%}", f"{v['us_per_turn']:,.0f}"]
                    for k, v in prof["groups"].items()
                ],
            )
        )
        parts.append(
            _table(
                "\n   top functions by self time",
                ["function", "calls/turn", "self us/turn"],
                [
                    [t["function"][-80:], f"{t['ncalls_per_turn']:.1f}", f"{t['tottime_us_per_turn']:.1f}"]
                    for t in prof["top_by_tottime"][:15]
                ],
            )
        )
    return "\n".join(parts)


def run_suite(quick: bool, out_dir: Path = RESULTS.parent, peers: bool = True) -> dict[str, Any]:
    """The suite's entry (``python -m benchmarks``): measure, print, write ``out_dir/sessions.json``.

    ``quick`` is the suite's smoke size (a hundred sessions, two short turns each).
    """
    report = run(quick, smoke=quick)
    print(render(report))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "sessions.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="smaller N everywhere (a minute or two)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _run_child(json.loads(args.child), args.out)
        return
    report = run(args.quick)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(render(report))
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
