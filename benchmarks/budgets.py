"""Budgets: what checking a budget costs a model step, with and without one.

A turn is 10 steps (9 calls of an idempotent tool, then the reply) of a model that takes no
time, so the figure is the engine's own cost of a step. Sessions run through the session tree
(``Runtime.start``, the local backend) on SQLite (WAL, durability normal), one database per
configuration: no budget; a run budget (``Agent(budget=...)``, checked in memory); a tree budget
(``create_session(budget=...)``: a ledger read before each model request and each batch of tool
calls, and the spend added by each checkpoint's own transaction). The caps are far away, so every
check passes. pyperf times a turn of each configuration; each budget's steps/s lost is read
against no budget.

A step is about a millisecond, and turns differ by more than the checks cost, so the share is
also timed part by part: the two checks a tree budget makes per step (``BudgetGate.check`` before
the request and before the tool call, each a ledger read on the store), and a checkpoint with its
spend against the same checkpoint without; their sum over a step without a budget is the share
read against the target (at most 5% of a step).

Last, once: the overshoot of a tree budget (``max_model_requests=9``) under parallel delegation:
a root hands a task to 4 (then 8) workers at once, each looping on a tool with a model that takes
5 ms a reply, on SQLite and on PostgreSQL (a throwaway server); repeated, the requests past the
cap per tree are counted (the budgets guide bounds them by the workers running in parallel).

``python -m benchmarks.budgets [--quick]``.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from pathlib import Path
from typing import Any

import pyperf

from benchmarks.harness.command import Options, Timer, main
from benchmarks.harness.figures import Figures, Target
from repertory import Agent, Budget, BudgetExceeded, ModelMessage, Runtime, Spend, tool
from repertory.core.budget import SpendDelta, tree_scope
from repertory.core.history import MessageHistory
from repertory.core.state import RunState
from repertory.runtime.budgets import BudgetGate
from repertory.storage.sqlite import SqliteSessionStore
from repertory.testing import ScriptedModel
from repertory.testing.conformance.backend.board import LocalBoard, use_board
from repertory.testing.conformance.backend.doubles import Script
from repertory.testing.conformance.records import history_of, pointers
from repertory.testing.pg_temp import TemporaryPostgres
from repertory.tree.delegation import agent_tool

STEPS_PER_TURN = 10
FAR = Budget(max_cost=1e12, max_tokens=10**15, max_model_requests=10**12, max_tool_calls=10**12)
KINDS = {
    "none": "no budget",
    "run": "a run budget, Agent(budget=...)",
    "tree": "a tree budget, create_session(budget=...)",
}
CAP = 9
REPEATS = {"full": 10, "quick": 2}


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


class Rig:
    """What the timings of one process use, built when first asked for: a runtime per kind, a bare store."""

    def __init__(self) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="repertory-budgets-")
        self._runtimes: dict[str, Runtime] = {}
        self._store: SqliteSessionStore | None = None
        self.scope = tree_scope("root")
        self.history: MessageHistory = history_of("hello")
        self.steps = 0

    async def runtime(self, kind: str) -> Runtime:
        if kind not in self._runtimes:
            db = Path(self._folder.name) / f"{kind}.db"
            agent = _agent(FAR if kind == "run" else None)
            self._runtimes[kind] = await Runtime.start(f"sqlite:///{db}", agents={"spender": agent}, idle_timeout=3600)
        return self._runtimes[kind]

    async def store(self) -> SqliteSessionStore:
        """A bare store holding a tree budget and one committed run (the parts' timings)."""
        if self._store is None:
            self._store = await SqliteSessionStore.open(Path(self._folder.name) / "parts.db")
            await self._store.set_budget(self.scope, FAR)
            run, thread = pointers(self.history, thread_id="t0", run_id="r0")
            await self._store.commit_session(run=run, thread=thread, history=self.history)
        return self._store

    async def checkpoint(self, spend: SpendDelta | None) -> float:
        """Seconds one engine-style checkpoint of a new message took, carrying ``spend`` or not."""
        store = await self.store()
        base = self.history.revision_id
        self.steps += 1
        self.history.append(ModelMessage.assistant(f"step {self.steps}"))
        run, thread = pointers(self.history, thread_id="t0", run_id="r0", step_index=self.steps)
        started = time.perf_counter()
        await store.commit_session(run=run, thread=thread, history=self.history, base_revision_id=base, spend=spend)
        return time.perf_counter() - started

    async def close(self) -> None:
        for rt in self._runtimes.values():
            await rt.close()
        if self._store is not None:
            await self._store.close()
        self._folder.cleanup()


def timings(timer: Timer, options: Options) -> None:
    """A turn of each kind, then a tree budget's parts; the shares worked out from the medians."""
    rig = Rig()
    turn: dict[str, float] = {}
    for kind, label in KINDS.items():

        async def turns(loops: int, kind: str = kind) -> float:
            rt = await rig.runtime(kind)
            h = await rt.create_session(agent="spender", budget=FAR if kind == "tree" else None)
            started = time.perf_counter()
            for t in range(loops):
                result = await h.run(f"turn {t}")
                if result.status != "done":
                    raise RuntimeError(f"a turn ended {result.status}")
            return time.perf_counter() - started

        bench = timer.bench_async(f"a {STEPS_PER_TURN}-step turn, {label}", turns, note="zero-delay model, SQLite")
        if bench is not None:
            turn[kind] = bench.median()

    async def checks(loops: int) -> float:
        store = await rig.store()
        gate = BudgetGate(store, None, (rig.scope,))
        run = RunState(run_id="r0", thread_id="t0")
        gate.open(run)
        started = time.perf_counter()
        for _ in range(loops):
            await gate.check(run)
            await gate.check(run, tool_calls=1)
        return time.perf_counter() - started

    spent = SpendDelta((rig.scope,), Spend(cost=0.001, tokens=15, model_requests=1, tool_calls=1))

    async def with_spend(loops: int) -> float:
        return sum([await rig.checkpoint(spent) for _ in range(loops)])

    async def without_spend(loops: int) -> float:
        return sum([await rig.checkpoint(None) for _ in range(loops)])

    parts: dict[str, pyperf.Benchmark | None] = {
        "checks": timer.bench_async("a tree budget's two checks of a step", checks,
                                    note="BudgetGate.check before the request and before the tool call"),
        "with": timer.bench_async("a checkpoint carrying its spend", with_spend),
        "without": timer.bench_async("the same checkpoint without a spend", without_spend),
    }  # fmt: skip
    timer.run_until_complete(rig.close())
    figures = timer.figures
    if figures is None or len(turn) < len(KINDS):
        return
    for kind in ("run", "tree"):
        figures.value(f"steps/s lost to {KINDS[kind]}", (1 - turn["none"] / turn[kind]) * 100, "%",
                      note="turn medians; turns differ by more than the checks cost")  # fmt: skip
    medians = {k: b.median() for k, b in parts.items() if b is not None}
    if len(medians) == len(parts):
        commit = medians["with"] - medians["without"]
        figures.time("a tree budget's spend in a checkpoint", commit, note="with less without")
        share = (medians["checks"] + max(commit, 0.0)) / (turn["none"] / STEPS_PER_TURN) * 100
        figures.value(
            "tree budget: share of a step its checks and its ledger write take (SQLite)",
            share,
            "%",
            target=Target(5.0),
            note="two checks + the spend in a checkpoint, over a budgetless step",
        )


async def _overshoot(url: str, workers: int) -> int:
    """Requests a tree of ``workers`` parallel delegations spent past ``CAP``."""
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
            root = await rt.create_session(agent="boss", budget=Budget(max_model_requests=CAP))
            with contextlib.suppress(BudgetExceeded):
                await (await root.send("go")).result()
            ledger = await root.budget()
    if ledger is None:
        raise RuntimeError("the tree's ledger is gone")
    return ledger.spend.model_requests - CAP


async def scenario(figures: Figures, options: Options) -> None:
    """The overshoot of a tree budget under 4 and 8 parallel workers, on SQLite and PostgreSQL."""
    figures.fact("store", "sqlite (WAL, durability normal); the overshoot also on postgresql")
    repeats = REPEATS[options.mode]
    with tempfile.TemporaryDirectory(prefix="repertory-budgets-") as folder, TemporaryPostgres() as pg:
        for store in ("sqlite", "postgresql"):
            for workers in (4, 8):
                seen = []
                for n in range(repeats):
                    url = f"sqlite:///{Path(folder) / f'over-{workers}-{n}.db'}" if store == "sqlite" else pg.url
                    seen.append(await _overshoot(url, workers))
                print(f"  overshoot {store} {workers} workers: {seen}", flush=True)
                figures.value(
                    f"tree budget: requests past the cap, {workers} workers in parallel, {store}",
                    max(seen),
                    "requests",
                    target=Target(workers),
                    note=f"cap {CAP}; trees: {seen}",
                )


if __name__ == "__main__":
    main("budgets", __doc__, timings=timings, scenario=scenario)
