"""Compaction: turn latency and bytes stored per turn as one session grows to 100,000 turns.

The target (issue 21): with ``Compaction(max_input_tokens=100_000)`` the latency and the bytes
stored of the 10,000th and the 100,000th turn are within 2x of the 100th, where without compaction
every request carries the whole conversation.

One session, one SQLite file (WAL, durability normal), the local engine (``Session``), a zero-delay
``ScriptedModel`` step function whose work does not grow with the conversation, so the figures are
the runtime's. A turn is ``Session.start()`` of a ~400-character user message answered by a
~400-character reply: two messages, ~110 estimated tokens each. Two runs of the same turns:

- **compaction**: ``Agent(compaction=Compaction(max_input_tokens=100_000, keep_last=20))``. The
  context grows to the budget, is summarised (the scripted summary is ~2,000 characters), and
  grows again: every ~450 turns one compaction. Every turn is driven, up to the largest checkpoint
  or until ``--budget-seconds`` of wall time are spent (then the figures say how far it got).
- **no compaction**: the same agent without it. Driving every turn is quadratic (each turn reads
  its whole context), so turns are driven only up to ``BASELINE_DRIVEN``; for a deeper checkpoint
  the thread is seeded with that many turns through ``commit_session`` (set-up, not measured: the
  messages a turn would have written) and a fresh ``Session`` continues it: its first turn reads
  the seeded history (cold, recorded apart), the following ones are the measured window.

At each checkpoint N the window is the ``WINDOW`` turns ending at turn N (fewer for a seeded
baseline): every turn's latency (a compaction turn, which also waits for its summary request, is
inside some windows and shows in the tail), and bytes stored per turn = growth of the database over
the window (``page_count - freelist_count``, WAL pages included) / window turns. Each run also
records its amortised bytes per turn over the whole run and how many compactions it made.

``python -m benchmarks.compaction [--quick] [--budget-seconds S]``.
"""

from __future__ import annotations

import argparse
import gc
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.command import Options, main
from benchmarks.harness.figures import Figures, Target
from repertory import Agent, Compaction, ModelMessage, Session, SqliteSessionStore, ToolSpec
from repertory.core.history import MessageHistory
from repertory.core.ids import new_id
from repertory.core.messages import Origin
from repertory.core.state import RunState, ThreadState
from repertory.testing import ScriptedModel

CHECKPOINTS = {"full": (100, 10_000, 100_000), "quick": (100, 1_000)}
BASELINE_DRIVEN = {"full": 1_000, "quick": 100}
WINDOW = {"full": 100, "quick": 50}
SEEDED_WINDOW = 10
BUDGET_TOKENS = 100_000
KEEP_LAST = 20
DEFAULT_SECONDS = {"full": 300.0, "quick": 60.0}
SEED_CHUNK = 20_000

USER = "Please keep track of this detail for later: " + "the quick brown fox jumps over the lazy dog " * 8
REPLY = "Noted. Here is what I will remember about it: " + "a fox jumped over a dog, quickly and lazily " * 8
SUMMARY = "The user asked the assistant to remember many details about a fox and a dog. " * 25
_REPLY_STEP = {"text": REPLY, "usage": {"input_tokens": 100, "output_tokens": 100}}
_SUMMARY_STEP = {"text": SUMMARY, "usage": {"input_tokens": 90_000, "output_tokens": 500}}


def _step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """Constant work whatever the conversation: a summary request is told apart by its origin."""
    origin = messages[-1].origin
    return _SUMMARY_STEP if origin is not None and origin.id == "compaction" else _REPLY_STEP


def _agent(compacting: bool) -> Agent:
    compaction = Compaction(max_input_tokens=BUDGET_TOKENS, keep_last=KEEP_LAST) if compacting else None
    return Agent(name="bench", model=ScriptedModel(_step), instructions="You are a careful assistant.",
                 compaction=compaction)  # fmt: skip


def _bytes(db: Path) -> int:
    """Bytes the database uses as a fresh reader sees it (pages in the WAL included)."""
    conn = sqlite3.connect(db)
    try:
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        used = conn.execute("PRAGMA page_count").fetchone()[0] - conn.execute("PRAGMA freelist_count").fetchone()[0]
    finally:
        conn.close()
    return int(size * used)


async def _turns(sess: Session, count: int, times: list[float] | None = None) -> None:
    for _ in range(count):
        started = time.perf_counter()
        result = await sess.start(USER)
        if times is not None:
            times.append(time.perf_counter() - started)
        if result.status != "done":
            raise RuntimeError(f"a benchmark turn ended {result.status}")


class Run:
    """One run's checkpoints, recorded as they are measured: (turn, median latency, bytes per turn)."""

    def __init__(self, figures: Figures, label: str) -> None:
        self.figures, self.label = figures, label
        self.points: list[tuple[int, float, float]] = []

    def point(self, turn: int, times: list[float], grown: int, how: str) -> None:
        per_turn = grown / len(times)
        self.figures.time(f"{self.label}: turn latency at turn {turn:,}", times,
                          note=f"{how}; max {max(times) * 1000:.1f} ms")  # fmt: skip
        self.figures.size(f"{self.label}: bytes stored per turn at turn {turn:,}", per_turn)
        self.points.append((turn, statistics.median(times), per_turn))

    def ratios(self) -> None:
        """Each checkpoint's median latency and bytes per turn over the first checkpoint's."""
        if not self.points:
            return
        target = Target(2.0) if self.label == "compaction" else None
        (first, lat0, bytes0), f = self.points[0], self.figures
        for turn, lat, per_turn in self.points[1:]:
            f.value(f"{self.label}: latency p50, turn {turn:,} / turn {first:,}", lat / lat0, "x", target=target)
            f.value(f"{self.label}: bytes per turn, turn {turn:,} / turn {first:,}", per_turn / bytes0 if bytes0
                    else 0.0, "x", target=target)  # fmt: skip


