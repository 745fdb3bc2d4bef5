"""The concurrency workload: a ladder of N sessions x T turns against a log-normal model, local then Ray."""

from __future__ import annotations

import asyncio
import math
import os
import random
import tempfile
import time
import traceback
from collections.abc import Callable
from typing import Any

from benchmarks.concurrency.report import SIGMA, STEPS_PER_TURN, ConcurrencyReport, ModelShape, Run
from benchmarks.harness.local_ray import local_ray
from benchmarks.harness.report import Clock, finish, mode_of
from benchmarks.harness.stats import dist_ms
from benchmarks.harness.timing import GcTimer, progress
from repertory import Agent, Runtime, tool
from repertory.core.messages import ModelMessage
from repertory.core.model import ToolSpec
from repertory.testing import ScriptedModel
from repertory.tree.runtime import Backend

__all__ = ["AGENT", "LogNormalScript", "agents", "measure"]

AGENT = "assistant"
LADDER = {"full": (10, 100, 1_000, 10_000), "quick": (10, 50)}
TURNS = {"full": 3, "quick": 2}
MEDIAN_DELAY_S = {"full": 0.1, "quick": 0.02}
TIME_LIMIT_S = 600.0
CREATE_BATCH = 500


@tool
async def lookup(q: str) -> str:
    """Look something up (instant: the model's delay is the only wait)."""
    return f"facts about {q}"


class LogNormalScript:
    """A ``ScriptedModel`` step function: one tool call, then a reply, each after a log-normal delay."""

    def __init__(self, median_s: float, sigma: float = SIGMA) -> None:
        self.median_s = median_s
        self.sigma = sigma

    def delay(self, prompt: str, step: int) -> float:
        """Seconds the model takes for ``step`` of the turn ``prompt`` (the same in every process)."""
        return random.Random(f"{prompt}|{step}").lognormvariate(math.log(self.median_s), self.sigma)

    async def __call__(self, messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        step, prompt = 0, ""
        for message in reversed(messages):
            if message.role == "user":
                prompt = message.text
                break
            step += message.role == "assistant"
        await asyncio.sleep(self.delay(prompt, step))
        usage = {"input_tokens": 50, "output_tokens": 10}
        if step == 0:
            return {"tool": "lookup", "args": {"q": prompt}, "usage": usage}
        return {"text": "ok", "usage": usage}


def agents(script: LogNormalScript) -> dict[str, Agent]:
    """The one agent the workload runs: ``lookup`` called once a turn, each step after ``script``'s delay."""
    return {AGENT: Agent(name=AGENT, model=ScriptedModel(script), tools=[lookup], max_steps=STEPS_PER_TURN)}


async def _one_n(backend: Backend, n: int, turns: int, script: LogNormalScript, folder: str) -> Run:
    url = f"sqlite:///{os.path.join(folder, f'{backend}-{n}.db')}"
    options: dict[str, Any] = {"hosts": 2, "keep_hosts": False} if backend == "ray" else {}
    rt = await Runtime.start(store=url, backend=backend, agents=agents(script), idle_timeout=3600.0, **options)
    try:
        warm = await rt.create_session(agent=AGENT)
        await warm.run("warm-up")
        handles = []
        t0 = time.perf_counter()
        for start in range(0, n, CREATE_BATCH):
            batch = min(CREATE_BATCH, n - start)
            handles += await asyncio.gather(*(rt.create_session(agent=AGENT) for _ in range(batch)))
        create_s = time.perf_counter() - t0
        latency: list[float] = []
        overhead: list[float] = []
        failures: dict[str, int] = {}

        async def session(i: int, advance: Callable[[int], None]) -> None:
            h = handles[i]
            for t in range(turns):
                prompt = f"session {i} turn {t}"
                t0 = time.perf_counter()
                try:
                    result = await h.run(prompt)
                except Exception as exc:  # measured, not asserted: count it and go on
                    failures[type(exc).__name__] = failures.get(type(exc).__name__, 0) + 1
                    continue
                took = time.perf_counter() - t0
                if result.status != "done" or result.text != "ok":
                    failures[f"status {result.status}"] = failures.get(f"status {result.status}", 0) + 1
                latency.append(took)
                overhead.append(took - sum(script.delay(prompt, s) for s in range(STEPS_PER_TURN)))
                advance(1)

        ideal = max(
            sum(script.delay(f"session {i} turn {t}", s) for t in range(turns) for s in range(STEPS_PER_TURN))
            for i in range(n)
        )
        load_before = os.getloadavg()[0]
        cpu0, wall0 = time.process_time(), time.perf_counter()
        finished = True
        with GcTimer() as collector, progress(f"concurrency: {backend}, {n:,} sessions, turns", n * turns) as advance:
            try:
                await asyncio.wait_for(asyncio.gather(*(session(i, advance) for i in range(n))), TIME_LIMIT_S)
            except TimeoutError:
                finished = False
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
    finally:
        await rt.close()
    done = len(latency)
    return Run(
        backend=backend,
        sessions=n,
        turns_per_session=turns,
        finished=finished,
        time_limit_s=TIME_LIMIT_S,
        turns_done=done,
        failures=failures,
        create_seconds=create_s,
        wall_seconds=wall,
        ideal_wall_seconds=ideal,
        turns_per_s=done / wall,
        steps_per_s=done * STEPS_PER_TURN / wall,
        latency=dist_ms(latency),
        overhead=dist_ms(overhead),
        client_process_cpu_seconds=cpu,
        load_average_before_after=[load_before, os.getloadavg()[0]],
        gc_passes_by_generation=collector.by_generation,
        gc_seconds_by_generation=[round(s, 3) for s in collector.seconds_by_generation],
    )


async def _ladder(backend: Backend, mode: str, folder: str) -> list[Run]:
    script = LogNormalScript(MEDIAN_DELAY_S[mode])
    return [await _one_n(backend, n, TURNS[mode], script, folder) for n in LADDER[mode]]


def measure(quick: bool, with_ray: bool = True) -> ConcurrencyReport:
    """The local ladder, then the Ray ladder (its own local Ray instance); the report with its summary."""
    mode = mode_of(quick)
    clock = Clock.start("concurrency", mode)
    median = MEDIAN_DELAY_S[mode]
    skipped: dict[str, str] = {}
    failed: dict[str, str] = {}
    results: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="repertory-concurrency-") as folder:
        results += asyncio.run(_ladder("local", mode, folder))
        if quick or not with_ray:
            skipped["ray"] = "quick mode (starting Ray takes ~10 s)" if quick else "--no-ray"
        else:
            try:
                with local_ray():
                    results += asyncio.run(_ladder("ray", mode, folder))
            except Exception as exc:  # keep the local figures; the suite still reports the failure
                failed["ray"] = f"{type(exc).__name__}: {exc}"
                traceback.print_exc()
    report = ConcurrencyReport(
        **clock.frame(),
        store="SQLite file (WAL), durability normal, a fresh one per N",
        model=ModelShape(
            median_delay_ms=median * 1e3,
            sigma=SIGMA,
            steps_per_turn=STEPS_PER_TURN,
            p99_delay_ms=median * math.exp(2.326 * SIGMA) * 1e3,
        ),
        skipped=skipped,
        failed=failed,
        results=results,
    )
    return finish(report, clock)
