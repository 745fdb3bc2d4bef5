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
steps/s is the median of the rounds and each budget's cost is read against no budget.

A step is about a millisecond, and rounds of a second each differ by more than the checks cost,
so the share is also measured part by part, in the same run: the two checks a tree budget makes
per step (``BudgetGate.check`` before the request and before the tool call, each a ledger read on
the store), and a checkpoint with its spend against the same checkpoint without (alternating, on
one store), each the median of many; their sum over the time of a step without a budget (the
``none`` median) is the share read against the target (at most 5% of a step).

Last, the overshoot of a tree budget (``max_model_requests=9``) under parallel delegation: a root
hands a task to 4 (then 8) workers at once, each looping on a tool with a model that takes 5 ms a
reply, on SQLite and on PostgreSQL (a throwaway server); repeated, the requests past the cap per
tree are counted (the budgets guide bounds them by the workers running in parallel).
"""

from __future__ import annotations

import contextlib
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.cli import in_temp_folder, main_of, suite_entry
from benchmarks.harness.model import BenchModel
from benchmarks.harness.report import RESULTS_DIR, Clock, Report, Row, finish, mode_of, row
from repertory import Agent, Budget, BudgetExceeded, ModelMessage, Runtime, Spend, tool
from repertory.core.budget import SpendDelta, tree_scope
from repertory.runtime.budgets import BudgetGate
from repertory.storage.sqlite import SqliteSessionStore
from repertory.testing import ScriptedModel
from repertory.testing.conformance.backend.board import LocalBoard, use_board
from repertory.testing.conformance.backend.doubles import Script
from repertory.testing.conformance.records import history_of, pointers
from repertory.testing.pg_temp import TemporaryPostgres
from repertory.tree.delegation import agent_tool

__all__ = ["NAME", "PLOTS", "REPORT", "BudgetsReport", "Overshoot", "Parts", "Side", "main", "measure", "run_suite"]

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


class Parts(BenchModel):
    """The tree budget's cost per step, part by part (medians, microseconds)."""

    samples: int
    checks_us: float
    """The two checks of a step (before the request, before the tool call)."""
    commit_us: float
    """A checkpoint carrying its spend, less the same checkpoint without."""
    step_us: float
    """A step without a budget (1 / the ``none`` side's steps/s)."""
    share: float
    """(checks + commit) / step."""


class Overshoot(BenchModel):
    """Requests past a tree's cap over repeated trees, per store and parallel workers."""

    store: str
    workers: int
    cap: int
    overshoots: list[int]
    worst: int


