"""Group commit: aggregate model steps/s of 1,000 concurrent sessions, with the store's group commit on and off.

N sessions (1,000; ``--quick`` 200) launched at once (``asyncio.gather``), each ``Session.start()``
of one run whose zero-delay ``ScriptedModel`` calls a tool K times (10; quick 4), then replies: K + 1
model requests a run, and "model steps/s" is all of them over the wall time from launch to the last
reply. The headline tool is the default ``@tool`` (not idempotent: its call is committed before it
runs, then the step: two commits a step). Also timed (full mode): ``@tool(idempotent=True)`` (one
commit a step); a model that hands the loop over once a request (``asyncio.sleep(0)``, as a real
client does: a zero-delay model that never yields makes the sessions run one after another when
every commit is inline); the cyclic collector disabled while timed (an application's choice: it
shows the collector's share); ``tune_gc()``; ``durability="full"`` (a sync a transaction); and
PostgreSQL (a throwaway server, ``synchronous_commit=on``).

On and off run in the same process, alternating round by round (on, off, off, on...) on a fresh
database each, so a change in the machine's load hits both; the ratio is median on over median off.
CPU time a step (``time.process_time``) is given beside wall time, being less disturbed by other
processes, and the collector's time (``gc.callbacks``) as a share, since cProfile bills it to
whatever was running. Where group commit can only cost: one writer committing one engine step at a
time (a 1 KB message), every commit's latency, and one session alone. One more headline round on and
off runs under cProfile (collector off), its own time grouped by layer.

``python -m benchmarks.group_commit [--quick] [--no-postgres]``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import psycopg

from benchmarks.harness.command import Options, main
from benchmarks.harness.commits import EngineSession, make_message
from benchmarks.harness.figures import Figures, Target
from benchmarks.harness.gctime import GcTimer
from benchmarks.harness.profiling import Key, by_category, stats_of
from repertory import Agent, Session, tool
from repertory.core.messages import ModelMessage
from repertory.core.model import ToolSpec
from repertory.core.store import SessionStore
from repertory.errors import StoreError
from repertory.runtime.gc_tuning import tune_gc
from repertory.storage.postgres.store import PostgresSessionStore
from repertory.storage.sqlite.store import Durability, SqliteSessionStore
from repertory.testing import ScriptedModel
from repertory.testing.pg_temp import TemporaryPostgres

T = TypeVar("T")
USAGE = {"input_tokens": 100, "output_tokens": 20}
FINAL = "All records fetched."
PG_TABLES = "repertory.runs, repertory.threads, repertory.history_entries, repertory.history_revisions"


@dataclass(frozen=True)
class Variant:
    """One session workload on one backend."""

    label: str
    backend: str = "sqlite"
    durability: Durability = "normal"
    idempotent: bool = False
    yields: bool = False  # the model hands the loop over once a request, as a real client does
    gc_off: bool = False  # the cyclic collector disabled while timed (an application's choice)
    gc_tuned: bool = False  # the process calls repertory's tune_gc()


HEADLINE = Variant("SQLite, @tool (2 commits/step)")
VARIANTS = (
    HEADLINE,
    Variant("SQLite, @tool(idempotent=True) (1 commit/step)", idempotent=True),
    Variant("SQLite, @tool, model yields once per request", yields=True),
    Variant("SQLite, @tool, cyclic GC disabled while timed", gc_off=True),
    Variant("SQLite, @tool, the process calls tune_gc()", gc_tuned=True),
    Variant("SQLite durability=full, @tool (2 commits/step)", durability="full"),
)
PG_VARIANT = Variant("PostgreSQL, @tool (2 commits/step)", backend="postgres")


@dataclass(frozen=True)
class Plan:
    """The sizes of one mode."""

    sessions: int = 1_000
    steps: int = 10
    rounds: int = 3
    variants: tuple[Variant, ...] = VARIANTS
    lone_commits: int = 3_000
    lone_steps: int = 500
    lone_rounds: int = 6
    postgres: bool = True
    profile: bool = True


PLANS = {"full": Plan(), "quick": Plan(sessions=200, steps=4, rounds=1, variants=(HEADLINE,), lone_commits=300,
                                       lone_steps=40, lone_rounds=2, postgres=False, profile=False)}  # fmt: skip


@dataclass(frozen=True)
class SessionsRound:
    """One timed round of N sessions, each one run of K tool steps and a final reply."""

    sessions: int
    model_steps: int
    seconds: float
    cpu_seconds: float
    gc_seconds: float
    mean_batch: float | None

    @property
    def steps_per_s(self) -> float:
        return self.model_steps / self.seconds


def make_agent(steps: int, idempotent: bool, yields: bool = False) -> Agent:
    """``steps`` tool calls (each answered by ~100 characters), then a final reply; a step function, so
    the figure is the engine's and the store's, not the test double's scan of the conversation."""

    @tool(name="fetch", idempotent=idempotent)
    async def fetch(i: int) -> str:
        """Fetch record ``i``."""
        return f"record {i:06d}: " + "x" * 86

    def script(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        done = (len(messages) - 1) // 2  # the user message, then one call/result pair a step
        if done < steps:
            return {"tool": "fetch", "args": {"i": done}, "usage": USAGE}
        return {"text": FINAL, "usage": USAGE}

    async def yielding(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        await asyncio.sleep(0)
        return script(messages, tools)

    model = ScriptedModel(yielding if yields else script)
    return Agent(name="bench", model=model, tools=[fetch], max_steps=steps + 1)


def _batches(store: SessionStore) -> tuple[int, int] | None:
    return store.group_commit_counts if isinstance(store, SqliteSessionStore | PostgresSessionStore) else None


async def sessions_round(
    store: SessionStore, sessions: int, steps: int, idempotent: bool, profile: cProfile.Profile | None = None,
    *, yields: bool = False, gc_off: bool = False, gc_tuned: bool = False,
) -> SessionsRound:  # fmt: skip
    """``sessions`` sessions at once, each one run to its final reply; ``gc_off`` pauses the collector
    (measured to show its share: the store and the engine never touch it), ``gc_tuned`` applies tune_gc()."""
    agent = make_agent(steps, idempotent, yields)
    runners = [Session(store=store, agent=agent) for _ in range(sessions)]
    before = _batches(store)
    gc.collect()
    with GcTimer() as gc_time:
        thresholds = tune_gc() if gc_tuned else None
        if gc_off:
            gc.disable()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        try:
            if profile is not None:
                profile.enable()
            results = await asyncio.gather(*(s.start(f"go {i}") for i, s in enumerate(runners)))
            if profile is not None:
                profile.disable()
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        finally:
            gc.enable()
            if thresholds is not None:
                gc.set_threshold(*thresholds)
    bad = [r for r in results if r.status != "done" or r.text != FINAL or r.state.step_index != steps + 1]
    if bad:
        raise RuntimeError(f"{len(bad)} runs ended wrongly, e.g. {bad[0].status} at step {bad[0].state.step_index}")
    after, batch = _batches(store), None
    if before is not None and after is not None and after[0] > before[0]:
        batch = (after[1] - before[1]) / (after[0] - before[0])
    return SessionsRound(sessions, sessions * (steps + 1), wall, cpu, gc_time.seconds, batch)


async def alternate(rounds: int, make: Callable[[bool], Awaitable[SessionStore]],
                    work: Callable[[SessionStore, bool], Awaitable[T]]) -> dict[bool, list[T]]:  # fmt: skip
    """``rounds`` of on then off, the order flipped each round, on a fresh store each."""
    out: dict[bool, list[T]] = {True: [], False: []}
    for r in range(rounds):
        for on in (True, False) if r % 2 == 0 else (False, True):
            store = await make(on)
            try:
                out[on].append(await work(store, on))
            finally:
                await store.close()
    return out


class Stores:
    """A fresh store for each round: a new SQLite file, or an emptied PostgreSQL database."""

    def __init__(self, folder: Path, pg_url: str | None = None) -> None:
        self.folder, self.pg_url = folder, pg_url

    async def open(self, variant: Variant, group_commit: bool) -> SessionStore:
        if variant.backend == "postgres" and self.pg_url is not None:
            with psycopg.connect(self.pg_url, autocommit=True) as conn:
                if conn.execute("SELECT to_regclass('repertory.runs') IS NOT NULL").fetchone() == (True,):
                    conn.execute(f"TRUNCATE {PG_TABLES}")
            return await PostgresSessionStore.open(self.pg_url, group_commit=group_commit)
        path = self.folder / f"{uuid.uuid4().hex[:10]}.db"
        return await SqliteSessionStore.open(path, durability=variant.durability, group_commit=group_commit)

    def clean(self) -> None:
        """Delete finished rounds' SQLite files (a 1,000-session round leaves ~20 MB)."""
        for path in self.folder.glob("*.db*"):
            path.unlink(missing_ok=True)


async def variant_figures(figures: Figures, stores: Stores, plan: Plan, v: Variant) -> None:
    """One workload on and off: steps/s, CPU a step, the collector's share, the batch size, the ratios."""

    async def work(store: SessionStore, on: bool) -> SessionsRound:
        return await sessions_round(store, plan.sessions, plan.steps, v.idempotent, yields=v.yields,
                                    gc_off=v.gc_off, gc_tuned=v.gc_tuned)  # fmt: skip

    await alternate(1, lambda on: stores.open(v, on), lambda s, on: sessions_round(s, 20, 2, False))  # warm
    found = await alternate(plan.rounds, lambda on: stores.open(v, on), work)
    stores.clean()
    head, wall, cpu = v == HEADLINE, {}, {}  # medians by side
    for on, side in ((True, "on"), (False, "off")):
        rounds = found[on]
        wall[on] = statistics.median(r.steps_per_s for r in rounds)
        cpu[on] = statistics.median(r.cpu_seconds / r.model_steps for r in rounds)
        figures.value(f"{v.label}: model steps/s, group commit {side}", [r.steps_per_s for r in rounds], "steps/s",
                      target=Target(20_000, at_most=False) if head and on else None,
                      note=f"{plan.sessions:,} sessions x {plan.steps} tool steps")  # fmt: skip
        figures.time(f"{v.label}: CPU per model step, group commit {side}", [r.cpu_seconds / r.model_steps
                                                                              for r in rounds])  # fmt: skip
        figures.value(f"{v.label}: collector's share of the wall time, group commit {side}",
                      [r.gc_seconds / r.seconds * 100 for r in rounds], "%")  # fmt: skip
        batches = [r.mean_batch for r in rounds if r.mean_batch is not None]
        if on and batches:
            figures.value(f"{v.label}: commits per group commit batch", batches, "commits")
    figures.value(f"{v.label}: model steps/s, group commit on / off", wall[True] / wall[False], "x",
                  target=Target(3.0, at_most=False) if head else None, note="medians, alternating rounds")  # fmt: skip
    figures.value(f"{v.label}: CPU per step, off / on", cpu[False] / cpu[True], "x")


async def lone(figures: Figures, stores: Stores, plan: Plan) -> None:
    """Where group commit can only cost: one writer, one commit at a time; one session alone."""

    async def commits(store: SessionStore, on: bool) -> tuple[list[float], float]:
        session, message = EngineSession.new(), make_message(0)
        for _ in range(100):
            await session.step(store, message)
        gc.collect()
        latencies, started = [], time.perf_counter()
        for _ in range(plan.lone_commits):
            t0 = time.perf_counter()
            await session.step(store, message)
            latencies.append(time.perf_counter() - t0)
        return latencies, plan.lone_commits / (time.perf_counter() - started)

    async def alone(store: SessionStore, on: bool) -> SessionsRound:
        return await sessions_round(store, 1, plan.lone_steps, False)

    found = await alternate(plan.lone_rounds, lambda on: stores.open(HEADLINE, on), commits)
    runs = await alternate(plan.lone_rounds, lambda on: stores.open(HEADLINE, on), alone)
    stores.clean()
    for on, side in ((True, "on"), (False, "off")):
        figures.time(f"one writer: commit latency, group commit {side}", [s for lat, _ in found[on] for s in lat],
                     note=f"an engine step of a 1 KB message; {plan.lone_commits:,} a round")  # fmt: skip
        figures.value(f"one writer: commits/s, group commit {side}", [rate for _, rate in found[on]], "commits/s")
        figures.value(f"one session alone: model steps/s, group commit {side}", [r.steps_per_s for r in runs[on]],
                      "steps/s", note=f"{plan.lone_steps} tool steps")  # fmt: skip
    p50 = {on: statistics.median(s for lat, _ in found[on] for s in lat) for on in (True, False)}
    figures.time("one writer: commit latency p50, on less off", p50[True] - p50[False])


CATEGORIES: list[tuple[str, Callable[[str, str], bool]]] = [
    ("sqlite3 (C: statements, COMMIT, WAL writes)", lambda f, n: f == "~" and "sqlite3.Connection" in n),
    ("psycopg / network", lambda f, n: "psycopg" in f),
    ("repertory.storage (Python)", lambda f, n: "/repertory/storage/" in f),
    ("repertory.runtime: the step loop and tools", lambda f, n: "/repertory/runtime/" in f or "/repertory/core/" in f),
    ("ScriptedModel", lambda f, n: "/repertory/testing" in f),
    ("pydantic (validation, JSON)", lambda f, n: "pydantic" in f or (f == "~" and "pydantic_core" in n)),
    ("asyncio event loop", lambda f, n: "/asyncio/" in f or (f == "~" and "select" in n)),
]


def _category(key: Key) -> str:
    filename, _, name = key
    return next((cat for cat, match in CATEGORIES if match(filename, name)), "other (stdlib, builtins)")


async def profile(figures: Figures, stores: Stores, plan: Plan) -> None:
    """One headline round on and off under cProfile, the collector off (its share is measured apart)."""
    for on, side in ((True, "on"), (False, "off")):
        profiler = cProfile.Profile()
        store = await stores.open(HEADLINE, on)
        try:
            done = await sessions_round(store, plan.sessions, plan.steps, False, profiler, gc_off=True)
        finally:
            await store.close()
        totals = by_category(stats_of(profiler), _category)
        total = sum(totals.values()) or 1.0
        figures.time(f"cProfile, group commit {side}: a model step, profiled", total / done.model_steps,
                     note="the profiler's overhead included")  # fmt: skip
        for cat, seconds in totals.items():
            figures.value(f"cProfile, group commit {side}: {cat}, share", seconds / total * 100, "%",
                          note=f"{seconds / done.model_steps * 1e6:.1f} us a step, profiled")  # fmt: skip
    stores.clean()


async def scenario(figures: Figures, options: Options) -> None:
    """Each workload on and off, the lone figures, the profile, then PostgreSQL."""
    args = options.args
    plan = replace(PLANS[options.mode], **{k: v for k in ("sessions", "steps", "rounds")
                                           if (v := getattr(args, k)) is not None})  # fmt: skip
    figures.fact("durability", "SQLite normal = WAL + synchronous=NORMAL, full = synchronous=FULL; "
                 "PostgreSQL synchronous_commit=on")  # fmt: skip
    figures.fact("workload", f"{plan.sessions:,} sessions at once x {plan.steps} tool steps + a reply, "
                 f"{plan.rounds} round(s) on and off")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="repertory-group-commit-") as tmp:
        stores = Stores(Path(tmp))
        for v in plan.variants:
            await variant_figures(figures, stores, plan, v)
        await lone(figures, stores, plan)
        if plan.profile:
            await profile(figures, stores, plan)
        if not plan.postgres or args.no_postgres:
            figures.fact("PostgreSQL", "not measured: " + ("--no-postgres" if args.no_postgres else "quick mode"))
            return
        try:
            server = TemporaryPostgres()
        except StoreError as exc:
            figures.fact("PostgreSQL", f"not measured: {exc}")
            return
        with server:
            await variant_figures(figures, Stores(Path(tmp), server.url), plan, PG_VARIANT)


def _args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL workload")
    parser.add_argument("--sessions", type=int, help="concurrent sessions (default 1,000; quick 200)")
    parser.add_argument("--steps", type=int, help="tool steps a run (default 10; quick 4)")
    parser.add_argument("--rounds", type=int, help="rounds on and off a workload (default 3; quick 1)")


if __name__ == "__main__":
    main("group_commit", __doc__, scenario=scenario, add_args=_args)
