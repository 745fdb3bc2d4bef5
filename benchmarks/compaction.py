"""Compaction benchmark: turn latency and bytes stored per turn as one session grows to 100,000 turns.

Run ``python -m benchmarks.compaction [--quick] [--out DIR] [--budget-seconds S]``. It prints a table
and writes ``DIR/compaction.json`` (default ``benchmarks/results/``). Nothing here asserts a speed.
The target read against: with ``Compaction(max_input_tokens=100_000)`` the latency and the bytes
stored of the 10,000th and the 100,000th turn are within 2x of the 100th.

One session, one SQLite file (WAL, durability normal), the local engine (``Session``), a zero-delay
``ScriptedModel`` step function whose work does not grow with the conversation, so the figures are
the runtime's. A turn is ``Session.start()`` of a ~400-character user message answered by a
~400-character reply: two messages, ~110 estimated tokens each. Two runs of the same turns:

- **compaction**: ``Agent(compaction=Compaction(max_input_tokens=100_000, keep_last=20))``. The
  context grows to the budget, is summarised (the scripted summary is ~2,000 characters), and
  grows again: every ~450 turns one compaction. Every turn is driven, up to the largest checkpoint
  or until ``--budget-seconds`` of wall time are spent (then the report says how far it got).
- **no compaction**: the same agent without it, so every request carries the whole conversation.
  Driving every turn is quadratic (each turn reads its whole context), so turns are driven only up
  to ``BASELINE_DRIVEN`` (1,000); for a deeper checkpoint the thread is seeded
  with that many turns through ``commit_session`` (set-up, not measured: the messages a turn would
  have written) and a fresh ``Session`` continues it: its first turn reads the seeded history (cold,
  reported apart), the following ones are the measured window.

At each checkpoint N the window is the ``WINDOW`` turns ending at turn N (fewer for a seeded
baseline): turn latency p50 / p90 / max over the window (a compaction turn, which also waits for
its summary request, is inside some windows and shows in max), and bytes stored per turn = growth
of the database over the window (``page_count - freelist_count``, WAL pages included) / window
turns. The compaction run also reports its amortised bytes per turn over the whole run and how many
compactions it made.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import model_validator

from benchmarks.harness.cli import deliver
from benchmarks.harness.report import Clock, Report, Row, finish, mode_of
from repertory import Agent, Compaction, ModelMessage, Session, SqliteSessionStore, ToolSpec
from repertory.core.history import MessageHistory
from repertory.core.ids import new_id
from repertory.core.messages import Origin
from repertory.core.state import RunState, ThreadState
from repertory.testing import ScriptedModel

__all__ = ["NAME", "PLOTS", "REPORT", "CompactionReport", "main", "measure", "run_suite"]

NAME = "compaction"
CHECKPOINTS = {"full": (100, 10_000, 100_000), "quick": (100, 1_000)}
BASELINE_DRIVEN = {"full": 1_000, "quick": 1_000}
WINDOW = {"full": 100, "quick": 50}
SEEDED_WINDOW = 10
BUDGET_TOKENS = 100_000
KEEP_LAST = 20
DEFAULT_SECONDS = {"full": 300.0, "quick": 60.0}
TARGET_RATIO = 2.0
RESULTS_DIR = Path(__file__).resolve().parent / "results"  # the harness's RESULTS_DIR
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
    return Agent(
        name="bench",
        model=ScriptedModel(_step),
        instructions="You are a careful assistant.",
        compaction=Compaction(max_input_tokens=BUDGET_TOKENS, keep_last=KEEP_LAST) if compacting else None,
    )


def _bytes(db: Path) -> int:
    """Bytes the database uses as a fresh reader sees it (pages in the WAL included)."""
    conn = sqlite3.connect(db)
    try:
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        used = conn.execute("PRAGMA page_count").fetchone()[0] - conn.execute("PRAGMA freelist_count").fetchone()[0]
    finally:
        conn.close()
    return int(size * used)


def _dist(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {
        "n": len(ms),
        "p50_ms": statistics.median(ms),
        "p90_ms": ms[min(len(ms) - 1, int(0.9 * len(ms)))],
        "max_ms": ms[-1],
        "mean_ms": statistics.fmean(ms),
    }


async def _turns(sess: Session, count: int, times: list[float] | None = None) -> None:
    for _ in range(count):
        started = time.perf_counter()
        result = await sess.start(USER)
        if times is not None:
            times.append(time.perf_counter() - started)
        if result.status != "done":
            raise RuntimeError(f"a benchmark turn ended {result.status}")


async def _driven(db: Path, compacting: bool, checkpoints: list[int], window: int, deadline: float) -> dict[str, Any]:
    """Drive every turn up to the last checkpoint (or the deadline), measuring the window before each."""
    store = await SqliteSessionStore.open(db)
    points: list[dict[str, Any]] = []
    turn = 0
    started_bytes = _bytes(db)
    try:
        sess = Session(store=store, agent=_agent(compacting))
        for checkpoint in checkpoints:
            start = max(turn, checkpoint - window)
            if time.perf_counter() > deadline:
                break
            while turn < start and time.perf_counter() < deadline:
                step = min(start - turn, 500)
                await _turns(sess, step)
                turn += step
            if turn < start:
                break
            gc.collect()
            before = _bytes(db)
            times: list[float] = []
            await _turns(sess, checkpoint - turn, times)
            turn = checkpoint
            points.append(
                {
                    "turn": checkpoint,
                    "how": "driven",
                    "latency": _dist(times),
                    "bytes_per_turn": (_bytes(db) - before) / len(times),
                }
            )
        thread = await store.load_thread(sess.thread_id)
        history = None if thread is None else await store.load_history(thread.history_revision_id or "")
        messages = history.messages if history is not None else []
        context = history.context_messages() if history is not None else []
        return {
            "points": points,
            "turns_driven": turn,
            "messages": len(messages),
            "compactions": sum(m.boundary for m in messages),
            "context_messages": len(context),
            "amortised_bytes_per_turn": (_bytes(db) - started_bytes) / turn if turn else None,
        }
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


async def _seeded(db: Path, checkpoint: int) -> dict[str, Any]:
    """The no-compaction turn at depth ``checkpoint``: seed ``checkpoint - 1`` turns, then measure turns."""
    store = await SqliteSessionStore.open(db)
    try:
        seed_started = time.perf_counter()
        thread_id = await _seed(store, checkpoint - 1 - SEEDED_WINDOW)
        seed_s = time.perf_counter() - seed_started
        sess = Session(store=store, agent=_agent(False), thread_id=thread_id)
        cold: list[float] = []
        await _turns(sess, 1, cold)
        gc.collect()
        before = _bytes(db)
        times: list[float] = []
        await _turns(sess, SEEDED_WINDOW, times)
        return {
            "turn": checkpoint,
            "how": f"seeded with {checkpoint - 1 - SEEDED_WINDOW:,} turns in {seed_s:.1f} s, then driven",
            "latency": _dist(times),
            "first_turn_after_seeding_ms": cold[0] * 1000,
            "bytes_per_turn": (_bytes(db) - before) / len(times),
        }
    finally:
        await store.close()


def _ratios(points: list[dict[str, Any]]) -> dict[str, float | None]:
    if not points:
        return {}
    first = points[0]
    out: dict[str, float | None] = {}
    for p in points[1:]:
        out[f"latency_p50_turn_{p['turn']}_vs_{first['turn']}"] = p["latency"]["p50_ms"] / first["latency"]["p50_ms"]
        out[f"bytes_per_turn_{p['turn']}_vs_{first['turn']}"] = (
            p["bytes_per_turn"] / first["bytes_per_turn"] if first["bytes_per_turn"] else None
        )
    return out


async def _measure(mode: str, seconds: float) -> dict[str, Any]:
    checkpoints = list(CHECKPOINTS[mode])
    window = WINDOW[mode]
    with tempfile.TemporaryDirectory(prefix="repertory-compaction-") as folder:
        started = time.perf_counter()
        compacting = await _driven(Path(folder) / "compacting.db", True, checkpoints, window, started + seconds)
        compacting["seconds"] = round(time.perf_counter() - started, 1)
        driven_to = BASELINE_DRIVEN[mode]
        started = time.perf_counter()
        baseline = await _driven(
            Path(folder) / "baseline.db", False, [c for c in checkpoints if c <= driven_to], window, started + seconds
        )
        for checkpoint in [c for c in checkpoints if c > driven_to]:
            baseline["points"].append(await _seeded(Path(folder) / f"seeded-{checkpoint}.db", checkpoint))
        baseline["seconds"] = round(time.perf_counter() - started, 1)
    compacting["ratios"] = _ratios(compacting["points"])
    baseline["ratios"] = _ratios(baseline["points"])
    return {"compaction": compacting, "no_compaction": baseline}


def _summary(report: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for label, key in (("compaction", "compaction"), ("no compaction", "no_compaction")):
        run = report["results"][key]
        for name, value in run["ratios"].items():
            target = TARGET_RATIO if key == "compaction" else None
            rows.append(
                {
                    "figure": f"{label}: {name.replace('_', ' ')}",
                    "value": value,
                    "unit": "x",
                    "target": target,
                    "met": None if target is None or value is None else value <= target,
                }
            )
    return rows


def render(report: dict[str, Any]) -> str:
    """The table printed after a run."""
    lines = [
        f"compaction benchmark ({report['mode']}): one session, SQLite WAL durability normal, "
        f"Compaction(max_input_tokens={BUDGET_TOKENS:,}, keep_last={KEEP_LAST}) vs none",
        f"{'run':<14} {'turn':>8} {'p50 ms':>8} {'p90 ms':>8} {'max ms':>9} {'B/turn':>9}  how",
    ]
    for key in ("compaction", "no_compaction"):
        run = report["results"][key]
        for p in run["points"]:
            lat = p["latency"]
            lines.append(
                f"{key:<14} {p['turn']:>8,} {lat['p50_ms']:>8.2f} {lat['p90_ms']:>8.2f} {lat['max_ms']:>9.1f} "
                f"{p['bytes_per_turn']:>9,.0f}  {p['how']}"
            )
    c = report["results"]["compaction"]
    lines.append(
        f"compaction run: {c['turns_driven']:,} turns driven in {c['seconds']} s, {c['messages']:,} messages "
        f"stored ({c['compactions']} summaries), {c['context_messages']} in the model's context at the end, "
        f"{c['amortised_bytes_per_turn'] or 0:,.0f} B/turn amortised"
    )
    lines += [f"  {r['figure']}: {r['value']:.2f}x (target {r['target']}, met: {r['met']})" for r in report["summary"]]
    return "\n".join(lines)


class CompactionReport(Report):
    """``benchmarks/results/compaction.json``: both runs' checkpoints (as measured, JSON) and their ratios."""

    store: str
    budget_tokens: int
    keep_last: int
    checkpoints: list[int]
    baseline_driven_up_to: int
    wall_budget_seconds_per_run: float
    target: dict[str, float]
    results: dict[str, Any]

    @model_validator(mode="before")
    @classmethod
    def _older_machine(cls, data: Any) -> Any:
        # Reports written before this one was typed named the core count ``cpus``.
        if isinstance(data, dict) and isinstance(data.get("machine"), dict) and "cpus" in data["machine"]:
            machine = {k: v for k, v in data["machine"].items() if k != "cpus"}
            machine.setdefault("cpu_count", data["machine"]["cpus"])
            data = {**data, "machine": machine}
        # Reports written before the rows said their direction rendered the ratio targets as "at least".
        if isinstance(data, dict) and isinstance(data.get("summary"), list):
            rows = [
                {**r, "target_is": "at most"} if isinstance(r, dict) and r.get("target") is not None else r
                for r in data["summary"]
            ]
            data = {**data, "summary": rows}
        return data

    def summarise(self) -> list[Row]:
        """Latency and bytes per turn at each checkpoint over turn 100's, with and without compaction."""
        return [Row.model_validate({**r, "target_is": None if r["target"] is None else "at most"})
                for r in _summary({"results": self.results})]  # fmt: skip

    def render(self) -> str:
        """The table printed after a run."""
        return render({"mode": self.mode, "results": self.results, "summary": [r.model_dump() for r in self.rows()]})


