"""Process settings benchmark: the collector's thresholds, ``gc.freeze()`` after start-up, and uvloop.

Run ``python -m benchmarks.gc_settings [--quick] [--out PATH]``; it prints the figures and writes
``benchmarks/results/gc_settings.json``. Nothing here asserts a speed.

What a process repertory owns (``repertory serve``, ``ui``, ``mcp``, ``demo``, a Ray host) sets for
itself, measured on the workload those processes run: many resident sessions, each running turns
at once (2,000 sessions x 3 turns of two steps, an idempotent tool then the reply, a model that
takes no time; the local runtime on SQLite). Each configuration runs in a fresh process, so one's
settings never leak into the next; the configurations alternate round by round, and turns/s is the
median of the rounds, read as a ratio to the interpreter's defaults:

- ``default``: the interpreter's collector thresholds, asyncio's loop (what a library caller keeps);
- ``tuned``: ``tune_gc()``;
- ``tuned+freeze``: ``tune_gc()`` and ``freeze_startup()`` once the runtime has started (what the
  processes repertory owns do);
- ``tuned+freeze+uvloop``: the same on uvloop's event loop, when uvloop is installed (it is not a
  dependency: this row says whether it would earn one).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.cli import in_temp_folder, main_of, suite_entry
from benchmarks.harness.model import BenchModel
from benchmarks.harness.report import RESULTS_DIR, Clock, Report, Row, finish, mode_of, row

__all__ = ["NAME", "PLOTS", "REPORT", "Config", "GcSettingsReport", "main", "measure", "run_suite"]

NAME = "gc_settings"
PLOTS: list[Any] = []
STEPS_PER_TURN = 2
# (rounds, sessions, turns each) per mode.
SIZES = {"full": (5, 2_000, 3), "quick": (1, 50, 1)}


class Config(BenchModel):
    """One configuration's turns/s by round, their median and its ratio to the defaults."""

    name: str
    turns_per_s_rounds: list[float]
    turns_per_s: float
    ratio: float
    gc_collections_gen2: int
    """Full collections in the last round."""
    full_pass_ms: float
    """One full collection afterwards, every session still resident (median of 9, last round)."""
    frozen: int
    """Objects ``freeze_startup`` kept out of every pass (0 without it)."""


class GcSettingsReport(Report):
    """``benchmarks/results/gc_settings.json``."""

    rounds: int
    sessions: int
    turns_each: int
    uvloop: str | None
    configs: list[Config]

    def summarise(self) -> list[Row]:
        """Each configuration's turns/s against the interpreter's defaults."""
        base = next(c for c in self.configs if c.name == "default")
        return [
            row(f"{self.sessions:,} sessions x {self.turns_each} turns: turns/s with {c.name} / defaults", c.ratio, "x",
                note=f"{c.turns_per_s:,.0f} vs {base.turns_per_s:,.0f} turns/s (median of {self.rounds} alternating "
                     f"rounds, a process each); full collections in the last round {c.gc_collections_gen2} vs "
                     f"{base.gc_collections_gen2}; one full pass afterwards {c.full_pass_ms:g} vs "
                     f"{base.full_pass_ms:g} ms ({c.frozen:,} objects frozen)")
            for c in self.configs
            if c.name != "default"
        ]  # fmt: skip

    def render(self) -> str:
        """The summary lines printed after a run."""
        return "\n".join(f"  {r.figure}: {r.value} {r.unit}  {r.note}" for r in self.rows())


REPORT = GcSettingsReport


