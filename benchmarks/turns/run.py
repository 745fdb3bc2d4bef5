"""Run every part of the turn cost benchmark in one process and put issue 21's targets side by side."""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import psycopg

from benchmarks.group_commit.report import SessionsRound
from benchmarks.group_commit.workload import alternate, sessions_round
from benchmarks.harness.commits import message_pool
from benchmarks.harness.local_ray import local_ray
from benchmarks.harness.report import Clock, Mode, finish
from benchmarks.steps.langgraph import run_langgraph_sync
from benchmarks.steps.report import HEADLINE_IDEMPOTENT
from benchmarks.steps.workload import run_repertory
from benchmarks.store.sqlite import bench_load
from benchmarks.turns.floor import raw_floor
from benchmarks.turns.report import FloorPart, LangGraphPart, RayPart, Sizes, StepsPart, Target, TurnsReport
from benchmarks.turns.targets import Stored, stored_row
from benchmarks.turns.tree import TreeRun, TurnSql, sqlite_url, tree_turns
from repertory.core.store import SessionStore
from repertory.errors import StoreError
from repertory.storage.sqlite.store import SqliteSessionStore
from repertory.testing.pg_temp import TemporaryPostgres

__all__ = ["SIZES", "measure"]

T = TypeVar("T")
# The durable setting first (the server default), then one whose commits do not wait for the WAL flush.
SYNC = ("on", "off")

SIZES: dict[Mode, Sizes] = {
    "full": Sizes(
        sessions=1_000,
        turns_per_session=3,
        rounds=3,
        step_sessions=1_000,
        tool_steps=10,
        sql_turns=20,
        load_depth=10_000,
        load_runs=10,
        langgraph_steps=50,
        langgraph_repeats=5,
        ray_sessions=1_000,
        ray_turns_per_session=3,
    ),
    "quick": Sizes(
        sessions=300,
        turns_per_session=3,
        rounds=1,
        step_sessions=300,
        tool_steps=10,
        sql_turns=10,
        load_depth=10_000,
        load_runs=3,
        langgraph_steps=50,
        langgraph_repeats=2,
        ray_sessions=200,
        ray_turns_per_session=3,
    ),
    "smoke": Sizes(
        sessions=50,
        turns_per_session=2,
        rounds=1,
        step_sessions=50,
        tool_steps=4,
        sql_turns=3,
        load_depth=1_000,
        load_runs=2,
        langgraph_steps=50,
        langgraph_repeats=1,
        ray_sessions=0,
        ray_turns_per_session=0,
    ),
}
TURN_RATIO_TARGET = 0.25
STEPS_TARGET = 10_000.0
GROUP_COMMIT_TARGET = 2.5
LANGGRAPH_TARGET = 10.0
LOAD_TARGET_MS = 50.0


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def _turn_cost(folder: Path, s: Sizes) -> tuple[FloorPart, TurnSql | None]:
    trees: list[TreeRun] = []
    floors: list[float] = []
    floor_cpu: list[tuple[int, float]] = []  # turns, CPU seconds
    sql: TurnSql | None = None
    for r in range(s.rounds):  # floor and tree alternate, so a change in the machine's load hits both
        f = raw_floor(folder / f"floor-{r}.db", s.sessions, s.turns_per_session)
        floors.append(f.turns / f.seconds)
        floor_cpu.append((f.turns, f.cpu_seconds))
        tree, traced = await tree_turns(
            sqlite_url(str(folder), f"tree-{r}.db"),
            "local",
            s.sessions,
            s.turns_per_session,
            sql_turns=s.sql_turns if r == 0 else 0,
        )
        trees.append(tree)
        sql = sql or traced
        _say(f"turns: round {r + 1}: tree {tree.turns_per_s:,.0f} turns/s, floor {floors[-1]:,.0f}")
    tree_median = statistics.median(t.turns_per_s for t in trees)
    floor_median = statistics.median(floors)
    part = FloorPart(
        tree=trees,
        floor_turns_per_s=floors,
        floor_cpu_seconds=[cpu for _, cpu in floor_cpu],
        floor_transactions_per_turn=2,
        tree_turns_per_s=tree_median,
        floor_median_turns_per_s=floor_median,
        ratio=tree_median / floor_median,
        cpu_ratio=statistics.median(t.turns / t.client_cpu_seconds for t in trees)
        / statistics.median(turns / cpu for turns, cpu in floor_cpu),
    )
    return part, sql