REPORT = CompactionReport
PLOTS: list[Any] = []


def measure(quick: bool, seconds: float | None = None) -> CompactionReport:
    """Both runs and the summary; the report."""
    mode = mode_of(quick)
    clock = Clock.start(NAME, mode)
    budget = seconds or DEFAULT_SECONDS[mode]
    report = CompactionReport(
        **clock.frame(),
        store="SQLite file (WAL), durability normal",
        budget_tokens=BUDGET_TOKENS,
        keep_last=KEEP_LAST,
        checkpoints=list(CHECKPOINTS[mode]),
        baseline_driven_up_to=BASELINE_DRIVEN[mode],
        wall_budget_seconds_per_run=budget,
        target={"ratio_to_turn_100": TARGET_RATIO},
        results=asyncio.run(_measure(mode, budget)),
    )
    return finish(report, clock)


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> CompactionReport:
    """The suite entry: measure, print, write ``out_dir/compaction.json`` (``peers``: none here)."""
    report = measure(quick)
    deliver(report, out_dir / f"{NAME}.json")
    return report


def main() -> None:
    """``python -m benchmarks.compaction``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else NAME)
    parser.add_argument("--quick", action="store_true", help="checkpoints 100 and 1,000 only (about a minute)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="folder for compaction.json")
    parser.add_argument(
        "--budget-seconds", type=float, default=None, help="wall time each run may drive turns (default 300)"
    )
    args = parser.parse_args()
    deliver(measure(args.quick, args.budget_seconds), args.out / f"{NAME}.json")


if __name__ == "__main__":
    main()
