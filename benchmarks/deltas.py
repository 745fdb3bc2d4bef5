"""Durable deltas benchmark: what storing a reply's text deltas costs a step, on against off, in one run.

Run ``python -m benchmarks.deltas [--quick] [--out PATH]``; it prints the figures and writes
``benchmarks/results/deltas.json``. Nothing here asserts a speed.

The model streams every step's text (400 characters) as 50 deltas; a turn is 10 steps (9 calls of
an idempotent tool, then the reply). Sessions run through the session tree (``Runtime.start``, the
local backend) on SQLite (WAL, durability normal), one database per configuration: durable
deltas on (the agent's default ``DeltaWindow``) and off (``delta_window=None``, live-only deltas).
Two pairs:

- ``fast``: the model takes no time, so the figure is the engine's own cost of a step. One
  session runs its turns one after another; the two configurations alternate round by round, so
  a noisy neighbour hits both alike. steps/s is the median of the rounds, and the ratio on/off
  is read against the target (on costs at most 10%).
- ``paced``: each delta comes 2 ms after the last (100 ms of streaming a step) and several
  sessions stream at once, so the window has time to fill: the events written per step show how
  many writes the window makes of 50 deltas.

For each, the events stored per step (all of them, and the delta events alone) and the bytes of
the ``events`` table and its index per step (SQLite's ``dbstat``, warm-up turns counted).
"""

from __future__ import annotations

import asyncio
import sqlite3
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.cli import in_temp_folder, main_of, suite_entry
from benchmarks.harness.model import BenchModel
from benchmarks.harness.report import RESULTS_DIR, Clock, Report, Row, finish, mode_of, row
from repertory import Agent, DeltaWindow, ModelMessage, Runtime, tool
from repertory.testing import ScriptedModel

__all__ = ["NAME", "PLOTS", "REPORT", "DeltasReport", "Pair", "Side", "main", "measure", "run_suite"]

NAME = "deltas"
PLOTS: list[Any] = []
CHUNKS = 50
TEXT = "".join(f"token{i:03d}" for i in range(CHUNKS))[: CHUNKS * 8]  # 400 characters, 8 a delta
STEPS_PER_TURN = 10
TARGET_COST = 0.10
# (rounds, sessions at once, turns each) per pair and mode.
SIZES = {
    "full": {"fast": (9, 1, 100), "paced": (3, 20, 1)},
    "quick": {"fast": (2, 1, 2), "paced": (1, 3, 1)},
}
PACE_S = {"fast": 0.0, "paced": 0.002}


class Side(BenchModel):
    """One configuration of a pair: its steps/s by round, and what it stored per step."""

    delta_window: str
    steps_per_s_rounds: list[float]
    steps_per_s: float
    events_per_step: float
    delta_events_per_step: float
    events_bytes_per_step: float


class Pair(BenchModel):
    """Durable deltas on and off under one model pace."""

    name: str
    chunk_delay_ms: float
    rounds: int
    sessions: int
    turns_each: int
    on: Side
    off: Side
    ratio: float
    """steps/s on over steps/s off (medians)."""


class DeltasReport(Report):
    """``benchmarks/results/deltas.json``."""

    store: str
    deltas_per_step: int
    steps_per_turn: int
    fast: Pair
    paced: Pair

    def summarise(self) -> list[Row]:
        """The cost of durable deltas with a fast model, and what each pair stored per step."""
        f, p = self.fast, self.paced
        return [
            row("durable deltas: steps/s lost, zero-delay model, 50 deltas a step", round((1 - f.ratio) * 100, 1), "%",
                TARGET_COST * 100,
                note=f"on {f.on.steps_per_s:,.0f} vs off {f.off.steps_per_s:,.0f} steps/s (median of {f.rounds} "
                     f"alternating rounds); events/step {f.on.events_per_step:.2f} vs {f.off.events_per_step:.2f}, "
                     f"events table {f.on.events_bytes_per_step:,.0f} vs {f.off.events_bytes_per_step:,.0f} B/step"),
            row(f"durable deltas: delta events written per step, 50 deltas {p.chunk_delay_ms:g} ms apart",
                round(p.on.delta_events_per_step, 2), "events",
                note=f"{p.sessions} sessions at once; events/step {p.on.events_per_step:.2f} on vs "
                     f"{p.off.events_per_step:.2f} off; events table {p.on.events_bytes_per_step:,.0f} vs "
                     f"{p.off.events_bytes_per_step:,.0f} B/step; steps/s {p.on.steps_per_s:,.1f} vs "
                     f"{p.off.steps_per_s:,.1f}"),
        ]  # fmt: skip

    def render(self) -> str:
        """The summary lines printed after a run."""
        return "\n".join(f"  {r.figure}: {r.value} {r.unit}  {r.note}" for r in self.rows())


REPORT = DeltasReport


@tool(idempotent=True)
def note(i: int) -> str:
    """Take a note (instant: the model is the only work)."""
    return f"noted {i}"


