"""Durable deltas: what storing a reply's text deltas costs a step, on against off, in one run.

The model streams every step's text (400 characters) as 50 deltas; a turn is 10 steps (9 calls of
an idempotent tool, then the reply). Sessions run through the session tree (``Runtime.start``, the
local backend) on SQLite (WAL, durability normal), one database per configuration: durable
deltas on (the agent's default ``DeltaWindow``) and off (``delta_window=None``, live-only deltas).
Two pairs, each alternating on and off round by round, so a noisy neighbour hits both alike:

- ``fast``: the model takes no time, so the figure is the engine's own cost of a step: one
  session runs its turns one after another; the steps/s lost with deltas on is read against the
  target (on costs at most 10%).
- ``paced``: each delta comes 2 ms after the last (100 ms of streaming a step) and several
  sessions stream at once, so the window has time to fill: the events written per step show how
  many writes the window makes of 50 deltas.

For each, the events stored per step (all of them, and the delta events alone) and the bytes of
the ``events`` table and its index per step (SQLite's ``dbstat``, warm-up turns counted).

``python -m benchmarks.deltas [--quick]``.
"""

from __future__ import annotations

import asyncio
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.command import Options, main
from benchmarks.harness.figures import Figures, Target
from repertory import Agent, DeltaWindow, ModelMessage, Runtime, SessionHandle, tool
from repertory.testing import ScriptedModel

CHUNKS = 50
TEXT = "".join(f"token{i:03d}" for i in range(CHUNKS))[: CHUNKS * 8]  # 400 characters, 8 a delta
STEPS_PER_TURN = 10
# (rounds, sessions at once, turns each) per pair and mode.
SIZES = {"full": {"fast": (9, 1, 100), "paced": (3, 20, 1)}, "quick": {"fast": (2, 1, 2), "paced": (1, 3, 1)}}
PACE_S = {"fast": 0.0, "paced": 0.002}


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

    async def one(h: SessionHandle) -> None:
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


async def _pair(figures: Figures, name: str, size: tuple[int, int, int], folder: Path) -> None:
    rounds, sessions, turns = size
    windows = {"on": DeltaWindow(), "off": None}
    dbs = {k: folder / f"{name}-{k}.db" for k in windows}
    runtimes = {k: await Runtime.start(f"sqlite:///{dbs[k]}", agents={"streamer": _agent(PACE_S[name], w)},
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
    figures.fact(f"{name} pair", f"{rounds} alternating rounds of {sessions} session(s) x {turns} turn(s), "
                 f"deltas {PACE_S[name] * 1000:g} ms apart")  # fmt: skip
    delta_events = {}
    for k, w in windows.items():
        per_step, delta_events[k], size_b = _stored(dbs[k], steps)
        label = "off (None)" if w is None else f"on ({w.ms} ms, {w.max_bytes} B)"
        figures.value(f"{name}: steps/s, deltas {k}", rates[k], "steps/s", note=f"delta window {label}")
        figures.value(f"{name}: events per step, deltas {k}", per_step, "events")
        figures.value(f"{name}: delta events per step, deltas {k}", delta_events[k], "events",
                      note=f"of {CHUNKS} deltas a step")  # fmt: skip
        figures.size(f"{name}: events table and index per step, deltas {k}", size_b, note="dbstat, warm-up counted")
    if delta_events["on"] == 0 or delta_events["off"] != 0:
        raise RuntimeError("durable deltas on stored no delta event, or off stored some")
    lost = (1 - statistics.median(rates["on"]) / statistics.median(rates["off"])) * 100
    figures.value(f"{name}: steps/s lost to durable deltas", lost, "%", target=Target(10.0) if name == "fast" else None,
                  note="medians of the rounds, on against off")  # fmt: skip


async def scenario(figures: Figures, options: Options) -> None:
    """Both pairs, fast first, each in its own databases in a temporary folder."""
    figures.fact("store", "sqlite (WAL, durability normal)")
    figures.fact("turn", f"{STEPS_PER_TURN} steps, {CHUNKS} deltas a step")
    with tempfile.TemporaryDirectory(prefix="repertory-deltas-") as folder:
        for name, size in SIZES[options.mode].items():
            await _pair(figures, name, size, Path(folder))


if __name__ == "__main__":
    main("deltas", __doc__, scenario=scenario)
