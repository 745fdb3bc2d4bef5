"""Process settings: the collector's thresholds, ``gc.freeze()`` after start-up, and uvloop.

What a process repertory owns (``repertory serve``, ``ui``, ``mcp``, ``demo``, a Ray host) sets for
itself, measured on the workload those processes run: many resident sessions, each running turns
at once (2,000 sessions x 3 turns of two steps, an idempotent tool then the reply, a model that
takes no time; the local runtime on SQLite). Each configuration runs in a fresh process, so one's
settings never leak into the next; the configurations alternate round by round, and turns/s (one
value a round) is read as a ratio of medians to the interpreter's defaults:

- ``default``: the interpreter's collector thresholds, asyncio's loop (what a library caller keeps);
- ``tuned``: ``tune_gc()``;
- ``tuned+freeze``: ``tune_gc()`` and ``freeze_startup()`` once the runtime has started (what the
  processes repertory owns do);
- ``tuned+freeze+uvloop``: the same on uvloop's event loop, when uvloop is installed (the
  ``bench`` extra has it; repertory does not depend on it: this row says whether it would earn that).

Each process also reports the full collections its turns triggered, and then what one full pass
costs with every session still resident, the objects ``freeze_startup`` kept out of it or not.

``python -m benchmarks.gc_settings [--quick]``.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.command import Options, main
from benchmarks.harness.figures import Figures

STEPS_PER_TURN = 2
SIZES = {"full": (5, 2_000, 3), "quick": (1, 50, 1)}
"""Rounds, sessions, turns each, per mode."""
PASSES = 9


async def _workload(db: Path, config: str, sessions: int, turns: int) -> dict[str, Any]:
    """One process's run: start, apply ``config``, then every session runs its turns at once."""
    from repertory import Agent, ModelMessage, Runtime, SessionHandle, tool
    from repertory.runtime import freeze_startup, tune_gc
    from repertory.testing import ScriptedModel

    @tool(idempotent=True)
    def note(i: int) -> str:
        """Take a note."""
        return f"noted {i}"

    def step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        asked = messages[-1].role == "user"
        return {"tool": "note", "args": {"i": len(messages)}} if asked else {"text": "done"}

    if config != "default":
        tune_gc()
    agents = {"worker": Agent(name="worker", model=ScriptedModel(step), tools=[note], max_steps=STEPS_PER_TURN)}
    async with await Runtime.start(f"sqlite:///{db}", agents=agents, idle_timeout=3600) as rt:
        if "freeze" in config:
            freeze_startup()
        handles = await rt.create_sessions("worker", sessions)
        before = gc.get_stats()[2]["collections"]

        async def one(h: SessionHandle) -> None:
            for t in range(turns):
                if (await h.run(f"turn {t}")).status != "done":
                    raise RuntimeError("a turn did not finish")

        started = time.perf_counter()
        await asyncio.gather(*(one(h) for h in handles))
        elapsed = time.perf_counter() - started
        gen2 = gc.get_stats()[2]["collections"] - before
        passes = []
        for _ in range(PASSES):  # what one full pass costs now, every session resident
            t = time.perf_counter()
            gc.collect()
            passes.append(time.perf_counter() - t)
    return {"turns_per_s": sessions * turns / elapsed, "gen2": gen2, "passes": passes, "frozen": gc.get_freeze_count()}


def _child(argv: list[str]) -> None:
    """``--child CONFIG DB SESSIONS TURNS``: run one configuration and print what it measured as JSON."""
    config, db, sessions, turns = argv[0], Path(argv[1]), int(argv[2]), int(argv[3])
    work = _workload(db, config, sessions, turns)
    if config.endswith("uvloop"):
        out = importlib.import_module("uvloop").run(work)  # measured when installed, never a dependency
    else:
        out = asyncio.run(work)
    print(json.dumps(out))


def scenario(figures: Figures, options: Options) -> None:
    """Every configuration in a process of its own, alternating round by round."""
    rounds, sessions, turns = SIZES[options.mode]
    names = ["default", "tuned", "tuned+freeze"]
    if importlib.util.find_spec("uvloop") is not None:
        names.append("tuned+freeze+uvloop")
        figures.fact("uvloop", str(importlib.import_module("uvloop").__version__))
    else:
        figures.fact("uvloop", "not installed: its configuration not measured")
    figures.fact("workload", f"{sessions:,} sessions x {turns} turns of {STEPS_PER_TURN} steps at once, "
                 f"{rounds} alternating round(s), a process each, SQLite")  # fmt: skip
    got: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory(prefix="repertory-gc-settings-") as folder:
        for r in range(rounds):
            for name in names:
                db = Path(folder) / f"{name.replace('+', '-')}-{r}.db"
                child = ["--child", name, str(db), str(sessions), str(turns)]
                cmd = [sys.executable, "-m", "benchmarks.gc_settings", *child]
                done = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    raise RuntimeError(f"{name} failed: {done.stderr[-2000:]}")
                got[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(f"  {name:20}: {got[name][-1]['turns_per_s']:,.1f} turns/s", flush=True)
    base = statistics.median(g["turns_per_s"] for g in got["default"])
    full_pass: dict[str, float] = {}
    for name in names:
        rates = [g["turns_per_s"] for g in got[name]]
        figures.value(f"turns/s, {name}", rates, "turns/s", note="one value a round, each a fresh process")
        if name != "default":
            figures.value(f"turns/s, {name} / defaults", statistics.median(rates) / base, "x",
                          note="medians of the alternating rounds")  # fmt: skip
        figures.count(f"full collections during the turns, {name} (last round)", got[name][-1]["gen2"])
        passes = [p for g in got[name] for p in g["passes"]]
        full_pass[name] = statistics.median(passes)
        figures.time(f"one full pass afterwards, {name}", passes, note=f"{PASSES} a round, every session resident")
        if "freeze" in name:
            figures.count(f"objects frozen, {name}", got[name][-1]["frozen"])
    figures.value("one full pass afterwards, tuned+freeze / tuned", full_pass["tuned+freeze"] / full_pass["tuned"], "x",
                  note="with freeze_startup against without, both tuned")  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2:])
    else:
        main("gc_settings", __doc__, scenario=scenario)