async def _steps(folder: Path, s: Sizes) -> StepsPart:
    async def make(on: bool) -> SessionStore:
        return await SqliteSessionStore.open(folder / f"steps-{os.urandom(4).hex()}.db", group_commit=on)

    async def work(store: SessionStore, on: bool) -> SessionsRound:
        return await sessions_round(store, on, s.step_sessions, s.tool_steps, idempotent=False)

    rounds = await alternate(s.rounds, make, work)
    on, off = rounds[True], rounds[False]
    on_rate = statistics.median(r.steps_per_s for r in on)
    off_rate = statistics.median(r.steps_per_s for r in off)
    _say(f"turns: {s.step_sessions:,} sessions x {s.tool_steps} steps: {on_rate:,.0f} steps/s (off {off_rate:,.0f})")
    return StepsPart(on=on, off=off, on_steps_per_s=on_rate, off_steps_per_s=off_rate, ratio=on_rate / off_rate)


async def _langgraph(folder: Path, s: Sizes) -> LangGraphPart:
    n = s.langgraph_steps
    await run_repertory(folder, n, "normal", HEADLINE_IDEMPOTENT, "list")  # warm imports and caches
    ours = [await run_repertory(folder, n, "normal", HEADLINE_IDEMPOTENT, "list") for _ in range(s.langgraph_repeats)]
    run_langgraph_sync(folder, n)  # warm LangGraph's imports the same way
    theirs = [run_langgraph_sync(folder, n) for _ in range(s.langgraph_repeats)]
    a = statistics.median(r.steps_per_s for r in ours)
    b = statistics.median(r.steps_per_s for r in theirs)
    return LangGraphPart(
        steps=n, repertory=ours, langgraph=theirs, repertory_steps_per_s=a, langgraph_steps_per_s=b, ratio=a / b
    )


async def _backends(url: str, s: Sizes, cores: int, label: str) -> list[TreeRun]:
    runs = []
    for backend, hosts in (("local", None), ("ray", 1), ("ray", cores)):
        run, _ = await tree_turns(url, backend, s.ray_sessions, s.ray_turns_per_session, hosts=hosts, store=label)
        _say(f"turns: {label}, {backend}, {hosts or '-'} host(s): {run.turns_per_s:,.0f} turns/s")
        runs.append(run)
    return runs


