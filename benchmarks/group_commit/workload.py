"""The group commit workloads: many sessions at once, one writer alone, one session alone.

Every figure comes from the engine's public path: ``Session.start()`` on an ``Agent`` whose model
is a ``ScriptedModel`` with no delay, against a store opened with group commit on or off. The
model's script is a step function (no scan of the conversation) with usage given, so the figure is
the engine's and the store's cost, not the test double's.
"""

from __future__ import annotations

import asyncio
import cProfile
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from benchmarks.group_commit.report import LoneCommits, LoneSession, SessionsRound
from benchmarks.harness.commits import EngineSession, make_message
from benchmarks.harness.stats import percentile
from benchmarks.harness.timing import GcTimer
from repertory import Agent, Session, Tool, tool
from repertory.core.messages import ModelMessage
from repertory.core.model import ToolSpec
from repertory.core.store import SessionStore
from repertory.runtime.gc_tuning import tune_gc
from repertory.storage.postgres.store import PostgresSessionStore
from repertory.storage.sqlite.store import SqliteSessionStore
from repertory.testing import ScriptedModel

__all__ = ["alternate", "commits_per_run", "lone_commits", "lone_session", "make_agent", "sessions_round"]

TOOL = "fetch"
USAGE = {"input_tokens": 100, "output_tokens": 20}
FINAL = "All records fetched."
T = TypeVar("T")


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


def _group_counts(store: SessionStore) -> tuple[int, int] | None:
    if isinstance(store, SqliteSessionStore | PostgresSessionStore):
        return store.group_commit_counts
    return None


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
    before = _group_counts(store)
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
    after = _group_counts(store)
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


async def lone_commits(store: SessionStore, commits: int, warmup: int = 100) -> LoneCommits:
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
    return LoneCommits(
        commits=commits,
        p50_us=percentile(latencies, 0.5) * 1e6,
        p90_us=percentile(latencies, 0.9) * 1e6,
        p99_us=percentile(latencies, 0.99) * 1e6,
        mean_us=statistics.fmean(latencies) * 1e6,
        commits_per_s=commits / wall,
    )


async def lone_session(store: SessionStore, group_commit: bool, steps: int, idempotent: bool) -> LoneSession:
    """One session alone, one run of ``steps`` tool steps: steps/s, where no commit has company."""
    result = await sessions_round(store, group_commit, 1, steps, idempotent)
    return LoneSession(model_steps=result.model_steps, steps_per_s=result.steps_per_s, seconds=result.seconds)


async def alternate(
    rounds: int, make: Callable[[bool], Awaitable[SessionStore]], work: Callable[[SessionStore, bool], Awaitable[T]]
) -> dict[bool, list[T]]:
    """``rounds`` of on then off (on a fresh store each), alternating so a load change hits both."""
    out: dict[bool, list[T]] = {True: [], False: []}
    for r in range(rounds):
        for on in (True, False) if r % 2 == 0 else (False, True):
            store = await make(on)
            try:
                out[on].append(await work(store, on))
            finally:
                await store.close()
    return out
