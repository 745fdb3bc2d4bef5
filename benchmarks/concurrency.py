"""Concurrency: N sessions at once (10 to 10,000) against a model with log-normal latency, local and Ray.

Real model latency is not a constant: most replies come quickly, a few take many times longer, and
a runtime must keep the fast ones flowing while slow ones wait. So every model request sleeps a
log-normal time (median 100 ms, sigma 0.5: p99 ~320 ms; ``--quick`` median 20 ms) before replying
(``benchmarks.harness.lognormal``). The delay is a pure function of (turn prompt, step), so the
client can add up, on either backend, exactly how long the model kept each turn and each session
waiting.

Per N (10, 100, 1,000, 10,000; ``--quick`` 10 and 50), on a fresh SQLite file (WAL, durability
normal): N sessions are created, then all N run 3 turns each (``await handle.run(...)`` one after
another), all launched at once. A turn is two model steps: a call to a default (non-idempotent)
``@tool`` and a final reply. Recorded: turns/s and steps/s over the wall time, every turn's latency,
its overhead (turn latency minus its model delays), the ideal wall time (the slowest session's
model delays alone) and, on the local backend, where the sessions run in this process, the cyclic
collector's passes and seconds by generation over the timed window. The target (issue 21): at
10,000 local sessions x 3 turns of a 100 ms model, a turn's median wait stays under 2 s. The local
backend always runs; Ray (a local instance this benchmark starts and stops, two shared hosts) too,
unless ``--quick`` or ``--no-ray``. A ladder step that exceeds its time limit is reported as not
finished.

``python -m benchmarks.concurrency [--quick] [--no-ray]``.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.command import Options, main
from benchmarks.harness.figures import Figures, Plot, Target, percentile
from benchmarks.harness.gctime import GcTimer
from benchmarks.harness.local_ray import local_ray
from benchmarks.harness.lognormal import AGENT, SIGMA, STEPS_PER_TURN, LogNormalScript, agents
from repertory import Runtime
from repertory.tree.runtime import Backend

LADDER = {"full": (10, 100, 1_000, 10_000), "quick": (10, 50)}
TURNS = {"full": 3, "quick": 2}
MEDIAN_DELAY_S = {"full": 0.1, "quick": 0.02}
TIME_LIMIT_S = 600.0
CREATE_BATCH = 500
TARGET_SHAPE = ("local", 10_000, 3, 0.1)
"""Where the issue-21 target is read: local, 10,000 sessions x 3 turns, median model delay 100 ms."""
THROUGHPUT = Plot("throughput_vs_concurrency.png", "Throughput vs concurrency (log-normal model delay)",
                  "concurrent sessions", "per second")  # fmt: skip
LATENCY = Plot("latency_vs_concurrency.png", "Turn latency vs concurrency (two model steps per turn)",
               "concurrent sessions", "turn latency, ms", log_y=True)  # fmt: skip


async def _one_n(figures: Figures, backend: Backend, n: int, turns: int, median_s: float, folder: Path) -> None:
    script = LogNormalScript(median_s)
    extra: dict[str, Any] = {"hosts": 2, "keep_hosts": False} if backend == "ray" else {}
    rt = await Runtime.start(store=f"sqlite:///{folder / f'{backend}-{n}.db'}", backend=backend,
                             agents=agents(script), idle_timeout=3600.0, **extra)  # fmt: skip
    latency: list[float] = []
    overhead: list[float] = []
    failures: dict[str, int] = {}
    try:
        await (await rt.create_session(agent=AGENT)).run("warm-up")
        t0 = time.perf_counter()
        handles = []
        for start in range(0, n, CREATE_BATCH):
            batch = min(CREATE_BATCH, n - start)
            handles += await asyncio.gather(*(rt.create_session(agent=AGENT) for _ in range(batch)))
        create_s = time.perf_counter() - t0

        async def session(i: int) -> None:
            for t in range(turns):
                prompt = f"session {i} turn {t}"
                t0 = time.perf_counter()
                try:
                    result = await handles[i].run(prompt)
                except Exception as exc:  # measured, not asserted: count it and go on
                    failures[type(exc).__name__] = failures.get(type(exc).__name__, 0) + 1
                    continue
                took = time.perf_counter() - t0
                if result.status != "done" or result.text != "ok":
                    failures[f"status {result.status}"] = failures.get(f"status {result.status}", 0) + 1
                latency.append(took)
                overhead.append(took - sum(script.delay(prompt, s) for s in range(STEPS_PER_TURN)))

        ideal = max(sum(script.delay(f"session {i} turn {t}", s) for t in range(turns) for s in range(STEPS_PER_TURN))
                    for i in range(n))  # fmt: skip
        cpu0, wall0 = time.process_time(), time.perf_counter()
        finished = True
        with GcTimer() as collector:
            try:
                await asyncio.wait_for(asyncio.gather(*(session(i) for i in range(n))), TIME_LIMIT_S)
            except TimeoutError:
                finished = False
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    finally:
        await rt.close()
    shape = f"{backend}, {n:,} sessions x {turns} turns"
    print(f"  {shape}: {len(latency):,} turns in {wall:.1f} s", flush=True)
    if not finished or not latency:
        figures.fact(shape, f"did not finish within {TIME_LIMIT_S:.0f} s ({len(latency):,} turns done)")
        return
    figures.value(f"throughput, {shape}", len(latency) / wall, "turns/s", plot=THROUGHPUT,
                  series=f"{backend}: turns/s", x=n)  # fmt: skip
    figures.value(f"steps/s, {shape}", len(latency) * STEPS_PER_TURN / wall, "steps/s", plot=THROUGHPUT,
                  series=f"{backend}: steps/s", x=n)  # fmt: skip
    target = Target(2.0) if (backend, n, turns, median_s) == TARGET_SHAPE else None
    figures.time(f"turn latency, {shape}", latency, plot=LATENCY, series=f"{backend}: p50", x=n, target=target,
                 note="the issue-21 target: a turn's wait stays near its model's" if target else "")  # fmt: skip
    figures.time(f"turn latency p99, {shape}", percentile(latency, 99), plot=LATENCY, series=f"{backend}: p99", x=n)
    figures.time(f"overhead (turn latency minus its model delays), {shape}", overhead)
    figures.time(f"wall time, {shape}", wall)
    figures.time(f"ideal wall time (the slowest session's model delays), {shape}", ideal)
    figures.time(f"creating the sessions, {shape}", create_s)
    figures.time(f"client process CPU, {shape}", cpu, note="the sessions run here on local, in the hosts on Ray")
    figures.count(f"failed turns, {shape}", sum(failures.values()))
    if failures:
        figures.fact(f"failures, {shape}", str(failures))
    if backend == "local":
        passes, seconds = collector.by_generation, collector.seconds_by_generation
        figures.time(f"cyclic collector, {shape}", sum(seconds), note=f"full {passes[2]} passes {seconds[2]:.2f} s, "
                     f"middle {passes[1]} {seconds[1]:.2f} s, young {passes[0]} {seconds[0]:.2f} s")  # fmt: skip


async def _ladder(figures: Figures, backend: Backend, mode: str, folder: Path) -> None:
    for n in LADDER[mode]:
        await _one_n(figures, backend, n, TURNS[mode], MEDIAN_DELAY_S[mode], folder)


async def scenario(figures: Figures, options: Options) -> None:
    """The local ladder, then the Ray ladder on its own local Ray instance."""
    median = MEDIAN_DELAY_S[options.mode]
    figures.fact("store", "SQLite file (WAL), durability normal, a fresh one per N")
    figures.fact("model", f"log-normal delay, median {median * 1e3:.0f} ms, sigma {SIGMA}, "
                 f"p99 {median * math.exp(2.326 * SIGMA) * 1e3:.0f} ms; {STEPS_PER_TURN} steps per turn")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="repertory-concurrency-") as folder:
        await _ladder(figures, "local", options.mode, Path(folder))
        if options.quick or options.args.no_ray:
            figures.fact("ray", "not measured: " + ("quick mode (starting Ray takes ~10 s)" if options.quick
                                                    else "--no-ray"))  # fmt: skip
            return
        with local_ray():
            await _ladder(figures, "ray", options.mode, Path(folder))


def _args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-ray", action="store_true", help="the local backend only")


if __name__ == "__main__":
    main("concurrency", __doc__, scenario=scenario, add_args=_args)
