"""Recovery benchmark: 10,000 suspended and 100 running sessions, SIGKILL; how long until all is well?

Run ``python -m benchmarks.recovery [--quick] [--out PATH]``. It prints a table and writes
``benchmarks/results/recovery.json``. Nothing here asserts a speed (DESIGN.md, rule 8).
The target read against: under 5 s from the new runtime's start until every running run is
re-driven to completion and every suspended session has answered its approval or resume.

1. A workload process (``--child workload``) opens a runtime on a fresh SQLite file (WAL,
   durability normal) and brings 10,000 sessions (``--quick``: 100) to ``suspended``: half wait
   for an approval of a ``requires_approval`` tool, half for the answer to a tool that called
   ``suspend()``. Then 100 sessions (``--quick``: 5) start a turn whose model calls an idempotent
   tool that never returns in that process. Once all 100 are inside the tool, the workload writes
   its manifest (session ids, turn ids, tokens: what the approvers would hold) and says so.
2. This script SIGKILLs it: no shutdown, no last commit. The store's run and turn counts are read.
3. A fresh process (``--child recover``) times, from just before ``Runtime.start`` on the same
   file: the start (which finds the open turns and re-drives them), each running turn's result,
   and 10,000 approvals/resumes sent at once (at most 500 in flight) until each has returned the
   run's next rest (``done``: the model's zero-delay reply after the decision). In that process the
   tool returns at once, so a re-driven run finishes; it is idempotent, so it is run again.
4. The store is read again: every run must be ``done`` and no turn open.
5. To tell restarting apart from the work the answers cause, a copy of the store taken at the kill
   is opened by another fresh process (``--child probe``), which times ``Runtime.start`` and
   ``metadata()`` of every suspended session (its actor activated from the store, status read)
   without deciding anything.
6. Another copy is recovered as in 3 by a process that first calls ``tune_gc()`` (rarer cyclic
   collections, ``repertory.runtime.gc_tuning``): about half the CPU of 10,000 decisions at once
   was the collector scanning the resident sessions.
"""

from __future__ import annotations

import argparse
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

from benchmarks._suite import RESULTS_DIR, dist_ms, finish, progress, row, start_report, suite_entry, write_report
from repertory import Agent, Runtime, suspend, tool
from repertory.core.messages import ModelMessage
from repertory.core.model import ToolSpec
from repertory.runtime.gc_tuning import tune_gc
from repertory.testing import ScriptedModel

__all__ = ["main", "measure", "run_suite"]

NAME = "recovery"
ROOT = Path(__file__).resolve().parent.parent
SIZES = {"full": (10_000, 100), "quick": (100, 5)}
TARGET_S = 5.0
IN_FLIGHT = 500
BATCH = 500
SETUP_LIMIT_S = 900.0
RECOVER_LIMIT_S = 600.0
_USAGE = {"input_tokens": 20, "output_tokens": 5}


class _Tool:
    """Whether ``long_job`` hangs (only in the workload process) and how often it was entered."""

    hang = False
    entered = 0
    expected = 0
    all_inside: asyncio.Event | None = None


@tool(idempotent=True)
async def long_job(n: int) -> str:
    """A job that outlives the workload process (it is killed inside it); instant after the restart."""
    _Tool.entered += 1
    if _Tool.hang:
        if _Tool.all_inside is not None and _Tool.entered >= _Tool.expected:
            _Tool.all_inside.set()
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
        return {"text": "done", "usage": _USAGE}
    prompt = next(m.text for m in messages if m.role == "user")
    name, key = ("deploy", "target") if prompt.startswith("deploy") else ("ask", "question")
    return {"tool": name, "args": {key: prompt}, "usage": _USAGE}


