"""The workloads of ``benchmarks.group_commit``: many sessions at once, one session alone, a profile.

Every figure comes from the engine's public path: ``Session.start()`` on an ``Agent`` whose model
is a ``ScriptedModel`` with no delay, against a store opened with group commit on or off. The
model's script is a step function (no scan of the conversation) with usage given, so the figure is
the engine's and the store's cost, not the test double's.
"""

from __future__ import annotations

import asyncio
import cProfile
import gc
import pstats
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from benchmarks._common import EngineSession, make_message
from benchmarks._report import percentile
from repertory import Agent, Session, Tool, tool
from repertory.core.messages import ModelMessage
from repertory.core.model import ToolSpec
from repertory.core.store import SessionStore
from repertory.runtime.gc_tuning import tune_gc
from repertory.testing import ScriptedModel

__all__ = [
    "GcTimer",
    "SessionsRound",
    "alternate",
    "commits_per_run",
    "lone_commits",
    "lone_session",
    "profile_categories",
    "sessions_round",
]

TOOL = "fetch"
USAGE = {"input_tokens": 100, "output_tokens": 20}
FINAL = "All records fetched."


def make_agent(steps: int, idempotent: bool, yields: bool = False) -> Agent:
    """``steps`` tool calls (each answered by a ~100-character result), then a final reply.

    ``yields``: the model hands the event loop over once per request (``asyncio.sleep(0)``), as
    any real model client does while it waits, even for a reply that is already there. Without it
    a zero-delay model never yields, and with group commit off (every commit inline) each session
    then runs to its end before the next one starts.
    """

    @tool(name=TOOL, idempotent=idempotent)
    async def fetch(i: int) -> str:
        """Fetch record ``i``."""
        return f"record {i:06d}: " + "x" * 86

    def script(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        done = (len(messages) - 1) // 2  # the user message, then one call/result pair per step
        if done < steps:
            return {"tool": TOOL, "args": {"i": done}, "usage": USAGE}
        return {"text": FINAL, "usage": USAGE}

    async def yielding(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        await asyncio.sleep(0)
        return script(messages, tools)

    tools: list[Tool] = [fetch]
    model = ScriptedModel(yielding if yields else script)
    return Agent(name="bench", model=model, tools=tools, max_steps=steps + 1)


class GcTimer:
    """Seconds the cyclic garbage collector ran while installed (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = 0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.collections += 1

    def __enter__(self) -> GcTimer:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


@dataclass
class SessionsRound:
    """One timed round of N sessions each running one run of ``steps`` tool steps and a final reply."""

    group_commit: bool
    sessions: int
    model_steps: int
    seconds: float
    cpu_seconds: float
    gc_seconds: float
    steps_per_s: float
    cpu_us_per_step: float
    commits: int
    batches: int | None
    mean_batch: float | None

    def as_dict(self) -> dict[str, Any]:
        """The round as JSON."""
        return asdict(self)


def _group_stats(store: SessionStore) -> tuple[int, int] | None:
    group = getattr(store, "_group", None) or getattr(store, "_commits", None)
    return None if group is None else (group.batches, group.members)


def commits_per_run(steps: int, idempotent: bool) -> int:
    """The run row before the first model call, each tool step (twice for a tool that is not
    idempotent: its call is durable before it runs), and the final reply."""
    return 1 + steps * (1 if idempotent else 2) + 1


async def sessions_round(
    store: SessionStore, group_commit: bool, sessions: int, steps: int, idempotent: bool,
    profile: cProfile.Profile | None = None, *, yields: bool = False, gc_off: bool = False,
    gc_tuned: bool = False,
) -> SessionsRound:  # fmt: skip
    """Run ``sessions`` sessions at once (``asyncio.gather``), each one run to its final reply.

    ``gc_off`` disables the cyclic garbage collector for the timed part (an application's choice,
    measured to show the collector's share; the store and the engine never touch it); ``gc_tuned``
    applies ``tune_gc()`` instead (rarer passes, what a process holding many sessions should do).
    """
    agent = make_agent(steps, idempotent, yields)
    runners = [Session(store=store, agent=agent) for _ in range(sessions)]
    before = _group_stats(store)
    gc.collect()
    with GcTimer() as gc_time:
        thresholds = tune_gc() if gc_tuned else None
        if gc_off:
            gc.disable()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        try:
            if profile is not None:
                profile.enable()
            results = await asyncio.gather(*(s.start(f"go {i}") for i, s in enumerate(runners)))
            if profile is not None:
                profile.disable()
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        finally:
            gc.enable()
            if thresholds is not None:
                gc.set_threshold(*thresholds)
    bad = [r for r in results if r.status != "done" or r.text != FINAL or r.state.step_index != steps + 1]
    if bad:
        raise RuntimeError(f"{len(bad)} runs ended wrongly, e.g. {bad[0].status} at step {bad[0].state.step_index}")
    model_steps = sessions * (steps + 1)
    after = _group_stats(store)
    batches = members = None
    if before is not None and after is not None:
        batches, members = after[0] - before[0], after[1] - before[1]
    return SessionsRound(
        group_commit=group_commit,
        sessions=sessions,
        model_steps=model_steps,
        seconds=wall,
        cpu_seconds=cpu,
        gc_seconds=gc_time.seconds,
        steps_per_s=model_steps / wall,
        cpu_us_per_step=cpu / model_steps * 1e6,
        commits=sessions * commits_per_run(steps, idempotent),
        batches=batches,
        mean_batch=None if not batches or members is None else members / batches,
    )


async def lone_commits(store: SessionStore, commits: int, warmup: int = 100) -> dict[str, float]:
    """One writer, one commit at a time (an engine step: one 1 KB message): latency of each commit."""
    session = EngineSession.new()
    message = make_message(0)
    for _ in range(warmup):
        await session.step(store, message)
    latencies: list[float] = []
    gc.collect()
    started = time.perf_counter()
    for _ in range(commits):
        t0 = time.perf_counter()
        await session.step(store, message)
        latencies.append(time.perf_counter() - t0)
    wall = time.perf_counter() - started
    return {
        "commits": commits,
        "p50_us": percentile(latencies, 0.5) * 1e6,
        "p90_us": percentile(latencies, 0.9) * 1e6,
        "p99_us": percentile(latencies, 0.99) * 1e6,
        "mean_us": statistics.fmean(latencies) * 1e6,
        "commits_per_s": commits / wall,
    }


async def lone_session(store: SessionStore, group_commit: bool, steps: int, idempotent: bool) -> dict[str, float]:
    """One session alone, one run of ``steps`` tool steps: steps/s, where no commit has company."""
    result = await sessions_round(store, group_commit, 1, steps, idempotent)
    return {"model_steps": result.model_steps, "steps_per_s": result.steps_per_s, "seconds": result.seconds}


# -- where the time goes ------------------------------------------------------------------------------

_CATEGORIES: list[tuple[str, Callable[[str, str], bool]]] = [
    ("sqlite3 (C: statements, COMMIT, WAL writes)", lambda f, n: f == "~" and "sqlite3.Connection" in n),
    ("psycopg / network", lambda f, n: "psycopg" in f),
    ("repertory.storage (Python)", lambda f, n: "/repertory/storage/" in f),
    ("repertory.runtime: the step loop and tools", lambda f, n: "/repertory/runtime/" in f),
    ("ScriptedModel", lambda f, n: "/repertory/testing" in f or "testing.py" in f),
    ("pydantic (validation, JSON)", lambda f, n: "pydantic" in f or ("~" == f and "pydantic_core" in n)),
    ("asyncio event loop", lambda f, n: "/asyncio/" in f or ("~" == f and "select" in n)),
]


def profile_categories(profile: cProfile.Profile, model_steps: int, wall_us_per_step: float) -> dict[str, Any]:
    """Self time per category (cProfile), as a share and as microseconds per model step.

    cProfile slows Python calls, not the C inside sqlite3, so the profiled microseconds are given
    as measured and the shares are what to read; garbage collection is timed apart (``GcTimer``),
    since cProfile bills it to whichever function was running.
    """
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    totals: dict[str, float] = {}
    for (filename, _, name), (_, _, tottime, _, _) in stats.items():
        label = next((cat for cat, match in _CATEGORIES if match(filename, name)), "other (stdlib, builtins)")
        totals[label] = totals.get(label, 0.0) + tottime
    total = sum(totals.values()) or 1.0
    return {
        "profiled_us_per_step": total / model_steps * 1e6,
        "unprofiled_us_per_step": wall_us_per_step,
        "categories": {
            k: {"share": v / total, "profiled_us_per_step": v / model_steps * 1e6}
            for k, v in sorted(totals.items(), key=lambda kv: -kv[1])
        },
    }


async def alternate(
    rounds: int, make: Callable[[bool], Awaitable[SessionStore]], work: Callable[[SessionStore, bool], Awaitable[Any]]
) -> dict[bool, list[Any]]:
    """``rounds`` of on then off (on a fresh store each), alternating so a load change hits both."""
    out: dict[bool, list[Any]] = {True: [], False: []}
    for r in range(rounds):
        for on in (True, False) if r % 2 == 0 else (False, True):
            store = await make(on)
            try:
                out[on].append(await work(store, on))
            finally:
                await store.close()
    return out
