"""Fork benchmark: what ``SessionHandle.fork()`` costs as the forked history grows from 10 to 100,000.

Run ``python -m benchmarks.fork [--quick] [--out PATH]``. It prints a table and writes
``benchmarks/results/fork.json``. Nothing here asserts a speed (DESIGN.md, rule 8).
The target read against: fork cost is flat, at most 2x from depth 10 to depth 100,000.

A fork is a new thread whose head is an existing revision, so it should cost the same whatever
the history's length: no message is copied. Per depth D (10, 100, 1,000, 10,000, 100,000;
``--quick`` 10, 100, 1,000), on the local backend and one SQLite file (WAL, durability normal):

- a root session is created through the runtime and its thread is given D messages of 1 KB JSON
  (the store benchmark's message) through ``commit_session`` in chunks: set-up, not measured, and
  far faster than D engine steps, which would take minutes at 100,000;
- ``await root.fork()`` is timed K times (500; ``--quick`` 50): one read of the thread head, one
  transaction writing the session and thread rows. The history rows before and after are counted
  (a fork must add none), and the bytes the database grew by over the K forks are read from
  SQLite's own page count (``page_count - freelist_count``, which includes pages still in the
  WAL), so no checkpoint is needed; K is large so that whole 4 KB pages average out per fork;
- the first turn on a few of the forks is timed (``await fork.run(...)``: the fork's actor is
  activated, the run loads the D messages it continues from, calls the model, commits), then a
  second turn (history now cached in memory). The model is a zero-delay ``ScriptedModel`` step
  function, so the time is the runtime's, not a model's. Both turns hand the model the whole
  conversation, so they grow with D by design (the first also reads it from the store); that is
  reported, not targeted.
"""

from __future__ import annotations

import asyncio
import gc
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import EngineSession, make_message
from benchmarks._suite import (
    dist_ms,
    finish,
    progress,
    row,
    simple_main,
    start_report,
    suite_entry,
)
from repertory import Agent, Runtime
from repertory.core.ids import new_id
from repertory.core.messages import ModelMessage
from repertory.core.model import ToolSpec
from repertory.core.state import RunState, ThreadState
from repertory.runtime.host import LocalHost
from repertory.testing import ScriptedModel

__all__ = ["main", "run_suite"]

NAME = "fork"
AGENT = "assistant"
DEPTHS = {"full": (10, 100, 1_000, 10_000, 100_000), "quick": (10, 100, 1_000)}
FORKS = {"full": 500, "quick": 50}
STEPPED = {"full": 3, "quick": 2}
SEED_CHUNK = 10_000
TARGET_RATIO = 2.0


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
    pool = [make_message(i) for i in range(16)]
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


async def _depth(rt: Runtime, db: Path, depth: int, forks: int, stepped: int) -> dict[str, Any]:
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
    loaded = None if thread is None else await rt.store.load_history(thread.history_revision_id)
    if loaded is None or len(loaded.messages) != depth + 4:
        raise RuntimeError(f"a fork at depth {depth} does not hold the root's {depth} messages plus its own 4")
    assert isinstance(rt.host, LocalHost)
    rt.host.passivate_idle(0)  # the forks' cached histories leave memory
    return {
        "depth": depth,
        "seed_seconds": seed_s,
        "forks": forks,
        "fork": dist_ms(fork_s),
        "history_rows_added_by_forks": rows_forked - rows_before,
        "bytes_per_fork": (bytes_forked - bytes_before) / forks,
        "stepped_forks": stepped,
        "first_turn_after_fork": dist_ms(first_s),
        "second_turn_after_fork": dist_ms(second_s),
        "history_rows_added_per_stepped_fork": (rows_stepped - rows_forked) / stepped,
        "bytes_added_per_stepped_fork": (bytes_stepped - bytes_forked) / stepped,
    }


async def _measure(mode: str) -> list[dict[str, Any]]:
    agent = Agent(name=AGENT, model=ScriptedModel(_reply))
    out: list[dict[str, Any]] = []
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


def _summary(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    first, last = results[0], results[-1]
    span = f"depth {last['depth']:,} / depth {first['depth']:,}"
    rows = [
        row(
            f"fork time p50, {span}",
            last["fork"]["p50_ms"] / first["fork"]["p50_ms"],
            "x",
            TARGET_RATIO,
            note=f"{first['fork']['p50_ms']:.2f} ms at {first['depth']:,}, {last['fork']['p50_ms']:.2f} ms at "
            f"{last['depth']:,} (p99 {last['fork']['p99_ms']:.2f} ms)",
        ),
        row(
            f"bytes per fork, {span}",
            last["bytes_per_fork"] / first["bytes_per_fork"] if first["bytes_per_fork"] else None,
            "x",
            TARGET_RATIO,
            note=f"{first['bytes_per_fork']:,.0f} B and {last['bytes_per_fork']:,.0f} B per fork; history rows "
            f"added by {last['forks']} forks: {last['history_rows_added_by_forks']}",
        ),
    ]
    for r in results:
        rows.append(
            row(
                f"first turn after a fork at depth {r['depth']:,}",
                r["first_turn_after_fork"]["p50_ms"],
                "ms",
                note=f"loads the {r['depth']:,} messages; second turn {r['second_turn_after_fork']['p50_ms']:.2f} ms; "
                f"fork {r['fork']['p50_ms']:.2f} ms; {r['bytes_added_per_stepped_fork']:,.0f} B per turned fork",
            )
        )
    return rows


def render(report: dict[str, Any]) -> str:
    """The table printed after a run."""
    lines = [
        f"fork benchmark ({report['mode']}), SQLite WAL durability normal, {report['forks_per_depth']} forks per "
        f"depth (target: flat, <= {TARGET_RATIO:.0f}x)",
        f"{'depth':>8} {'fork p50 ms':>12} {'fork p99 ms':>12} {'B/fork':>8} {'hist rows':>9} "
        f"{'1st turn ms':>12} {'2nd turn ms':>12} {'B/turned fork':>14}",
    ]
    for r in report["results"]:
        lines.append(
            f"{r['depth']:>8,} {r['fork']['p50_ms']:>12.2f} {r['fork']['p99_ms']:>12.2f} {r['bytes_per_fork']:>8,.0f} "
            f"{r['history_rows_added_by_forks']:>9} {r['first_turn_after_fork']['p50_ms']:>12.1f} "
            f"{r['second_turn_after_fork']['p50_ms']:>12.2f} {r['bytes_added_per_stepped_fork']:>14,.0f}"
        )
    lines += [f"  {s['figure']}: {s['value']:.2f}{s['unit']} (met: {s['met']})" for s in report["summary"][:2]]
    return "\n".join(lines)


def measure(quick: bool) -> dict[str, Any]:
    """Every depth, then the summary; prints the table and returns the report."""
    mode = "quick" if quick else "full"
    started = time.perf_counter()
    report = start_report(
        NAME,
        mode,
        backend="local",
        store="SQLite file (WAL), durability normal",
        message_json_bytes=1024,
        forks_per_depth=FORKS[mode],
        target={"fork_ratio_deepest_to_shallowest": TARGET_RATIO},
    )
    report["results"] = asyncio.run(_measure(mode))
    report["summary"] = _summary(report["results"])
    finish(report, started)
    print(render(report))
    return report


run_suite = suite_entry(NAME, measure)


main = simple_main(NAME, __doc__, measure, "depths 10 to 1,000 only (seconds)")


if __name__ == "__main__":
    main()