def _agent(pace_s: float, window: DeltaWindow | None) -> Agent:
    def step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        done = 0
        for m in reversed(messages):  # this turn's steps so far (the turn's user message ends them)
            if m.role == "user":
                break
            done += m.role == "assistant"
        reply: dict[str, Any] = {"text": TEXT, "chunks": CHUNKS, "chunk_delay": pace_s, "usage": {}}
        if done < STEPS_PER_TURN - 1:
            reply |= {"tool": "note", "args": {"i": done}}
        return reply

    return Agent(name="streamer", model=ScriptedModel(step), tools=[note], delta_window=window,
                 max_steps=STEPS_PER_TURN)  # fmt: skip


async def _sample(rt: Runtime, sessions: int, turns: int) -> float:
    """steps/s of ``sessions`` fresh sessions each running ``turns`` turns one after another."""
    handles = [await rt.create_session(agent="streamer") for _ in range(sessions)]

    async def one(h: Any) -> None:
        for t in range(turns):
            result = await h.run(f"turn {t}")
            if result.status != "done" or result.text != TEXT:
                raise RuntimeError(f"a turn ended {result.status}: {result.text!r}")

    started = time.perf_counter()
    await asyncio.gather(*(one(h) for h in handles))
    return sessions * turns * STEPS_PER_TURN / (time.perf_counter() - started)


def _stored(db: Path, steps: int) -> tuple[float, float, float]:
    """Events per step, delta events per step, bytes of the events table and its index per step."""
    conn = sqlite3.connect(db)
    try:
        events, deltas = conn.execute(
            "SELECT count(*), coalesce(sum(type IN ('text.delta', 'reasoning.delta')), 0) FROM events"
        ).fetchone()
        (pages,) = conn.execute("SELECT sum(pgsize) FROM dbstat WHERE name IN ('events', 'events_by_seq')").fetchone()
    finally:
        conn.close()
    return events / steps, deltas / steps, pages / steps


async def _pair(name: str, rounds: int, sessions: int, turns: int, folder: Path) -> Pair:
    pace = PACE_S[name]
    windows = {"on": DeltaWindow(), "off": None}
    dbs = {k: folder / f"{name}-{k}.db" for k in windows}
    runtimes = {k: await Runtime.start(f"sqlite:///{dbs[k]}", agents={"streamer": _agent(pace, w)},
                                       idle_timeout=3600) for k, w in windows.items()}  # fmt: skip
    rates: dict[str, list[float]] = {k: [] for k in windows}
    try:
        for rt in runtimes.values():
            await _sample(rt, 1, 1)  # warm imports and caches
        for _ in range(rounds):  # alternate, so drift hits both alike
            for k, rt in runtimes.items():
                rates[k].append(await _sample(rt, sessions, turns))
                print(f"  {name} deltas {k:3}: {rates[k][-1]:,.1f} steps/s", flush=True)
    finally:
        for rt in runtimes.values():
            await rt.close()
    steps = (1 + rounds * sessions * turns) * STEPS_PER_TURN
    sides = {}
    for k, w in windows.items():
        per_step, deltas, size = _stored(dbs[k], steps)
        label = "off (None)" if w is None else f"on ({w.ms} ms, {w.max_bytes} B)"
        sides[k] = Side(delta_window=label, steps_per_s_rounds=[round(r, 1) for r in rates[k]],
                        steps_per_s=round(statistics.median(rates[k]), 1), events_per_step=round(per_step, 3),
                        delta_events_per_step=round(deltas, 3), events_bytes_per_step=round(size, 1))  # fmt: skip
    if sides["on"].delta_events_per_step == 0 or sides["off"].delta_events_per_step != 0:
        raise RuntimeError("durable deltas on stored no delta event, or off stored some")
    ratio = round(sides["on"].steps_per_s / sides["off"].steps_per_s, 4)
    return Pair(name=name, chunk_delay_ms=pace * 1000, rounds=rounds, sessions=sessions, turns_each=turns,
                on=sides["on"], off=sides["off"], ratio=ratio)  # fmt: skip


async def measure_async(quick: bool, folder: Path) -> DeltasReport:
    """Both pairs, fast first."""
    mode = mode_of(quick)
    clock = Clock.start(NAME, mode)
    pairs = {name: await _pair(name, *size, folder) for name, size in SIZES[mode].items()}
    report = DeltasReport(**clock.frame(), store="sqlite (WAL, durability normal)", deltas_per_step=CHUNKS,
                          steps_per_turn=STEPS_PER_TURN, fast=pairs["fast"], paced=pairs["paced"])  # fmt: skip
    return finish(report, clock)


def measure(quick: bool) -> DeltasReport:
    """The whole measurement in a fresh temporary folder."""
    return in_temp_folder(NAME, measure_async, quick)


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> DeltasReport:
    """The suite's entry: measure, print, write ``out_dir/deltas.json``."""
    return suite_entry(NAME, measure, quick, out_dir)


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.deltas [--quick] [--out PATH]``."""
    main_of(NAME, __doc__, "2 rounds of 2 turns, 3 paced sessions (seconds; figures mean nothing)", measure, argv)


if __name__ == "__main__":
    main()