def _worker(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    if any(m.role == "tool" for m in messages):
        return {"text": "done", "usage": _USAGE}
    return {"tool": "long_job", "args": {"n": len(messages)}, "usage": _USAGE}


def _agents() -> dict[str, Agent]:
    return {
        "approver": Agent(name="approver", model=ScriptedModel(_approver), tools=[deploy, ask]),
        "worker": Agent(name="worker", model=ScriptedModel(_worker), tools=[long_job]),
    }


async def _workload(db: Path, suspended: int, running: int, manifest: Path) -> None:
    """Phase 1, in its own process: suspend ``suspended`` sessions, leave ``running`` turns in flight."""
    _Tool.hang, _Tool.expected, _Tool.all_inside = True, running, asyncio.Event()
    rt = await Runtime.start(store=f"sqlite:///{db}", agents=_agents(), idle_timeout=3600.0)

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
        await _Tool.all_inside.wait()
    tmp = manifest.with_suffix(".tmp")
    tmp.write_text(json.dumps({"suspended": waiting, "running": in_flight}))
    os.replace(tmp, manifest)  # the parent polls for this file: it appears whole
    await asyncio.Event().wait()  # until SIGKILL


async def _recover(db: Path, manifest: Path) -> dict[str, Any]:
    """Phase 3, in a fresh process: start a runtime on the store, wait for re-drives, answer everyone."""
    plan = json.loads(manifest.read_text())
    gate = asyncio.Semaphore(IN_FLIGHT)
    redriven: list[float] = []
    answered: list[float] = []
    answer_latency: list[float] = []
    t0 = time.perf_counter()
    rt = await Runtime.start(store=f"sqlite:///{db}", agents=_agents(), idle_timeout=3600.0)
    startup = time.perf_counter() - t0

    async def wait_turn(item: dict[str, str], advance: Any) -> None:
        h = await rt.session(item["session_id"])
        result = await h.get_turn(item["submission_id"]).result()
        if result.status != "done":
            raise RuntimeError(f"re-driven run ended {result.status}")
        redriven.append(time.perf_counter() - t0)
        advance(1)

    async def answer(item: dict[str, str], advance: Any) -> None:
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
    return {
        "runtime_start_seconds": startup,
        "running_redriven_seconds": max(redriven, default=0.0),
        "first_answer_seconds": min(answered, default=0.0),
        "all_answered_seconds": max(answered, default=0.0),
        "total_seconds": everything,
        "answers_per_s": len(answered) / (max(answered) - startup) if answered else None,
        "answer_latency": dist_ms(answer_latency),
        "tool_reruns_after_restart": _Tool.entered,
        "open_turns_after": open_turns,
    }


async def _probe(db: Path, manifest: Path) -> dict[str, Any]:
    """Phase 5, in a fresh process on a copy of the killed store: is every suspended session reachable?"""
    plan = json.loads(manifest.read_text())
    gate = asyncio.Semaphore(IN_FLIGHT)
    statuses: dict[str, int] = {}
    t0 = time.perf_counter()
    rt = await Runtime.start(store=f"sqlite:///{db}", agents=_agents(), idle_timeout=3600.0)
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
    return {"runtime_start_seconds": startup, "all_suspended_reachable_seconds": reachable, "statuses": statuses}


def _counts(db: Path) -> dict[str, dict[str, int]]:
    """Runs and turns by status, read straight from the file (the way an operator would look)."""
    conn = sqlite3.connect(db)
    try:
        return {
            table: dict(conn.execute(f"SELECT status, count(*) FROM {table} GROUP BY status").fetchall())
            for table in ("runs", "turns")
        }
    finally:
        conn.close()


def _copy_store(db: Path, to: Path) -> Path:
    """The database file and its WAL, as the killed process left them (the index file is rebuilt)."""
    to.mkdir()
    for suffix in ("", "-wal"):
        if Path(f"{db}{suffix}").exists():
            shutil.copyfile(f"{db}{suffix}", f"{to / db.name}{suffix}")
    return to / db.name


def _child(role: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "benchmarks.recovery", "--child", role, *args]


def _scenario(suspended: int, running: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="repertory-recovery-") as folder:
        db, manifest, out = Path(folder) / "recovery.db", Path(folder) / "manifest.json", Path(folder) / "out.json"
        t0 = time.perf_counter()
        workload = subprocess.Popen(_child("workload", str(db), str(manifest), str(suspended), str(running)), cwd=ROOT)
        try:
            while not manifest.exists():
                if workload.poll() is not None:
                    raise RuntimeError(f"the workload process exited with {workload.returncode} before it was ready")
                if time.perf_counter() - t0 > SETUP_LIMIT_S:
                    raise RuntimeError(f"the workload was not ready within {SETUP_LIMIT_S:.0f} s")
                time.sleep(0.05)
            setup = time.perf_counter() - t0
        finally:
            os.kill(workload.pid, signal.SIGKILL)  # also on failure: never leave it running
            workload.wait()
        at_kill = _counts(db)
        copy = _copy_store(db, Path(folder) / "probe")
        tuned_copy = _copy_store(db, Path(folder) / "tuned")
        load_before = os.getloadavg()[0]
        subprocess.run(_child("recover", str(db), str(manifest), str(out)), cwd=ROOT, check=True,
                       timeout=RECOVER_LIMIT_S)  # fmt: skip
        result: dict[str, Any] = json.loads(out.read_text())
        subprocess.run(_child("probe", str(copy), str(manifest), str(out)), cwd=ROOT, check=True,
                       timeout=RECOVER_LIMIT_S)  # fmt: skip
        result["probe_without_answers"] = json.loads(out.read_text())
        subprocess.run(_child("recover-tuned", str(tuned_copy), str(manifest), str(out)), cwd=ROOT, check=True,
                       timeout=RECOVER_LIMIT_S)  # fmt: skip
        result["with_tune_gc"] = json.loads(out.read_text())
        return {
            "suspended": suspended,
            "running": running,
            "setup_seconds": setup,
            "workload_exit": workload.returncode,
            "at_kill": at_kill,
            **result,
            "after": _counts(db),
            "load_average_before_after": [load_before, os.getloadavg()[0]],
        }


def _summary(r: dict[str, Any]) -> list[dict[str, Any]]:
    shape = f"{r['suspended']:,} suspended + {r['running']} running, SIGKILL"
    lat, probe, tuned = r["answer_latency"], r["probe_without_answers"], r["with_tune_gc"]
    return [
        row(
            f"recovery ({shape}): every running run re-driven and every suspended one answered",
            r["total_seconds"],
            "s",
            TARGET_S,
            note=f"Runtime.start {r['runtime_start_seconds']:.2f} s; running done after "
            f"{r['running_redriven_seconds']:.2f} s; answers {r['answers_per_s'] or 0:,.0f}/s",
        ),
        row(
            f"recovery ({shape}): the same, the recovering process calling tune_gc()",
            tuned["total_seconds"],
            "s",
            TARGET_S,
            note=f"on a copy of the killed store; running done after {tuned['running_redriven_seconds']:.2f} s; "
            f"answers {tuned['answers_per_s'] or 0:,.0f}/s",
        ),
        row(
            f"recovery ({shape}): every suspended session reachable (metadata, no decision)",
            probe["all_suspended_reachable_seconds"],
            "s",
            note=f"on a copy of the killed store; Runtime.start {probe['runtime_start_seconds']:.2f} s; "
            f"statuses {probe['statuses']}",
        ),
        row(
            f"recovery ({shape}): every running run re-driven to completion",
            r["running_redriven_seconds"],
            "s",
            note=f"open turns after: {r['open_turns_after']}; tool re-runs after the restart: "
            f"{r['tool_reruns_after_restart']}",
        ),
        row(
            f"recovery ({shape}): one approval/resume answered, p50",
            lat.get("p50_ms"),
            "ms",
            note=f"p99 {lat.get('p99_ms', 0):,.0f} ms with up to {IN_FLIGHT} in flight; first answer after "
            f"{r['first_answer_seconds']:.2f} s",
        ),
    ]


def render(report: dict[str, Any]) -> str:
    """The lines printed after a run."""
    r = report["result"]
    return "\n".join(
        [
            f"recovery ({report['mode']}): {r['suspended']:,} suspended + {r['running']} running sessions, "
            f"SQLite WAL durability normal; set-up {r['setup_seconds']:.1f} s",
            f"  at kill: runs {r['at_kill']['runs']}, turns {r['at_kill']['turns']}",
            f"  after:   runs {r['after']['runs']}, turns {r['after']['turns']}",
            *(f"  {s['figure']}: {s['value']:,.2f} {s['unit']} ({s['note']})" for s in report["summary"]),
        ]
    )


def measure(quick: bool) -> dict[str, Any]:
    """Set up, kill, recover; prints the table and returns the report."""
    mode = "quick" if quick else "full"
    started = time.perf_counter()
    report = start_report(NAME, mode, store="SQLite file (WAL), durability normal", target_seconds=TARGET_S,
                          model="ScriptedModel step functions, zero delay")  # fmt: skip
    report["result"] = _scenario(*SIZES[mode])
    report["summary"] = _summary(report["result"])
    finish(report, started)
    print(render(report))
    return report


run_suite = suite_entry(NAME, measure)


def main(argv: list[str] | None = None) -> None:
    """Parse arguments; run the scenario, or one of its two child processes."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.recovery", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 suspended + 5 running (seconds)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / f"{NAME}.json", help="JSON report path")
    parser.add_argument("--child", choices=("workload", "recover", "recover-tuned", "probe"), help=argparse.SUPPRESS)
    parser.add_argument("child_args", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child == "workload":
        db, manifest, suspended, running = args.child_args
        asyncio.run(_workload(Path(db), int(suspended), int(running), Path(manifest)))
    elif args.child in ("recover", "recover-tuned", "probe"):
        db, manifest, out = args.child_args
        if args.child == "recover-tuned":
            tune_gc()  # what a process holding 10,000 sessions should do (repertory.runtime.gc_tuning)
        phase = _probe if args.child == "probe" else _recover
        Path(out).write_text(json.dumps(asyncio.run(phase(Path(db), Path(manifest)))))
    else:
        print(f"wrote {write_report(measure(args.quick), args.out)}")


if __name__ == "__main__":
    main()
