"""Fork: what ``SessionHandle.fork()`` costs as the forked history grows from 10 to 100,000 messages.

A fork is a new thread whose head is an existing revision, so it should cost the same whatever the
history's length: no message is copied (target: at most 2x from the shallowest depth to the
deepest). On the local backend and one SQLite file (WAL, durability normal), per depth D:

- timed by pyperf's Runner: ``await root.fork()`` of a root whose thread holds D messages of 1 KB
  JSON, given through ``commit_session`` in chunks (set-up, far faster than D engine steps);
- once: K forks (500; quick 50), with the bytes the database grew by over them (SQLite's own page
  count, WAL included) and the history rows they added (a fork must add none); then the first turn
  on a few forks (the fork's actor activated, the D messages loaded, a zero-delay model called, a
  commit) and a second turn (history cached). Both hand the model the whole conversation, so they
  grow with D by design: reported, not targeted.

``python -m benchmarks.fork [--quick]``.
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.command import Options, Timer, main
from benchmarks.harness.commits import EngineSession, message_pool
from benchmarks.harness.figures import Figures, Plot, Target
from repertory import Agent, Runtime, SessionHandle
from repertory.core.ids import new_id
from repertory.core.messages import ModelMessage
from repertory.core.model import ToolSpec
from repertory.core.state import RunState, ThreadState
from repertory.runtime.host import LocalHost
from repertory.testing import ScriptedModel

AGENT = "assistant"
DEPTHS = {"full": (10, 100, 1_000, 10_000, 100_000), "quick": (10, 100, 1_000)}
FORKS = {"full": 500, "quick": 50}
STEPPED = {"full": 3, "quick": 2}
SEED_CHUNK = 10_000
PLOT = Plot("fork_cost_vs_history_length.png", "Fork cost vs history length (SQLite)",
            "history length (messages) at the fork", "ms", log_y=True)  # fmt: skip


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


class Store:
    """A runtime on one SQLite file in a temporary folder, and a root per depth, built when first asked for."""

    def __init__(self) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="repertory-fork-")
        self.db = Path(self._folder.name) / "fork.db"
        self.rt: Runtime | None = None
        self._roots: dict[int, SessionHandle] = {}

    async def root(self, depth: int) -> tuple[Runtime, SessionHandle]:
        if self.rt is None:
            agent = Agent(name=AGENT, model=ScriptedModel(_reply))
            self.rt = await Runtime.start(store=f"sqlite:///{self.db}", agents={AGENT: agent}, idle_timeout=3600.0)
        if depth not in self._roots:
            root = await self.rt.create_session(agent=AGENT, title=f"depth {depth}")
            await _seed(self.rt, root.id, depth)
            self._roots[depth] = root
        return self.rt, self._roots[depth]

    async def close(self) -> None:
        if self.rt is not None:
            await self.rt.close()
        self._folder.cleanup()


async def _seed(rt: Runtime, session_id: str, depth: int) -> None:
    """Give the session's thread ``depth`` messages through ``commit_session``, chunk by chunk."""
    pool = message_pool()
    seeder = EngineSession(
        run=RunState(run_id=new_id(), thread_id=session_id, agent=AGENT), thread=ThreadState(thread_id=session_id)
    )
    for start in range(0, depth, SEED_CHUNK):
        end = min(depth, start + SEED_CHUNK)
        if end == depth:  # the seeding run ends done, as a finished turn would leave it
            seeder.run.status, seeder.run.result = "done", "seeded"
        await seeder.seed(rt.store, [pool[i % len(pool)] for i in range(start, end)])


def timings(timer: Timer, options: Options) -> None:
    """``fork()`` at each depth, timed by pyperf; the deepest over the shallowest."""
    store = Store()
    timed: dict[int, float] = {}
    for depth in DEPTHS[options.mode]:

        async def forks(loops: int, depth: int = depth) -> float:
            _, root = await store.root(depth)
            started = time.perf_counter()
            for _ in range(loops):
                await root.fork()
            return time.perf_counter() - started

        bench = timer.bench_async(f"fork() at depth {depth:,}", forks, note="one read of the head, one transaction")
        if bench is not None:
            timed[depth] = bench.median()
    if store.rt is not None:
        timer.run_until_complete(store.close())
    figures = timer.figures
    if figures is not None and len(timed) > 1:
        first, last = min(timed), max(timed)
        figures.value(f"fork() time, depth {last:,} / depth {first:,}", timed[last] / timed[first], "x",
                      target=Target(2.0), note="flat: no message is copied")  # fmt: skip


async def scenario(figures: Figures, options: Options) -> None:
    """K forks per depth (bytes and rows they add, their latency), then turns on a few of them."""
    store = Store()
    per_fork: dict[int, float] = {}
    try:
        for depth in DEPTHS[options.mode]:
            rt, root = await store.root(depth)
            bytes_before, rows_before = _pages(store.db)
            fork_s, handles = [], []
            for _ in range(FORKS[options.mode]):
                t0 = time.perf_counter()
                handles.append(await root.fork())
                fork_s.append(time.perf_counter() - t0)
            bytes_forked, rows_forked = _pages(store.db)
            figures.time(f"fork() at depth {depth:,}, K in a row", fork_s, plot=PLOT, series="fork()", x=depth)
            per_fork[depth] = (bytes_forked - bytes_before) / len(handles)
            figures.size(f"bytes per fork at depth {depth:,}", per_fork[depth],
                         note="pages in use over K forks, WAL included")  # fmt: skip
            figures.count(f"history rows added by K forks at depth {depth:,}", rows_forked - rows_before)
            first_s, second_s = [], []
            for h in handles[: STEPPED[options.mode]]:
                t0 = time.perf_counter()
                first = await h.run("go on from here")
                first_s.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                second = await h.run("and once more")
                second_s.append(time.perf_counter() - t0)
                if first.status != "done" or second.status != "done":
                    raise RuntimeError(f"a turn on a fork at depth {depth} ended {first.status}/{second.status}")
            bytes_stepped, rows_stepped = _pages(store.db)
            figures.time(f"first turn after a fork at depth {depth:,}", first_s, plot=PLOT,
                         series="first turn after", x=depth, note="loads the D messages")  # fmt: skip
            figures.time(f"second turn after a fork at depth {depth:,}", second_s, plot=PLOT,
                         series="second turn after", x=depth)  # fmt: skip
            stepped = len(first_s)
            figures.size(f"bytes per turned fork at depth {depth:,}", (bytes_stepped - bytes_forked) / stepped)
            figures.value(f"history rows per turned fork at depth {depth:,}", (rows_stepped - rows_forked) / stepped,
                          "rows")  # fmt: skip
            thread = await rt.store.load_thread(handles[0].id)
            head = None if thread is None else thread.history_revision_id
            loaded = None if head is None else await rt.store.load_history(head)
            if loaded is None or len(loaded.messages) != depth + 4:
                raise RuntimeError(f"a fork at depth {depth} does not hold the root's {depth} messages plus its 4")
            assert isinstance(rt.host, LocalHost)
            rt.host.passivate_idle(0)  # the forks' cached histories leave memory
        low, high = min(per_fork), max(per_fork)
        if per_fork[low] > 0:
            figures.value(f"bytes per fork, depth {high:,} / depth {low:,}", per_fork[high] / per_fork[low], "x",
                          target=Target(2.0))  # fmt: skip
    finally:
        await store.close()


if __name__ == "__main__":
    main("fork", __doc__, timings=timings, scenario=scenario, processes=3)
