"""Budgets benchmark: what checking a budget costs a model step, with and without one, in one run.

Run ``python -m benchmarks.budgets [--quick] [--out PATH]``; it prints the figures and writes
``benchmarks/results/budgets.json``. Nothing here asserts a speed.

A turn is 10 steps (9 calls of an idempotent tool, then the reply) of a model that takes no
time, so the figure is the engine's own cost of a step. Sessions run through the session tree
(``Runtime.start``, the local backend) on SQLite (WAL, durability normal), one database per
configuration: no budget; a run budget (``Agent(budget=...)``, checked in memory); a tree budget
(``create_session(budget=...)``: a ledger read before each model request and each batch of tool
calls, and the spend added by each checkpoint's own transaction). The caps are far away, so every
check passes. The configurations alternate round by round, so a noisy neighbour hits all alike;
steps/s is the median of the rounds and each budget's cost is read against no budget (target: at
most 5% of a step).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.cli import in_temp_folder, main_of, suite_entry
from benchmarks.harness.model import BenchModel
from benchmarks.harness.report import RESULTS_DIR, Clock, Report, Row, finish, mode_of, row
from repertory import Agent, Budget, ModelMessage, Runtime, tool
from repertory.testing import ScriptedModel

__all__ = ["NAME", "PLOTS", "REPORT", "BudgetsReport", "Side", "main", "measure", "run_suite"]

NAME = "budgets"
PLOTS: list[Any] = []
STEPS_PER_TURN = 10
TARGET_COST = 0.05
FAR = Budget(max_cost=1e12, max_tokens=10**15, max_model_requests=10**12, max_tool_calls=10**12)
# (rounds, turns each) per mode.
SIZES = {"full": (9, 100), "quick": (2, 2)}
SIDES = ("none", "run", "tree")


class Side(BenchModel):
    """One configuration: its steps/s by round and their median."""

    budget: str
    steps_per_s_rounds: list[float]
    steps_per_s: float
    cost: float
    """1 - steps/s over no budget's (medians): the share of a step the checks take."""


class BudgetsReport(Report):
    """``benchmarks/results/budgets.json``."""

    store: str
    steps_per_turn: int
    rounds: int
    turns_each: int
    none: Side
    run: Side
    tree: Side

    def summarise(self) -> list[Row]:
        """The share of a step each kind of budget costs."""
        n, r, t = self.none, self.run, self.tree
        return [
            row("tree budget: share of a step its checks take, zero-delay model", round(t.cost * 100, 1), "%",
                TARGET_COST * 100,
                note=f"{t.steps_per_s:,.0f} vs {n.steps_per_s:,.0f} steps/s without a budget (median of "
                     f"{self.rounds} alternating rounds, SQLite)"),
            row("run budget (Agent(budget=)): share of a step its checks take", round(r.cost * 100, 1), "%",
                TARGET_COST * 100, note=f"{r.steps_per_s:,.0f} vs {n.steps_per_s:,.0f} steps/s"),
        ]  # fmt: skip

    def render(self) -> str:
        """The summary lines printed after a run."""
        return "\n".join(f"  {r.figure}: {r.value} {r.unit}  {r.note}" for r in self.rows())


REPORT = BudgetsReport


@tool(idempotent=True)
def note(i: int) -> str:
    """Take a note (instant: the model is the only work)."""
    return f"noted {i}"


def _agent(budget: Budget | None) -> Agent:
    def step(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
        done = 0
        for m in reversed(messages):  # this turn's steps so far (the turn's user message ends them)
            if m.role == "user":
                break
            done += m.role == "assistant"
        reply: dict[str, Any] = {"text": "ok", "usage": {"input_tokens": 10, "output_tokens": 5}, "cost": 0.001}
        if done < STEPS_PER_TURN - 1:
            reply |= {"tool": "note", "args": {"i": done}}
        return reply

    return Agent(name="spender", model=ScriptedModel(step), tools=[note], budget=budget, max_steps=STEPS_PER_TURN)


async def _sample(rt: Runtime, budget: Budget | None, turns: int) -> float:
    """steps/s of one fresh session running ``turns`` turns one after another."""
    h = await rt.create_session(agent="spender", budget=budget)
    started = time.perf_counter()
    for t in range(turns):
        result = await h.run(f"turn {t}")
        if result.status != "done":
            raise RuntimeError(f"a turn ended {result.status}")
    return turns * STEPS_PER_TURN / (time.perf_counter() - started)


async def measure_async(quick: bool, folder: Path) -> BudgetsReport:
    """Every configuration, alternating round by round."""
    mode = mode_of(quick)
    clock = Clock.start(NAME, mode)
    rounds, turns = SIZES[mode]
    agents = {"none": _agent(None), "run": _agent(FAR), "tree": _agent(None)}
    tree_budget = {"none": None, "run": None, "tree": FAR}
    runtimes = {k: await Runtime.start(f"sqlite:///{folder / f'{k}.db'}", agents={"spender": a}, idle_timeout=3600)
                for k, a in agents.items()}  # fmt: skip
    rates: dict[str, list[float]] = {k: [] for k in SIDES}
    try:
        for k, rt in runtimes.items():
            await _sample(rt, tree_budget[k], 1)  # warm imports and caches
        for _ in range(rounds):
            for k, rt in runtimes.items():
                rates[k].append(await _sample(rt, tree_budget[k], turns))
                print(f"  budget {k:4}: {rates[k][-1]:,.1f} steps/s", flush=True)
    finally:
        for rt in runtimes.values():
            await rt.close()
    base = statistics.median(rates["none"])
    labels = {"none": "none", "run": "Agent(budget=...)", "tree": "create_session(budget=...)"}
    sides = {
        k: Side(budget=labels[k], steps_per_s_rounds=[round(r, 1) for r in rates[k]],
                steps_per_s=round(statistics.median(rates[k]), 1),
                cost=round(1 - statistics.median(rates[k]) / base, 4))
        for k in SIDES
    }  # fmt: skip
    report = BudgetsReport(**clock.frame(), store="sqlite (WAL, durability normal)", steps_per_turn=STEPS_PER_TURN,
                           rounds=rounds, turns_each=turns, **sides)  # fmt: skip
    return finish(report, clock)


def measure(quick: bool) -> BudgetsReport:
    """The whole measurement in a fresh temporary folder."""
    return in_temp_folder(NAME, measure_async, quick)


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> BudgetsReport:
    """The suite's entry: measure, print, write ``out_dir/budgets.json``."""
    return suite_entry(NAME, measure, quick, out_dir)


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.budgets [--quick] [--out PATH]``."""
    main_of(NAME, __doc__, "2 rounds of 2 turns (seconds; figures mean nothing)", measure, argv)


if __name__ == "__main__":
    main()
