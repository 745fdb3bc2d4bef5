"""Recovery: 10,000 suspended and 100 running sessions, SIGKILL; how long until all is well?

The target read against: under 5 s from the new runtime's start until every running run is
re-driven to completion and every suspended session has answered its approval or resume. Each
part runs in a fresh interpreter (``--child ...``), so the recovering process starts as cold as a
restarted server would:

1. A workload process opens a runtime on a fresh SQLite file (WAL, durability normal) and brings
   10,000 sessions (``--quick``: 100) to ``suspended``: half wait for an approval of a
   ``requires_approval`` tool, half for the answer to a tool that called ``suspend()``. Then 100
   sessions (``--quick``: 5) start a turn whose model calls an idempotent tool that never returns
   in that process. Once all are inside the tool, it writes its manifest (session ids, turn ids,
   tokens: what the approvers would hold).
2. It is SIGKILLed: no shutdown, no last commit. The store's runs and turns are counted by status.
3. A fresh process times, from just before ``Runtime.start`` on the same file: the start (which
   finds the open turns and re-drives them), each running turn's result, and 10,000
   approvals/resumes sent at once (at most 500 in flight) until each has returned the run's next
   rest (``done``: the model's zero-delay reply after the decision). There the tool returns at
   once, so a re-driven run finishes; it is idempotent, so it is run again.
4. The store is counted again: every run must be ``done`` and no turn open.
5. To tell restarting apart from the work the answers cause, a copy of the store taken at the kill
   is opened by another fresh process, which times ``Runtime.start`` and ``metadata()`` of every
   suspended session (its actor activated from the store, status read) without deciding anything.
6. Another copy is recovered as in 3 by a process that first calls ``tune_gc()``: about half the
   CPU of 10,000 decisions at once was the collector scanning the resident sessions. The two
   recoveries are read side by side.

``python -m benchmarks.recovery [--quick]``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.children import python_m
from benchmarks.harness.command import Options, main
from benchmarks.harness.figures import Figures, Target
from benchmarks.harness.versions import ROOT
from repertory import Agent, Runtime, suspend, tool
from repertory.core.messages import ModelMessage
from repertory.core.model import ToolSpec
from repertory.runtime.gc_tuning import tune_gc
from repertory.testing import ScriptedModel

SIZES = {"full": (10_000, 100), "quick": (100, 5)}
"""Suspended sessions, running turns."""
BATCH = 500
IN_FLIGHT = 500
USAGE = {"input_tokens": 20, "output_tokens": 5}
SETUP_LIMIT_S = 900.0
RECOVER_LIMIT_S = 600.0


class LongJob:
    """Whether ``long_job`` hangs (only in the workload process) and how often it was entered."""

    hang = False
    entered = 0
    expected = 0
    all_inside = asyncio.Event()


@tool(idempotent=True)
async def long_job(n: int) -> str:
    """A job that outlives the workload process (it is killed inside it); instant after the restart."""
    LongJob.entered += 1
    if LongJob.hang:
        if LongJob.entered >= LongJob.expected:
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


async def _start(db: Path) -> Runtime:
    agents = {
        "approver": Agent(name="approver", model=ScriptedModel(_approver), tools=[deploy, ask]),
        "worker": Agent(name="worker", model=ScriptedModel(_worker), tools=[long_job]),
    }
    return await Runtime.start(store=f"sqlite:///{db}", agents=agents, idle_timeout=3600.0)


async def _workload(db: Path, manifest: Path, suspended: int, running: int) -> None:
    """Suspend ``suspended`` sessions, leave ``running`` turns in flight, write the manifest, wait for SIGKILL."""
    LongJob.hang, LongJob.expected = True, running
    rt = await _start(db)

    async def one(i: int) -> dict[str, str]:
        h = await rt.create_session(agent="approver")
        kind = "approval" if i % 2 == 0 else "resume"
        result = await h.run(f"{'deploy' if kind == 'approval' else 'ask'} {i}")
        if result.status != "suspended" or result.state.suspended_on is None:
            raise RuntimeError(f"session {i} ended {result.status}, not suspended")
        return {"session_id": h.id, "kind": kind, "token": result.state.suspended_on.token}

    waiting: list[dict[str, str]] = []
    for start in range(0, suspended, BATCH):
        waiting += await asyncio.gather(*(one(i) for i in range(start, min(suspended, start + BATCH))))
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


async def _recover(db: Path, manifest: Path) -> dict[str, Any]:
    """Start a runtime on the store, wait for the re-drives, answer everyone at once."""
    plan = json.loads(manifest.read_text())
    gate = asyncio.Semaphore(IN_FLIGHT)
    redriven: list[float] = []
    answered: list[float] = []
    latency: list[float] = []
    t0 = time.perf_counter()
    rt = await _start(db)
    startup = time.perf_counter() - t0

    async def wait_turn(item: dict[str, str]) -> None:
        result = await (await rt.session(item["session_id"])).get_turn(item["submission_id"]).result()
        if result.status != "done":
            raise RuntimeError(f"re-driven run ended {result.status}")
        redriven.append(time.perf_counter() - t0)

    async def answer(item: dict[str, str]) -> None:
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
        latency.append(now - a0)
        answered.append(now - t0)

    try:
        await asyncio.gather(*map(wait_turn, plan["running"]), *map(answer, plan["suspended"]))
        everything = time.perf_counter() - t0
        open_turns = len(await rt.store.list_open_turns())
    finally:
        await rt.close()
    return {
        "start": startup, "redriven": max(redriven, default=0.0), "first": min(answered, default=0.0),
        "all": max(answered, default=0.0), "total": everything, "latency": latency,
        "answers_per_s": len(answered) / (max(answered) - startup) if answered else 0.0,
        "reruns": LongJob.entered, "open_turns": open_turns,
    }  # fmt: skip


async def _probe(db: Path, manifest: Path) -> dict[str, Any]:
    """On a copy of the killed store: is every suspended session reachable (no decision)?"""
    plan = json.loads(manifest.read_text())
    gate = asyncio.Semaphore(IN_FLIGHT)
    statuses: dict[str, int] = {}
    t0 = time.perf_counter()
    rt = await _start(db)
    startup = time.perf_counter() - t0

    async def look(item: dict[str, str]) -> None:
        async with gate:
            status = (await (await rt.session(item["session_id"])).metadata()).status
        statuses[status] = statuses.get(status, 0) + 1

    try:
        await asyncio.gather(*map(look, plan["suspended"]))
        reachable = time.perf_counter() - t0
    finally:
        await rt.close()
    return {"start": startup, "reachable": reachable, "statuses": statuses}


def _child(role: str, args: list[str]) -> None:
    """``--child ROLE DB MANIFEST (SUSPENDED RUNNING | OUT)``: one part, in this fresh interpreter."""
    db, manifest = Path(args[0]), Path(args[1])
    if role == "workload":
        asyncio.run(_workload(db, manifest, int(args[2]), int(args[3])))
        return
    if role == "recover-tuned":
        tune_gc()  # what a process holding 10,000 sessions should do (repertory.runtime.gc_tuning)
    got = asyncio.run(_probe(db, manifest) if role == "probe" else _recover(db, manifest))
    Path(args[2]).write_text(json.dumps(got))


def _counts(figures: Figures, when: str, db: Path) -> None:
    """Runs and turns by status, read straight from the file (the way an operator would look)."""
    with sqlite3.connect(db) as conn:
        for table in ("runs", "turns"):
            for status, n in conn.execute(f"SELECT status, count(*) FROM {table} GROUP BY status").fetchall():
                figures.count(f"{when}: {table} {status}", n)


def _copy_store(db: Path, to: Path) -> Path:
    """The database file and its WAL, as the killed process left them (the index file is rebuilt)."""
    to.mkdir()
    for suffix in ("", "-wal"):
        if Path(f"{db}{suffix}").exists():
            shutil.copyfile(f"{db}{suffix}", f"{to / db.name}{suffix}")
    return to / db.name


def _run_child(role: str, db: Path, manifest: Path, out: Path) -> dict[str, Any]:
    cmd = python_m("benchmarks.recovery", "--child", role, str(db), str(manifest), str(out))
    subprocess.run(cmd, cwd=ROOT, check=True, timeout=RECOVER_LIMIT_S)
    got: dict[str, Any] = json.loads(out.read_text())
    return got


def _recovered(figures: Figures, how: str, got: dict[str, Any], shape: str) -> None:
    figures.time(f"recovery ({shape}): every running run re-driven and every suspended one answered{how}",
                 got["total"], target=Target(5.0), note="from just before Runtime.start")  # fmt: skip
    figures.time(f"Runtime.start on the killed store{how}", got["start"])
    figures.time(f"every running run re-driven to completion{how}", got["redriven"])
    figures.time(f"first answer returned{how}", got["first"])
    figures.time(f"every suspended session answered{how}", got["all"])
    figures.value(f"answers per second{how}", got["answers_per_s"], "answers/s")
    figures.time(f"one approval/resume answered{how}", got["latency"], note=f"up to {IN_FLIGHT} in flight")
    figures.count(f"tool re-runs after the restart{how}", got["reruns"])
    figures.count(f"open turns after{how}", got["open_turns"], target=Target(0))


def scenario(figures: Figures, options: Options) -> None:
    """Set up in one process, SIGKILL it, recover in fresh ones."""
    suspended, running = SIZES[options.mode]
    shape = f"{suspended:,} suspended + {running} running, SIGKILL"
    figures.fact("store", "SQLite file (WAL), durability normal; ScriptedModel step functions, zero delay")
    with tempfile.TemporaryDirectory(prefix="repertory-recovery-") as folder:
        db, manifest, out = Path(folder) / "recovery.db", Path(folder) / "manifest.json", Path(folder) / "out.json"
        t0 = time.perf_counter()
        cmd = python_m(
            "benchmarks.recovery", "--child", "workload", str(db), str(manifest), str(suspended), str(running)
        )
        workload = subprocess.Popen(cmd, cwd=ROOT)
        try:
            while not manifest.exists():  # polling: another process's readiness, nothing here to await
                if workload.poll() is not None:
                    raise RuntimeError(f"the workload process exited with {workload.returncode} before it was ready")
                if time.perf_counter() - t0 > SETUP_LIMIT_S:
                    raise RuntimeError(f"the workload was not ready within {SETUP_LIMIT_S:.0f} s")
                time.sleep(0.05)
            figures.time(f"set-up: {shape.removesuffix(', SIGKILL')} sessions", time.perf_counter() - t0)
        finally:
            os.kill(workload.pid, signal.SIGKILL)  # also on failure: never leave it running
            workload.wait()
        figures.fact("workload exit status", workload.returncode)
        _counts(figures, "at the kill", db)
        probe_db, tuned_db = _copy_store(db, Path(folder) / "probe"), _copy_store(db, Path(folder) / "tuned")
        plain = _run_child("recover", db, manifest, out)
        _recovered(figures, "", plain, shape)
        _counts(figures, "after", db)
        probe = _run_child("probe", probe_db, manifest, out)
        figures.time(f"recovery ({shape}): every suspended session reachable (metadata, no decision)",
                     probe["reachable"], note="on a copy of the killed store")  # fmt: skip
        figures.time("Runtime.start on the killed store, probe", probe["start"])
        figures.fact("statuses the probe read", json.dumps(probe["statuses"]))
        tuned = _run_child("recover-tuned", tuned_db, manifest, out)
        _recovered(figures, ", with tune_gc()", tuned, shape)
        figures.value("everything recovered, defaults / tune_gc()", plain["total"] / tuned["total"], "x",
                      note="the same killed store recovered twice, side by side")  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2], sys.argv[3:])
    else:
        main("recovery", __doc__, scenario=scenario)
