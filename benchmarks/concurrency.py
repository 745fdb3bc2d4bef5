"""Concurrency benchmark: N sessions at once (10 to 10,000) against a model with log-normal latency.

Run ``python -m benchmarks.concurrency [--quick] [--no-ray] [--out PATH]``. It prints a table and
writes ``benchmarks/results/concurrency.json``. Nothing here asserts a speed (DESIGN.md, rule 8).

Real model latency is not a constant: most replies come quickly, a few take many times longer, and
a runtime must keep the fast ones flowing while slow ones wait. So every model request sleeps a
log-normal time (median 100 ms, sigma 0.5: p99 ~320 ms; ``--quick`` median 20 ms) before replying.
The delay is a pure function of (turn prompt, step), so the client can add up, on either backend,
exactly how long the model kept each turn and each session waiting.

Per N (10, 100, 1,000, 10,000; ``--quick`` 10 and 50), on a fresh SQLite file (WAL, durability
normal): N sessions are created, then all N run 3 turns each (``await handle.run(...)`` one after
another), all launched at once. A turn is two model steps: a call to a default (non-idempotent)
``@tool`` and a final reply. Reported: turns/s and steps/s over the wall time, turn latency p50 /
p99, the overhead (turn latency minus its model delays) p50 / p99, and the ideal wall time (the
slowest session's model delays alone). The local backend always runs; Ray (a local instance this
script starts and stops, two shared hosts) too, unless ``--quick`` or ``--no-ray``. A run that
exceeds its time limit is reported as not finished.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from benchmarks._suite import RESULTS_DIR, dist_ms, finish, progress, row, start_report, suite_entry, write_report
from repertory import Agent, Runtime, tool
from repertory.core.messages import ModelMessage
from repertory.core.model import ToolSpec
from repertory.testing import ScriptedModel
from repertory.tree.runtime import Backend

__all__ = ["LogNormalScript", "main", "measure", "run_suite"]

NAME = "concurrency"
AGENT = "assistant"
LADDER = {"full": (10, 100, 1_000, 10_000), "quick": (10, 50)}
TURNS = {"full": 3, "quick": 2}
MEDIAN_DELAY_S = {"full": 0.1, "quick": 0.02}
SIGMA = 0.5
STEPS_PER_TURN = 2
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


def _agents(script: LogNormalScript) -> dict[str, Agent]:
    return {AGENT: Agent(name=AGENT, model=ScriptedModel(script), tools=[lookup], max_steps=STEPS_PER_TURN)}


async def _one_n(backend: Backend, n: int, turns: int, script: LogNormalScript, folder: str) -> dict[str, Any]:
    url = f"sqlite:///{os.path.join(folder, f'{backend}-{n}.db')}"
    options: dict[str, Any] = {"hosts": 2, "keep_hosts": False} if backend == "ray" else {}
    rt = await Runtime.start(store=url, backend=backend, agents=_agents(script), idle_timeout=3600.0, **options)
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

        async def session(i: int, advance: Any) -> None:
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
        with progress(f"concurrency: {backend}, {n:,} sessions, turns", n * turns) as advance:
            try:
                await asyncio.wait_for(asyncio.gather(*(session(i, advance) for i in range(n))), TIME_LIMIT_S)
            except TimeoutError:
                finished = False
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
    finally:
        await rt.close()
    done = len(latency)
    return {
        "backend": backend,
        "sessions": n,
        "turns_per_session": turns,
        "finished": finished,
        "time_limit_s": TIME_LIMIT_S,
        "turns_done": done,
        "failures": failures,
        "create_seconds": create_s,
        "wall_seconds": wall,
        "ideal_wall_seconds": ideal,
        "turns_per_s": done / wall,
        "steps_per_s": done * STEPS_PER_TURN / wall,
        "latency": dist_ms(latency),
        "overhead": dist_ms(overhead),
        "client_process_cpu_seconds": cpu,
        "load_average_before_after": [load_before, os.getloadavg()[0]],
    }


async def _ladder(backend: Backend, mode: str, folder: str) -> list[dict[str, Any]]:
    script = LogNormalScript(MEDIAN_DELAY_S[mode])
    return [await _one_n(backend, n, TURNS[mode], script, folder) for n in LADDER[mode]]


def _ray_ladder(mode: str, folder: str) -> list[dict[str, Any]]:
    import ray

    if ray.is_initialized():
        raise RuntimeError("Ray is already initialised in this process; this benchmark starts its own local instance")
    if __name__ != "__main__":
        # The hosts unpickle the agents; they need not be able to import ``benchmarks``.
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(address="local", num_cpus=os.cpu_count() or 2, include_dashboard=False, log_to_driver=False)
    try:
        return asyncio.run(_ladder("ray", mode, folder))
    finally:
        ray.shutdown()  # the instance started above, nothing else


def _summary(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for r in results:
        shape = f"{r['backend']}, {r['sessions']:,} sessions x {r['turns_per_session']} turns"
        if not r["finished"]:
            rows.append(
                row(f"throughput, {shape}", None, "turns/s", note=f"did not finish in {r['time_limit_s']:.0f} s")
            )
            continue
        lat, ovh = r["latency"], r["overhead"]
        rows.append(
            row(
                f"throughput, {shape}",
                r["turns_per_s"],
                "turns/s",
                note=f"{r['steps_per_s']:,.0f} steps/s; turn latency p50 {lat['p50_ms']:,.0f} / p99 "
                f"{lat['p99_ms']:,.0f} ms; overhead p50 {ovh['p50_ms']:,.1f} / p99 {ovh['p99_ms']:,.0f} ms; "
                f"wall {r['wall_seconds']:.1f} s (model alone {r['ideal_wall_seconds']:.1f} s)",
            )
        )
    return rows


def render(report: dict[str, Any]) -> str:
    """The table printed after a run."""
    lines = [
        f"concurrency ({report['mode']}): log-normal model delay median {report['model']['median_delay_ms']:.0f} ms, "
        f"sigma {SIGMA}; {STEPS_PER_TURN} steps per turn; SQLite WAL durability normal",
        f"{'backend':<7} {'sessions':>8} {'wall s':>7} {'ideal s':>7} {'turns/s':>8} {'steps/s':>8} "
        f"{'lat p50':>8} {'lat p99':>8} {'ovh p50':>8} {'ovh p99':>8} {'failures':>8}",
    ]
    for r in report["results"]:
        if not r["finished"]:
            lines.append(f"{r['backend']:<7} {r['sessions']:>8,} did not finish within {r['time_limit_s']:.0f} s")
            continue
        lat, ovh = r["latency"], r["overhead"]
        lines.append(
            f"{r['backend']:<7} {r['sessions']:>8,} {r['wall_seconds']:>7.1f} {r['ideal_wall_seconds']:>7.2f} "
            f"{r['turns_per_s']:>8,.0f} {r['steps_per_s']:>8,.0f} {lat['p50_ms']:>8,.0f} {lat['p99_ms']:>8,.0f} "
            f"{ovh['p50_ms']:>8,.1f} {ovh['p99_ms']:>8,.0f} {sum(r['failures'].values()):>8}"
        )
    lines += [f"{name}: not measured: {why}" for name, why in report["skipped"].items()]
    lines += [f"{name}: FAILED: {why}" for name, why in report.get("failed", {}).items()]
    return "\n".join(lines)


def measure(quick: bool, with_ray: bool = True) -> dict[str, Any]:
    """Local ladder, then the Ray ladder; prints the table and returns the report."""
    mode = "quick" if quick else "full"
    started = time.perf_counter()
    median = MEDIAN_DELAY_S[mode]
    report = start_report(
        NAME,
        mode,
        store="SQLite file (WAL), durability normal, a fresh one per N",
        model={"median_delay_ms": median * 1e3, "sigma": SIGMA, "steps_per_turn": STEPS_PER_TURN,
               "p99_delay_ms": median * math.exp(2.326 * SIGMA) * 1e3},
        skipped={},
    )  # fmt: skip
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="repertory-concurrency-") as folder:
        results += asyncio.run(_ladder("local", mode, folder))
        if quick or not with_ray:
            why = "quick mode (starting Ray takes ~10 s)" if quick else "--no-ray"
            report["skipped"]["ray"] = why
        else:
            try:
                results += _ray_ladder(mode, folder)
            except Exception as exc:  # keep the local figures; the suite still reports the failure
                report["failed"] = {"ray": f"{type(exc).__name__}: {exc}"}
                traceback.print_exc()
    report["results"] = results
    report["summary"] = _summary(results) + [
        row(f"throughput, {name}", None, "turns/s", note=f"FAILED: {why}")
        for name, why in report.get("failed", {}).items()
    ]
    finish(report, started)
    print(render(report))
    return report


run_suite = suite_entry(NAME, measure)


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, measure, print the table and write the JSON report."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.concurrency", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="10 and 50 sessions, local only (seconds)")
    parser.add_argument("--no-ray", action="store_true", help="the local backend only")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / f"{NAME}.json", help="JSON report path")
    args = parser.parse_args(argv)
    print(f"wrote {write_report(measure(args.quick, not args.no_ray), args.out)}")


if __name__ == "__main__":
    main()