def _synchronous_commit(url: str, value: str) -> None:
    """Set the server's ``synchronous_commit`` (the temporary server's superuser) and reload it."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET synchronous_commit = {value}")
        conn.execute("SELECT pg_reload_conf()")
    with psycopg.connect(url) as conn:  # a new session reads the reloaded setting, as the hosts' pools will
        row = conn.execute("SHOW synchronous_commit").fetchone()
    if row is None or row[0] != value:
        raise RuntimeError(f"synchronous_commit is {row}, not {value!r}, after the reload")


def _scaling(runs: list[TreeRun], label: str) -> float | None:
    ray = [r for r in runs if r.backend == "ray" and r.store == label]
    return ray[-1].turns_per_s / ray[0].turns_per_s if len(ray) == 2 and ray[0].turns_per_s else None


def _ray(s: Sizes) -> RayPart:
    cores = os.cpu_count() or 1
    runs: list[TreeRun] = []
    with TemporaryPostgres() as pg, local_ray():
        for value in SYNC:
            _synchronous_commit(pg.url, value)
            runs += asyncio.run(_backends(pg.url, s, cores, f"PostgreSQL, synchronous_commit={value}"))
    scaling = {v: _scaling(runs, f"PostgreSQL, synchronous_commit={v}") for v in SYNC}
    durable = scaling["on"]
    if cores == 1:
        finding = "one core: one host per core is one host; nothing to compare."
    else:
        said = "; ".join(f"synchronous_commit={v}: {x or 0:.2f}x" for v, x in scaling.items())
        if durable is not None and durable >= 0.75 * cores:
            finding = f"{cores} hosts over one host ({said}): it scales with the hosts here."
        else:
            finding = (
                f"{cores} hosts over one host: {said} (linear would be {cores}x). On this machine the design "
                f"stops scaling with hosts: the client, {cores} host processes (one Python process per core) and "
                "the PostgreSQL server share the same cores, and with synchronous_commit=on every write "
                "transaction also waits for its WAL flush."
            )
    return RayPart(cores=cores, runs=runs, scaling=durable, scaling_by_synchronous_commit=scaling, finding=finding)


def _targets(report: TurnsReport) -> list[Target]:
    here = f"this run ({report.mode})"
    out: list[Target] = []
    c = report.turn_cost
    if c is not None:
        out.append(
            Target(
                target="tree turns/s >= 0.25x the raw durable-write floor",
                figure=f"turns/s / raw floor, {report.sizes.sessions:,} sessions x "
                f"{report.sizes.turns_per_session} two-step turns, local, SQLite",
                value=c.ratio,
                unit="x",
                threshold=TURN_RATIO_TARGET,
                at_most=False,
                source=here,
                note=f"tree {c.tree_turns_per_s:,.0f} vs floor {c.floor_median_turns_per_s:,.0f} turns/s; "
                f"per CPU second {c.cpu_ratio or 0:.3f}x",
            )
        )
    st = report.steps
    if st is not None:
        shape = f"{report.sizes.step_sessions:,} sessions x {report.sizes.tool_steps} tool steps, one SQLite store"
        out.append(
            Target(
                target="model steps/s >= 10,000",
                figure=f"model steps/s, {shape}",
                value=st.on_steps_per_s,
                unit="steps/s",
                threshold=STEPS_TARGET,
                at_most=False,
                source=here,
                note=f"group commit on (default); off {st.off_steps_per_s:,.0f}",
            )
        )
        out.append(
            Target(
                target="group commit on/off >= 2.5x",
                figure=f"group commit on/off, {shape}",
                value=st.ratio,
                unit="x",
                threshold=GROUP_COMMIT_TARGET,
                at_most=False,
                source=here,
            )
        )
    gc_row = stored_row("group_commit", lambda r: r.figure.startswith("group commit: on/off ratio"))
    out.append(
        _from_stored(
            "group commit on/off >= 2.5x",
            gc_row,
            GROUP_COMMIT_TARGET,
            False,
            "group commit: on/off ratio (its own benchmark)",
        )
    )
    rec = stored_row(
        "recovery", lambda r: r.figure.endswith("every running run re-driven and every suspended one answered")
    )
    out.append(
        _from_stored(
            "recovery of 10,000 suspended + 100 running < 5 s, without tune_gc()",
            rec,
            5.0,
            True,
            "recovery, 10,000 suspended + 100 running, SIGKILL, no tune_gc()",
        )
    )
    conc = stored_row("concurrency", lambda r: r.figure.startswith("turn latency p50, local, 10,000 sessions x 3"))
    out.append(
        _from_stored(
            "10,000 sessions x 3 turns, log-normal 100 ms model: turn latency p50 < 2 s",
            conc,
            2_000.0,
            True,
            "turn latency p50, 10,000 sessions x 3 turns, log-normal 100 ms",
        )
    )
    ray = stored_row("ray", lambda r: r.figure.startswith("1. turn overhead via Ray") and r.figure.endswith("p50"))
    out.append(_from_stored("Ray overhead per run() p50 <= 2 ms", ray, 2.0, True, "Ray overhead per handle.run, p50"))
    lg = report.langgraph
    if lg is not None:
        out.append(
            Target(
                target="one session's 50-step runs >= 10x LangGraph + SqliteSaver",
                figure=f"steps/s of a {lg.steps}-step run / LangGraph + SqliteSaver (SQLite normal)",
                value=lg.ratio,
                unit="x",
                threshold=LANGGRAPH_TARGET,
                at_most=False,
                source=here,
                note=f"{lg.repertory_steps_per_s:,.0f} vs {lg.langgraph_steps_per_s:,.1f} steps/s",
            )
        )
    else:
        steps = stored_row("steps", lambda r: r.figure.startswith("steps/s against LangGraph (normal"))
        out.append(
            _from_stored(
                "one session's 50-step runs >= 10x LangGraph + SqliteSaver",
                steps,
                LANGGRAPH_TARGET,
                False,
                "steps/s against LangGraph (its own run length)",
            )
        )
    load = next((x for x in report.load_history if x.depth == 10_000), None)
    if load is not None:
        out.append(
            Target(
                target="load_history at depth 10,000 <= 50 ms",
                figure="load_history at depth 10,000, median",
                value=load.median_ms,
                unit="ms",
                threshold=LOAD_TARGET_MS,
                at_most=True,
                source=here,
                note=f"the SQL alone {load.query_median_ms:.1f} ms; GC off {load.gc_off_median_ms:.1f} ms",
            )
        )
    else:
        stored = stored_row("store", lambda r: r.figure.startswith("load_history at depth 10,000"))
        out.append(
            _from_stored(
                "load_history at depth 10,000 <= 50 ms", stored, LOAD_TARGET_MS, True, "load_history at depth 10,000"
            )
        )
    return out


def _from_stored(target: str, stored: Stored, threshold: float, at_most: bool, figure: str) -> Target:
    r = stored.row
    return Target(
        target=target,
        figure=figure,
        value=None if r is None else r.value,
        unit="" if r is None else r.unit,
        threshold=threshold,
        at_most=at_most,
        source=stored.source,
        note="" if r is None else r.note,
    )


def measure(mode: Mode, peers: bool = True, with_ray: bool = True) -> TurnsReport:
    """Every part at ``mode``'s sizes; a part that fails is named in ``failed`` and the rest still measured."""
    s = SIZES[mode]
    clock = Clock.start("turns", mode)
    report = TurnsReport(**clock.frame(), store="SQLite file (WAL, synchronous=NORMAL), a fresh one per round", sizes=s)

    def attempt(name: str, part: Callable[[], T]) -> T | None:
        try:
            return part()
        except Exception as exc:  # keep the other parts' figures; the suite reports the failure
            traceback.print_exc()
            report.failed[name] = f"{type(exc).__name__}: {exc}"
            return None

    with tempfile.TemporaryDirectory(prefix="repertory-turns-") as tmp:
        folder = Path(tmp)
        found = attempt("turn cost", lambda: asyncio.run(_turn_cost(folder, s)))
        if found is not None:
            report.turn_cost, report.sql = found
        report.steps = attempt("steps", lambda: asyncio.run(_steps(folder, s)))
        loads = attempt(
            "load_history", lambda: asyncio.run(bench_load(folder, [s.load_depth], s.load_runs, message_pool()))
        )
        report.load_history = loads or []
        if not peers:
            report.peers["langgraph"] = "--skip-peers"
        else:
            try:
                import langgraph.checkpoint.sqlite  # noqa: F401
            except ImportError:
                report.peers["langgraph"] = "not installed (the bench extra)"
            else:
                report.langgraph = attempt("langgraph", lambda: asyncio.run(_langgraph(folder, s)))
                report.peers["langgraph"] = "measured" if report.langgraph else "failed"
    if mode == "smoke" or not with_ray:
        report.skipped["ray on PostgreSQL"] = (
            "the suite's quick mode (starts Ray and PostgreSQL)" if with_ray else "--no-ray"
        )
    else:
        try:
            report.ray = _ray(s)
        except StoreError as exc:
            report.skipped["ray on PostgreSQL"] = f"no PostgreSQL here: {exc}"
        except Exception as exc:
            traceback.print_exc()
            report.failed["ray on PostgreSQL"] = f"{type(exc).__name__}: {exc}"
    report.targets = _targets(report)
    return finish(report, clock)