async def _driven(run: Run, db: Path, compacting: bool, checkpoints: list[int], window: int, seconds: float) -> None:
    """Drive every turn up to the last checkpoint (or the deadline), measuring the window before each."""
    store = await SqliteSessionStore.open(db)
    turn, started, started_bytes = 0, time.perf_counter(), _bytes(db)
    deadline = started + seconds
    try:
        sess = Session(store=store, agent=_agent(compacting))
        for checkpoint in checkpoints:
            start = max(turn, checkpoint - window)
            while turn < start and time.perf_counter() < deadline:
                step = min(start - turn, 500)
                await _turns(sess, step)
                turn += step
            if turn < start:
                break
            gc.collect()
            before, times = _bytes(db), list[float]()
            await _turns(sess, checkpoint - turn, times)
            turn = checkpoint
            run.point(checkpoint, times, _bytes(db) - before, "driven")
        thread = await store.load_thread(sess.thread_id)
        history = None if thread is None else await store.load_history(thread.history_revision_id or "")
        messages = history.messages if history is not None else []
        f, label = run.figures, run.label
        f.time(f"{label}: driving the turns", time.perf_counter() - started)
        f.count(f"{label}: turns driven", turn)
        f.count(f"{label}: messages stored", len(messages))
        f.count(f"{label}: compactions (summaries stored)", sum(m.boundary for m in messages))
        f.count(f"{label}: messages in the model's context at the end",
                len(history.context_messages()) if history is not None else 0)  # fmt: skip
        if turn:
            f.size(f"{label}: amortised bytes per turn over the run", (_bytes(db) - started_bytes) / turn)
    finally:
        await store.close()


async def _seed(store: SqliteSessionStore, turns: int) -> str:
    """A thread holding ``turns`` turns' messages, committed in chunks (set-up, not a measured step)."""
    thread_id = new_id()
    run = RunState(run_id=new_id(), thread_id=thread_id, agent="bench")
    thread = ThreadState(thread_id=thread_id)
    history = MessageHistory()
    user, reply = ModelMessage.user(USER, origin=Origin(kind="user")), ModelMessage.assistant(REPLY)
    head: str | None = None
    for start in range(0, turns, SEED_CHUNK // 2):
        for _ in range(min(SEED_CHUNK // 2, turns - start)):
            history.append(user)
            history.append(reply)
        if start + SEED_CHUNK // 2 >= turns:
            run.status, run.result = "done", "seeded"
        run.history_revision_id = thread.history_revision_id = history.revision_id
        await store.commit_session(run=run, thread=thread, history=history, base_revision_id=head)
        head = history.revision_id
    return thread_id


async def _seeded(run: Run, db: Path, checkpoint: int) -> None:
    """The no-compaction turn at depth ``checkpoint``: seed the turns before the window, then measure it."""
    store = await SqliteSessionStore.open(db)
    seeded = checkpoint - 1 - SEEDED_WINDOW
    try:
        seed_started = time.perf_counter()
        thread_id = await _seed(store, seeded)
        seed_s = time.perf_counter() - seed_started
        sess = Session(store=store, agent=_agent(False), thread_id=thread_id)
        cold: list[float] = []
        await _turns(sess, 1, cold)
        run.figures.time(f"{run.label}: first turn after seeding, checkpoint {checkpoint:,}", cold,
                         note="reads the seeded history cold")  # fmt: skip
        gc.collect()
        before, times = _bytes(db), list[float]()
        await _turns(sess, SEEDED_WINDOW, times)
        run.point(checkpoint, times, _bytes(db) - before, f"seeded with {seeded:,} turns in {seed_s:.1f} s")
    finally:
        await store.close()


async def scenario(figures: Figures, options: Options) -> None:
    """The compaction run, then the run without it, each on its own database."""
    mode, seconds = options.mode, options.args.budget_seconds or DEFAULT_SECONDS[options.mode]
    checkpoints, driven_to = list(CHECKPOINTS[mode]), BASELINE_DRIVEN[mode]
    figures.fact("store", "SQLite file (WAL), durability normal")
    figures.fact("compaction", f"Compaction(max_input_tokens={BUDGET_TOKENS:,}, keep_last={KEEP_LAST}) vs none")
    figures.fact("runs", f"checkpoints {checkpoints}, windows of {WINDOW[mode]} turns; without compaction "
                 f"driven up to {driven_to:,}, deeper seeded; {seconds:g} s of driving a run at most")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="repertory-compaction-") as folder:
        on, off = Run(figures, "compaction"), Run(figures, "no compaction")
        await _driven(on, Path(folder) / "compacting.db", True, checkpoints, WINDOW[mode], seconds)
        await _driven(off, Path(folder) / "baseline.db", False, [c for c in checkpoints if c <= driven_to],
                      WINDOW[mode], seconds)  # fmt: skip
        for checkpoint in [c for c in checkpoints if c > driven_to]:
            await _seeded(off, Path(folder) / f"seeded-{checkpoint}.db", checkpoint)
    on.ratios()
    off.ratios()


def _args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--budget-seconds", type=float, default=None,
                        help="wall time each run may drive turns (default 300; quick 60)")  # fmt: skip


if __name__ == "__main__":
    main("compaction", __doc__, scenario=scenario, add_args=_args)
