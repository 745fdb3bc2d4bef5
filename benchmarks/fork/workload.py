"""The fork workload: seed a root to depth D, fork it K times, run turns on a few forks (see ``benchmarks.fork``)."""

from __future__ import annotations

import asyncio
import gc
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.fork.report import DepthResult, ForkReport
from benchmarks.harness.commits import EngineSession, message_pool
from benchmarks.harness.report import Clock, finish, mode_of
from benchmarks.harness.stats import dist_ms
from benchmarks.harness.timing import progress
from repertory import Agent, Runtime
from repertory.core.ids import new_id
from repertory.core.messages import ModelMessage
from repertory.core.model import ToolSpec
from repertory.core.state import RunState, ThreadState
from repertory.runtime.host import LocalHost
from repertory.testing import ScriptedModel

__all__ = ["measure"]

AGENT = "assistant"
DEPTHS = {"full": (10, 100, 1_000, 10_000, 100_000), "quick": (10, 100, 1_000)}
FORKS = {"full": 500, "quick": 50}
STEPPED = {"full": 3, "quick": 2}
SEED_CHUNK = 10_000


def _reply(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """Constant work whatever the history: the figure must be the runtime's, not the script's scan."""
    return {"text": "ok", "usage": {"input_tokens": 10, "output_tokens": 1}}


def _pages(db: Path) -> tuple[int, int]:
    """(bytes in use, history rows) as a fresh reader sees the last commit, WAL included."""
    conn = sqlite3.connect(db)
    try:
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        used = conn.execute("PRAGMA page_count").fetchone()[0] - conn.execute("PRAGMA freelist_count").fetchone()[0]
        rows = conn.execute(
            "SELECT (SELECT count(*) FROM history_entries) + (SELECT count(*) FROM history_revisions)"
        ).fetchone()[0]
    finally:
        conn.close()
    return int(size * used), int(rows)


async def _seed(rt: Runtime, session_id: str, depth: int) -> float:
    """Give the session's thread ``depth`` messages through ``commit_session``, chunk by chunk."""
    pool = message_pool()
    seeder = EngineSession(
        run=RunState(run_id=new_id(), thread_id=session_id, agent=AGENT), thread=ThreadState(thread_id=session_id)
    )
    started = time.perf_counter()
    for start in range(0, depth, SEED_CHUNK):
        end = min(depth, start + SEED_CHUNK)
        if end == depth:  # the seeding run ends done, as a finished turn would leave it
            seeder.run.status, seeder.run.result = "done", "seeded"
        await seeder.seed(rt.store, [pool[i % len(pool)] for i in range(start, end)])
    return time.perf_counter() - started


async def _depth(rt: Runtime, db: Path, depth: int, forks: int, stepped: int) -> DepthResult:
    root = await rt.create_session(agent=AGENT, title=f"depth {depth}")
    seed_s = await _seed(rt, root.id, depth)
    gc.collect()
    bytes_before, rows_before = _pages(db)
    fork_s: list[float] = []
    handles = []
    for _ in range(forks):
        t0 = time.perf_counter()
        handles.append(await root.fork())
        fork_s.append(time.perf_counter() - t0)
    bytes_forked, rows_forked = _pages(db)
    first_s: list[float] = []
    second_s: list[float] = []
    for h in handles[:stepped]:
        t0 = time.perf_counter()
        first = await h.run("go on from here")
        first_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        second = await h.run("and once more")
        second_s.append(time.perf_counter() - t0)
        if first.status != "done" or second.status != "done":
            raise RuntimeError(f"a turn on a fork at depth {depth} ended {first.status}/{second.status}")
    bytes_stepped, rows_stepped = _pages(db)
    thread = await rt.store.load_thread(handles[0].id)
    head = None if thread is None else thread.history_revision_id
    loaded = None if head is None else await rt.store.load_history(head)
    if loaded is None or len(loaded.messages) != depth + 4:
        raise RuntimeError(f"a fork at depth {depth} does not hold the root's {depth} messages plus its own 4")
    assert isinstance(rt.host, LocalHost)
    rt.host.passivate_idle(0)  # the forks' cached histories leave memory
    return DepthResult(
        depth=depth,
        seed_seconds=seed_s,
        forks=forks,
        fork=dist_ms(fork_s),
        history_rows_added_by_forks=rows_forked - rows_before,
        bytes_per_fork=(bytes_forked - bytes_before) / forks,
        stepped_forks=stepped,
        first_turn_after_fork=dist_ms(first_s),
        second_turn_after_fork=dist_ms(second_s),
        history_rows_added_per_stepped_fork=(rows_stepped - rows_forked) / stepped,
        bytes_added_per_stepped_fork=(bytes_stepped - bytes_forked) / stepped,
    )


async def _measure(mode: str) -> list[DepthResult]:
    agent = Agent(name=AGENT, model=ScriptedModel(_reply))
    out: list[DepthResult] = []
    with tempfile.TemporaryDirectory(prefix="repertory-fork-") as folder:
        db = Path(folder) / "fork.db"
        rt = await Runtime.start(store=f"sqlite:///{db}", agents={AGENT: agent}, idle_timeout=3600.0)
        try:
            with progress("fork: depths", len(DEPTHS[mode])) as advance:
                for depth in DEPTHS[mode]:
                    out.append(await _depth(rt, db, depth, FORKS[mode], STEPPED[mode]))
                    advance(1)
        finally:
            await rt.close()
    return out


def measure(quick: bool) -> ForkReport:
    """Every depth; the report with its summary."""
    mode = mode_of(quick)
    clock = Clock.start("fork", mode)
    results = asyncio.run(_measure(mode))
    report = ForkReport(
        **clock.frame(),
        backend="local",
        store="SQLite file (WAL), durability normal",
        message_json_bytes=1024,
        forks_per_depth=FORKS[mode],
        results=results,
    )
    return finish(report, clock)