class BudgetsReport(Report):
    """``benchmarks/results/budgets.json``."""

    store: str
    steps_per_turn: int
    rounds: int
    turns_each: int
    none: Side
    run: Side
    tree: Side
    parts: Parts
    overshoot: list[Overshoot]

    def summarise(self) -> list[Row]:
        """The share of a step each kind of budget costs."""
        n, r, t, p = self.none, self.run, self.tree, self.parts
        return [
            row("tree budget: share of a step its checks and its ledger write take (SQLite)",
                round(p.share * 100, 1), "%", TARGET_COST * 100,
                note=f"two checks {p.checks_us:.1f} us + the spend in a checkpoint {p.commit_us:.1f} us, of a "
                     f"{p.step_us:.0f} us step (medians of {p.samples})"),
            row("tree budget: steps/s lost, zero-delay model", round(t.cost * 100, 1), "%",
                note=f"{t.steps_per_s:,.0f} vs {n.steps_per_s:,.0f} steps/s without a budget (median of "
                     f"{self.rounds} alternating rounds, SQLite; rounds differ by more than the checks cost)"),
            *(
                row(f"tree budget: requests past the cap, {o.workers} workers in parallel, {o.store}", o.worst,
                    "requests", o.workers, note=f"cap {o.cap}; over {len(o.overshoots)} trees: {o.overshoots}")
                for o in self.overshoot
            ),
            row("run budget (Agent(budget=), checked in memory): steps/s lost, zero-delay model",
                round(r.cost * 100, 1), "%", note=f"{r.steps_per_s:,.0f} vs {n.steps_per_s:,.0f} steps/s"),
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


async def _parts(folder: Path, samples: int) -> tuple[float, float]:
    """Medians (us) of a tree budget's two checks of a step, and of its spend's share of a checkpoint."""
    store = await SqliteSessionStore.open(folder / "parts.db")
    try:
        scope = tree_scope("root")
        await store.set_budget(scope, FAR)
        gate = BudgetGate(store, None, (scope,))
        history = history_of("hello")
        run, thread = pointers(history, thread_id="t0", run_id="r0")
        await store.commit_session(run=run, thread=thread, history=history)
        gate.open(run)
        checks: list[float] = []
        for _ in range(samples):
            started = time.perf_counter()
            await gate.check(run)
            await gate.check(run, tool_calls=1)
            checks.append(time.perf_counter() - started)
        spent = SpendDelta((scope,), Spend(cost=0.001, tokens=15, model_requests=1, tool_calls=1))
        times: dict[bool, list[float]] = {True: [], False: []}
        for i in range(samples):
            for carry in (True, False):  # alternate, so drift hits both alike
                base = history.revision_id
                history.append(ModelMessage.assistant(f"step {i} {carry}"))
                run, thread = pointers(history, thread_id="t0", run_id="r0", step_index=2 * i + carry)
                started = time.perf_counter()
                await store.commit_session(run=run, thread=thread, history=history, base_revision_id=base,
                                           spend=spent if carry else None)  # fmt: skip
                times[carry].append(time.perf_counter() - started)
    finally:
        await store.close()
    commit = statistics.median(times[True]) - statistics.median(times[False])
    return statistics.median(checks) * 1e6, max(commit, 0.0) * 1e6


async def _overshoot(url: str, workers: int, cap: int) -> int:
    """Requests a tree of ``workers`` parallel delegations spent past ``cap``."""
    boss = Script({"go": [{"tools": [{"tool": "worker", "args": {"task": f"w{i}"}} for i in range(workers)]}]})
    priced = {"usage": {"input_tokens": 10, "output_tokens": 10}, "cost": 0.01}
    plans: dict[str, list[Any]] = {}
    for i in range(workers):
        plans[f"w{i}"] = [{"tool": "note", "args": {"i": k}, **priced} for k in range(6)] + [{"text": "done", **priced}]
    worker = Script(plans)
    agents = {"boss": boss.agent("boss", tools=[agent_tool("worker")]),
              "worker": Agent(name="worker", model=worker.model(delay=0.005), tools=[note])}  # fmt: skip
    with use_board(LocalBoard()):
        async with await Runtime.start(store=url, agents=agents) as rt:
            root = await rt.create_session(agent="boss", budget=Budget(max_model_requests=cap))
            with contextlib.suppress(BudgetExceeded):
                await (await root.send("go")).result()
            ledger = await root.budget()
    if ledger is None:
        raise RuntimeError("the tree's ledger is gone")
    return ledger.spend.model_requests - cap


async def _overshoots(folder: Path, repeats: int) -> list[Overshoot]:
    cap, out = 9, []
    with TemporaryPostgres() as pg:
        for store in ("sqlite", "postgresql"):
            for workers in (4, 8):
                seen = []
                for n in range(repeats):
                    url = f"sqlite:///{folder / f'over-{workers}-{n}.db'}" if store == "sqlite" else pg.url
                    seen.append(await _overshoot(url, workers, cap))
                print(f"  overshoot {store} {workers} workers: {seen}", flush=True)
                out.append(Overshoot(store=store, workers=workers, cap=cap, overshoots=seen, worst=max(seen)))
    return out


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
    samples = 200 if quick else 5000
    checks_us, commit_us = await _parts(folder, samples)
    step_us = 1e6 / sides["none"].steps_per_s
    parts = Parts(samples=samples, checks_us=round(checks_us, 2), commit_us=round(commit_us, 2),
                  step_us=round(step_us, 1), share=round((checks_us + commit_us) / step_us, 4))  # fmt: skip
    overshoot = await _overshoots(folder, 2 if quick else 10)
    report = BudgetsReport(**clock.frame(), store="sqlite (WAL, durability normal)", steps_per_turn=STEPS_PER_TURN,
                           rounds=rounds, turns_each=turns, parts=parts, overshoot=overshoot, **sides)  # fmt: skip
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
