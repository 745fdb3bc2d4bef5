"""The recovery scenario's child processes: the workload that is killed, the recovery, the probe.

Each runs in a fresh interpreter (``python -m benchmarks.recovery --child ...``), so the recovering
process starts as cold as a restarted server would.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.harness.stats import dist_ms
from benchmarks.harness.timing import progress
from benchmarks.recovery.report import IN_FLIGHT, Probe, Recovered
from repertory import Agent, Runtime, suspend, tool
from repertory.core.messages import ModelMessage
from repertory.core.model import ToolSpec
from repertory.testing import ScriptedModel

__all__ = ["BATCH", "agents", "probe", "recover", "workload"]

BATCH = 500
USAGE = {"input_tokens": 20, "output_tokens": 5}


class LongJob:
    """Whether ``long_job`` hangs (only in the workload process) and how often it was entered."""

    hang = False
    entered = 0
    expected = 0
    all_inside: asyncio.Event | None = None


@tool(idempotent=True)
async def long_job(n: int) -> str:
    """A job that outlives the workload process (it is killed inside it); instant after the restart."""
    LongJob.entered += 1
    if LongJob.hang:
        if LongJob.all_inside is not None and LongJob.entered >= LongJob.expected:
            LongJob.all_inside.set()
        await asyncio.Event().wait()
    return f"job {n} done"


@tool(requires_approval=True)
async def deploy(target: str) -> str:
    """Deploy something, once a human approved it."""
    return f"deployed {target}"


@tool
async def ask(question: str) -> str:
    """Ask a human and wait for the answer."""
    suspend(reason="needs an answer", payload={"question": question})


def _approver(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    if any(m.role == "assistant" for m in messages):
        return {"text": "done", "usage": USAGE}
    prompt = next(m.text for m in messages if m.role == "user")
    name, key = ("deploy", "target") if prompt.startswith("deploy") else ("ask", "question")
    return {"tool": name, "args": {key: prompt}, "usage": USAGE}


def _worker(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    if any(m.role == "tool" for m in messages):
        return {"text": "done", "usage": USAGE}
    return {"tool": "long_job", "args": {"n": len(messages)}, "usage": USAGE}


def agents() -> dict[str, Agent]:
    """The two agents: one that waits for a human, one whose tool outlives the killed process."""
    return {
        "approver": Agent(name="approver", model=ScriptedModel(_approver), tools=[deploy, ask]),
        "worker": Agent(name="worker", model=ScriptedModel(_worker), tools=[long_job]),
    }


async def workload(db: Path, suspended: int, running: int, manifest: Path) -> None:
    """Phase 1: suspend ``suspended`` sessions, leave ``running`` turns in flight, then wait for SIGKILL."""
    LongJob.hang, LongJob.expected, LongJob.all_inside = True, running, asyncio.Event()
    rt = await Runtime.start(store=f"sqlite:///{db}", agents=agents(), idle_timeout=3600.0)

    async def one(i: int) -> dict[str, str]:
        h = await rt.create_session(agent="approver")
        kind = "approval" if i % 2 == 0 else "resume"
        result = await h.run(f"{'deploy' if kind == 'approval' else 'ask'} {i}")
        if result.status != "suspended" or result.state.suspended_on is None:
            raise RuntimeError(f"session {i} ended {result.status}, not suspended")
        return {"session_id": h.id, "kind": kind, "token": result.state.suspended_on.token}

    waiting: list[dict[str, str]] = []
    with progress("recovery: suspending sessions", suspended) as advance:
        for start in range(0, suspended, BATCH):
            waiting += await asyncio.gather(*(one(i) for i in range(start, min(suspended, start + BATCH))))
            advance(min(BATCH, suspended - start))
    in_flight = []
    for i in range(running):
        h = await rt.create_session(agent="worker")
        turn = await h.send(f"job {i}")
        in_flight.append({"session_id": h.id, "submission_id": turn.submission_id})
    if running:
        await LongJob.all_inside.wait()
    tmp = manifest.with_suffix(".tmp")
    tmp.write_text(json.dumps({"suspended": waiting, "running": in_flight}))
    os.replace(tmp, manifest)  # the parent polls for this file: it appears whole
    await asyncio.Event().wait()  # until SIGKILL


async def recover(db: Path, manifest: Path) -> Recovered:
    """Phase 3: start a runtime on the store, wait for the re-drives, answer everyone at once."""
    plan = json.loads(manifest.read_text())
    gate = asyncio.Semaphore(IN_FLIGHT)
    redriven: list[float] = []
    answered: list[float] = []
    answer_latency: list[float] = []
    t0 = time.perf_counter()
    rt = await Runtime.start(store=f"sqlite:///{db}", agents=agents(), idle_timeout=3600.0)
    startup = time.perf_counter() - t0

    async def wait_turn(item: dict[str, str], advance: Callable[[int], None]) -> None:
        h = await rt.session(item["session_id"])
        result = await h.get_turn(item["submission_id"]).result()
        if result.status != "done":
            raise RuntimeError(f"re-driven run ended {result.status}")
        redriven.append(time.perf_counter() - t0)
        advance(1)

    async def answer(item: dict[str, str], advance: Callable[[int], None]) -> None:
        async with gate:
            a0 = time.perf_counter()
            h = await rt.session(item["session_id"])
            if item["kind"] == "approval":
                result = await h.approve(item["token"], {"by": "benchmark"})
            else:
                result = await h.resume(item["token"], "yes, go ahead")
            now = time.perf_counter()
        if result.status != "done":
            raise RuntimeError(f"answered run ended {result.status}")
        answer_latency.append(now - a0)
        answered.append(now - t0)
        advance(1)

    try:
        total = len(plan["running"]) + len(plan["suspended"])
        with progress("recovery: re-driven and answered", total) as advance:
            await asyncio.gather(
                *(wait_turn(item, advance) for item in plan["running"]),
                *(answer(item, advance) for item in plan["suspended"]),
            )
        everything = time.perf_counter() - t0
        open_turns = len(await rt.store.list_open_turns())
    finally:
        await rt.close()
    return Recovered(
        runtime_start_seconds=startup,
        running_redriven_seconds=max(redriven, default=0.0),
        first_answer_seconds=min(answered, default=0.0),
        all_answered_seconds=max(answered, default=0.0),
        total_seconds=everything,
        answers_per_s=len(answered) / (max(answered) - startup) if answered else None,
        answer_latency=dist_ms(answer_latency),
        tool_reruns_after_restart=LongJob.entered,
        open_turns_after=open_turns,
    )


async def probe(db: Path, manifest: Path) -> Probe:
    """Phase 5, on a copy of the killed store: is every suspended session reachable (no decision)?"""
    plan = json.loads(manifest.read_text())
    gate = asyncio.Semaphore(IN_FLIGHT)
    statuses: dict[str, int] = {}
    t0 = time.perf_counter()
    rt = await Runtime.start(store=f"sqlite:///{db}", agents=agents(), idle_timeout=3600.0)
    startup = time.perf_counter() - t0

    async def look(item: dict[str, str]) -> None:
        async with gate:
            status = (await (await rt.session(item["session_id"])).metadata()).status
        statuses[status] = statuses.get(status, 0) + 1

    try:
        await asyncio.gather(*(look(item) for item in plan["suspended"]))
        reachable = time.perf_counter() - t0
    finally:
        await rt.close()
    return Probe(runtime_start_seconds=startup, all_suspended_reachable_seconds=reachable, statuses=statuses)