async def _workload(db: Path, config: str, sessions: int, turns: int) -> dict[str, Any]:
    """One process's run: start, apply ``config``, then every session runs its turns at once."""
    import gc

    from repertory import Agent, ModelMessage, Runtime, tool
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

        async def one(h: Any) -> None:
            for t in range(turns):
                if (await h.run(f"turn {t}")).status != "done":
                    raise RuntimeError("a turn did not finish")

        started = time.perf_counter()
        await asyncio.gather(*(one(h) for h in handles))
        elapsed = time.perf_counter() - started
        gen2 = gc.get_stats()[2]["collections"] - before
        passes = []
        for _ in range(9):  # what one full pass costs now, every session resident
            t = time.perf_counter()
            gc.collect()
            passes.append(time.perf_counter() - t)
    return {
        "turns_per_s": sessions * turns / elapsed,
        "gen2": gen2,
        "full_pass_ms": statistics.median(passes) * 1000,
        "frozen": gc.get_freeze_count(),
    }


def _child(argv: list[str]) -> None:
    """``--child CONFIG DB SESSIONS TURNS``: run one configuration and print its figures as JSON."""
    config, db, sessions, turns = argv[0], Path(argv[1]), int(argv[2]), int(argv[3])
    coroutine = _workload(db, config, sessions, turns)
    if config.endswith("uvloop"):
        uvloop: Any = importlib.import_module("uvloop")  # measured when installed, never a dependency
        out = uvloop.run(coroutine)
    else:
        out = asyncio.run(coroutine)
    print(json.dumps(out))


def _configs() -> list[str]:
    names = ["default", "tuned", "tuned+freeze"]
    if importlib.util.find_spec("uvloop") is not None:
        names.append("tuned+freeze+uvloop")
    return names


async def measure_async(quick: bool, folder: Path) -> GcSettingsReport:
    """Every configuration in a process of its own, alternating round by round."""
    mode = mode_of(quick)
    clock = Clock.start(NAME, mode)
    rounds, sessions, turns = SIZES[mode]
    names = _configs()
    rates: dict[str, list[float]] = {n: [] for n in names}
    gen2: dict[str, int] = {}
    passes: dict[str, tuple[float, int]] = {}
    for r in range(rounds):
        for name in names:
            db = folder / f"{name}-{r}.db".replace("+", "-")
            command = [
                sys.executable,
                "-m",
                "benchmarks.gc_settings",
                "--child",
                name,
                str(db),
                str(sessions),
                str(turns),
            ]
            done = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: ASYNC221
            if done.returncode != 0:
                raise RuntimeError(f"{name} failed: {done.stderr[-2000:]}")
            got = json.loads(done.stdout.strip().splitlines()[-1])
            rates[name].append(round(got["turns_per_s"], 1))
            gen2[name] = int(got["gen2"])
            passes[name] = (round(float(got["full_pass_ms"]), 1), int(got["frozen"]))
            print(f"  {name:20}: {got['turns_per_s']:,.1f} turns/s, {got['gen2']} full collections", flush=True)
    base = statistics.median(rates["default"])
    configs = [
        Config(name=n, turns_per_s_rounds=rates[n], turns_per_s=round(statistics.median(rates[n]), 1),
               ratio=round(statistics.median(rates[n]) / base, 3), gc_collections_gen2=gen2[n],
               full_pass_ms=passes[n][0], frozen=passes[n][1])
        for n in names
    ]  # fmt: skip
    uvloop = None
    if "tuned+freeze+uvloop" in names:
        uvloop = str(importlib.import_module("uvloop").__version__)
    report = GcSettingsReport(**clock.frame(), rounds=rounds, sessions=sessions, turns_each=turns, uvloop=uvloop,
                              configs=configs)  # fmt: skip
    return finish(report, clock)


def measure(quick: bool) -> GcSettingsReport:
    """The whole measurement in a fresh temporary folder."""
    return in_temp_folder(NAME, measure_async, quick)


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> GcSettingsReport:
    """The suite's entry: measure, print, write ``out_dir/gc_settings.json``."""
    return suite_entry(NAME, measure, quick, out_dir)


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.gc_settings [--quick] [--out PATH]``."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        _child(args[1:])
        return
    main_of(NAME, __doc__, "1 round of 50 sessions x 1 turn (seconds; figures mean nothing)", measure, argv)


if __name__ == "__main__":
    main()
