"""The session benchmark's run: each part in a fresh interpreter, the ladder of concurrent runs, the report.

``python -m benchmarks.sessions --child SPEC --result PATH`` is one part (``run_part``); the parent
(``measure``) starts one such child per part, so one part's heap, caches and resident set do not
leak into the next one's figures.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from typing import Any

from benchmarks.harness.children import ChildFailed, run_json
from benchmarks.harness.report import Clock, finish, mode_of
from benchmarks.sessions.anatomy import anatomy
from benchmarks.sessions.concurrent import concurrent
from benchmarks.sessions.creation import creation
from benchmarks.sessions.memory import WARMUP_SESSIONS, memory
from benchmarks.sessions.report import (
    DELAY_S,
    DURABILITY,
    TURNS,
    AnatomyPart,
    Concurrency,
    ConcurrentPart,
    CreationPart,
    MemoryPart,
    NotFinished,
    Part,
    SessionsReport,
)

__all__ = ["measure", "run_part"]

PARTS: dict[str, type[Part]] = {
    "memory": MemoryPart,
    "create": CreationPart,
    "concurrent": ConcurrentPart,
    "anatomy": AnatomyPart,
}


def run_part(spec: dict[str, Any], result_path: str) -> None:
    """In the child: run the part ``spec`` names in a fresh folder and write its figures to ``result_path``."""
    folder = tempfile.mkdtemp(prefix="repertory-sessions-db-", dir=os.path.dirname(result_path))
    load_before = list(os.getloadavg())  # the machine may be shared: a busy one slows every figure
    result: Part
    try:
        part = spec["part"]
        if part == "memory":
            result = asyncio.run(memory(folder, spec["n"], spec["traced"], spec.get("warmup", WARMUP_SESSIONS)))
        elif part == "create":
            result = asyncio.run(creation(folder, spec["n"], spec["rounds"], spec["full_n"]))
        elif part == "concurrent":
            result = asyncio.run(concurrent(folder, spec["n"], spec["turns"], spec["delay"], spec["profile"]))
        elif part == "anatomy":
            result = asyncio.run(anatomy(folder, spec["sessions"], spec["long_turns"], spec.get("full_sessions", 50)))
        else:
            raise SystemExit(f"unknown part {part!r}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    result.load_average_before_after = [load_before, list(os.getloadavg())]
    with open(result_path, "w") as f:
        f.write(result.model_dump_json())


def _child(spec: dict[str, Any], timeout: float) -> Any:
    """One part in a fresh interpreter: its figures, or why it did not finish."""
    try:
        data, seconds = run_json("benchmarks.sessions", ["--child", json.dumps(spec)], timeout)
    except ChildFailed as exc:
        return NotFinished(spec=spec, why=str(exc))
    result = PARTS[spec["part"]].model_validate(data)
    result.child_seconds = seconds
    return result


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def measure(quick: bool, smoke: bool = False) -> SessionsReport:
    """Every part, each in its own interpreter; the report with its summary.

    ``smoke`` (the suite's ``--quick``) shrinks every part to a fraction of a second: it proves
    the code runs, its figures mean nothing.
    """
    clock = Clock.start("sessions", mode_of(quick, smoke))
    n_mem = 100 if smoke else 1_000 if quick else 10_000
    n_create = 200 if smoke else 2_000 if quick else 10_000
    ladder = [20] if smoke else [100, 500] if quick else [100, 1_000, 10_000]
    n_profile = 20 if smoke else 200 if quick else 1_000
    turns, delay = (2, 0.02) if smoke else (TURNS, DELAY_S)
    small: dict[str, Any] = {"warmup": 20} if smoke else {}
    _say(f"1-2. memory, {n_mem:,} sessions (untraced, for RSS)")
    memory_rss = _child({"part": "memory", "n": n_mem, "traced": False, **small}, 1800)
    _say(f"1-2. memory, {n_mem:,} sessions (tracemalloc)")
    if smoke:  # tracemalloc's snapshots take seconds whatever the number of sessions
        memory_traced: Any = NotFinished(spec={"part": "memory"}, why="skipped in smoke mode")
    else:
        memory_traced = _child({"part": "memory", "n": n_mem, "traced": True}, 2400)
    _say(f"3. creation, {n_create:,} per round")
    creation_part = _child(
        {"part": "create", "n": n_create, "rounds": 1 if smoke else 3, "full_n": 20 if smoke else 2_000}, 1800
    )
    _say("5. anatomy of a turn")
    anatomy_part = _child(
        {
            "part": "anatomy",
            "sessions": 10 if smoke else 100 if quick else 200,
            "long_turns": 20 if smoke else 100 if quick else 400,
            "full_sessions": 5 if smoke else 50,
        },
        1800,
    )
    runs: list[ConcurrentPart | NotFinished] = []
    for n in ladder:
        _say(f"4. {n:,} concurrent sessions x {turns} turns")
        limit = 600 if quick else 1800
        result = _child({"part": "concurrent", "n": n, "turns": turns, "delay": delay, "profile": False}, limit)
        runs.append(result)
        while isinstance(result, NotFinished) and n > ladder[0]:
            n //= 2
            _say(f"   did not finish ({result.why[:200]}); trying {n:,}")
            result = _child({"part": "concurrent", "n": n, "turns": turns, "delay": delay, "profile": False}, limit)
            runs.append(result)
        if isinstance(result, NotFinished):
            break
    finished = [r.sessions for r in runs if isinstance(r, ConcurrentPart)]
    _say(f"5. cProfile of {n_profile:,} concurrent sessions")
    profile_run = _child({"part": "concurrent", "n": n_profile, "turns": turns, "delay": delay, "profile": True}, 1800)
    report = SessionsReport(
        **clock.frame(),
        backend="local",
        store="SQLite file (WAL), fresh temporary folder per part, same disk as the work tree",
        durability=f"{DURABILITY} (WAL + synchronous=NORMAL) unless a figure says full",
        memory_rss=memory_rss,
        memory_traced=memory_traced,
        creation=creation_part,
        anatomy=anatomy_part,
        concurrency=Concurrency(runs=runs, largest_finished=max(finished) if finished else None),
        profile_run=profile_run,
    )
    return finish(report, clock)
