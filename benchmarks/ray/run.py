"""The Ray benchmark's run: one local Ray instance, each part on a runtime of its own, the report."""

from __future__ import annotations

import asyncio
import platform
import sqlite3
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pydantic
import ray

import repertory
from benchmarks.harness.local_ray import local_ray
from benchmarks.harness.report import Clock, finish, mode_of
from benchmarks.ray.crash import host_crash
from benchmarks.ray.creations import creations
from benchmarks.ray.events import event_latency
from benchmarks.ray.host import start_runtime
from benchmarks.ray.memory import host_memory
from benchmarks.ray.overhead import load, turn_overhead
from benchmarks.ray.report import TARGETS, Part, RayReport, TurnOverhead
from repertory.tree.runtime import Runtime

__all__ = ["PARTS", "SIZES", "measure"]

PARTS = ("overhead", "load", "create", "memory", "events", "crash")
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
P = TypeVar("P", bound=Part)


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _versions() -> dict[str, str]:
    return {
        "repertory": repertory.__version__,
        "ray": ray.__version__,
        "pydantic": pydantic.VERSION,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
    }


async def _part(folder: str, name: str, fn: Callable[[Runtime], Awaitable[P]], backend: str = "ray") -> P:
    _say(f"  {name} ({backend}) ...")
    t0 = time.perf_counter()
    rt = await start_runtime(folder, f"{name}-{backend}.db", backend=backend)
    try:
        out = await fn(rt)
    finally:
        await rt.close()
    out.part_seconds = round(time.perf_counter() - t0, 1)
    return out


async def _run(mode: str, only: set[str] | None) -> dict[str, Any]:
    size = SIZES[mode]

    def want(part: str) -> bool:
        return only is None or part in only

    parts: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="repertory-ray-bench-") as folder:
        if want("overhead"):

            def overhead(rt: Runtime) -> Awaitable[Any]:
                return turn_overhead(rt, size["overhead_sessions"], size["overhead_rounds"])

            parts["turn_overhead"] = TurnOverhead(
                local=await _part(folder, "overhead", overhead, "local"),
                ray=await _part(folder, "overhead", overhead, "ray"),
            )
        if want("load"):
            parts["load"] = await _part(folder, "load", lambda rt: load(rt, size["load_sessions"], size["load_turns"]))
            parts["load_profile"] = await _part(
                folder, "profile", lambda rt: load(rt, size["profile_sessions"], size["load_turns"], profile=True)
            )
        if want("create"):
            parts["creations"] = await _part(
                folder,
                "create",
                lambda rt: creations(
                    rt,
                    size["create_per_call"],
                    size["create_batched"],
                    size["dedicated_actors"],
                    size["dedicated_sessions"],
                ),
            )
        if want("memory"):
            parts["memory"] = await _part(folder, "memory", lambda rt: host_memory(rt, size["memory_sessions"]))
        if want("events"):
            parts["event_latency"] = await _part(
                folder, "events", lambda rt: event_latency(rt, size["event_turns"], size["event_streams"])
            )
        if want("crash"):
            parts["host_crash"] = await _part(folder, "crash", lambda rt: host_crash(rt, size["crash_sessions"]))
    return parts


def measure(quick: bool, only: set[str] | None = None) -> RayReport:
    """Start a local Ray, measure the parts in ``only`` (all when ``None``), stop it; the report."""
    mode = mode_of(quick)
    clock = Clock.start("ray", mode)
    with local_ray():
        parts = asyncio.run(_run(mode, only))
    report = RayReport(
        **clock.frame(),
        backend="ray (local instance started by this script, one node) vs local where stated",
        store="SQLite file (WAL), a fresh one per part in a temporary folder",
        durability="normal (WAL + synchronous=NORMAL: survives a process crash, may lose the last commits "
        "on power loss)",
        hosts=1,
        model="ScriptedModel, zero delay, one text reply per request (one model step per turn)",
        versions=_versions(),
        sizes=SIZES[mode],
        targets=TARGETS,
        out_of_scope=["node hard failure to sessions served elsewhere (multi-node): not measured by this script"],
        **parts,
    )
    return finish(report, clock)
