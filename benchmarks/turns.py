"""Turns: what a turn costs the session tree against the durable writes it needs, and issue 21's targets.

A turn here is two model steps (a default ``@tool`` call, then the answer) of a zero-delay
``ScriptedModel``, so every figure is the runtime's own cost. In one process, part after part:

1. N sessions (1,000; ``--quick`` 50) x 3 turns through ``Runtime.start`` (local backend, SQLite),
   all sessions at once, each one's turns one after another; against a raw ``sqlite3`` loop doing
   what such a turn must make durable (its four messages and the run row in two transactions, the
   tool call durable before the tool runs; the store's own statements, schema and pragmas), one turn
   after another: the floor, measured in the same run, rounds alternating (target: >= 0.25x).
2. Model steps/s of N sessions x 10 tool steps on one SQLite store, group commit on and off
   alternating (``benchmarks.group_commit``'s workload; targets >= 10,000 on, >= 2.5x on over off).
3. A later turn's SQL statements and write transactions (SQLite trace callbacks).
4. ``load_history`` at depth 10,000 (``benchmarks.store``'s workload; target <= 50 ms) and one
   session's 50-step run against LangGraph + ``SqliteSaver`` (``benchmarks.steps``' runs; >= 10x).
5. Ray on PostgreSQL (full mode, unless ``--no-ray``): the same turns on the local backend, then Ray
   with one host and with one host per core, with the server's ``synchronous_commit`` on and off
   (not a setting to run with: a probe of whether the WAL flush or the processes bound turns/s).

Issue 21's targets that need a long run of their own (recovery of 10,000 suspended sessions, 10,000
sessions against a 100 ms model, Ray's overhead per ``run()``) are measured, with their targets, by
``benchmarks.recovery``, ``benchmarks.concurrency`` and ``benchmarks.ray``; the rendered page shows them.

``python -m benchmarks.turns [--quick] [--skip-peers] [--no-ray]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.group_commit import alternate, sessions_round
from benchmarks.harness.command import Options, main
from benchmarks.harness.figures import Figures, Target
from benchmarks.harness.local_ray import local_ray
from benchmarks.harness.sqlcount import SqlCounter
from benchmarks.steps import run_langgraph_sync, run_repertory
from benchmarks.store import INSERT_REVISION, connect_raw, sqlite_loads
from repertory import Agent, Runtime, tool
from repertory.core.ids import new_id, now_ms
from repertory.core.messages import ModelMessage, Origin, TextPart, ToolCallPart, ToolResultPart
from repertory.core.model import ToolSpec
from repertory.core.state import RunState
from repertory.errors import StoreError
from repertory.storage.sqlite.store import UPSERT_RUN, UPSERT_THREAD, SqliteSessionStore, run_row
from repertory.testing import ScriptedModel
from repertory.testing.pg_temp import TemporaryPostgres
from repertory.tree.runtime import Backend

AGENT, CREATE_BATCH = "assistant", 500
USAGE = {"input_tokens": 50, "output_tokens": 10}
SIZES: dict[str, dict[str, int]] = {
    "full": {"sessions": 1_000, "turns": 3, "rounds": 3, "step_sessions": 1_000, "tool_steps": 10, "sql_turns": 20,
             "load_depth": 10_000, "load_runs": 10, "langgraph_steps": 50, "repeats": 5, "ray_sessions": 1_000},
    "quick": {"sessions": 50, "turns": 2, "rounds": 1, "step_sessions": 50, "tool_steps": 4, "sql_turns": 3,
              "load_depth": 1_000, "load_runs": 2, "langgraph_steps": 50, "repeats": 1, "ray_sessions": 0},
}  # fmt: skip


@tool
async def lookup(q: str) -> str:
    """Look something up (instant: the runtime's cost is all there is to wait for)."""
    return f"facts about {q}"


def two_steps(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """A tool call in answer to the prompt, then the final answer once the result is in."""
    if messages[-1].role == "user":
        return {"tool": "lookup", "args": {"q": messages[-1].text}, "usage": USAGE}
    return {"text": "ok", "usage": USAGE}


def agents() -> dict[str, Agent]:
    """The one agent every part serves (module-level parts, so Ray hosts can unpickle it)."""
    return {AGENT: Agent(name=AGENT, model=ScriptedModel(two_steps), tools=[lookup], max_steps=2)}


def sqlite_url(folder: str, name: str) -> str:
    """A fresh SQLite file in ``folder`` (durability normal, the store's default)."""
    return f"sqlite:///{os.path.join(folder, name)}"


async def open_tree(url: str, backend: Backend, sessions: int, hosts: int | None) -> tuple[Runtime, list[Any]]:
    """A runtime on ``url`` and ``sessions`` sessions created (after one warm-up turn of its own)."""
    options: dict[str, Any] = {"hosts": hosts, "keep_hosts": False} if backend == "ray" else {}
    rt = await Runtime.start(store=url, backend=backend, agents=agents(), idle_timeout=3600.0, **options)
    await (await rt.create_session(agent=AGENT)).run("warm-up")
    handles: list[Any] = []
    for start in range(0, sessions, CREATE_BATCH):
        batch = min(CREATE_BATCH, sessions - start)
        handles += await asyncio.gather(*(rt.create_session(agent=AGENT) for _ in range(batch)))
    return rt, handles


async def drive_turns(handles: list[Any], turns: int, failures: dict[str, int]) -> int:
    """``turns`` turns on every session at once (each one's after another); the turns done.
    One that raises or ends wrongly is counted in ``failures`` by kind: measured, not asserted."""
    done = 0

    async def session(i: int) -> None:
        nonlocal done
        for t in range(turns):
            try:
                result = await handles[i].run(f"session {i} turn {t}")
            except Exception as exc:  # counted and reported
                failures[type(exc).__name__] = failures.get(type(exc).__name__, 0) + 1
                continue
            if result.status != "done" or result.text != "ok":
                failures[f"status {result.status}"] = failures.get(f"status {result.status}", 0) + 1
            done += 1

    await asyncio.gather(*(session(i) for i in range(len(handles))))
    return done


async def tree_turns(url: str, backend: Backend, sessions: int, turns: int, hosts: int | None = None,
                     sql: tuple[Figures, int] | None = None) -> tuple[int, float, float, int]:  # fmt: skip
    """Turns done, wall and client CPU seconds, failures; then, untimed, ``sql``'s count of later turns traced."""
    rt, handles = await open_tree(url, backend, sessions, hosts)
    failures: dict[str, int] = {}
    try:
        gc.collect()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        done = await drive_turns(handles, turns, failures)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        if sql is not None and isinstance(rt.store, SqliteSessionStore):
            await turn_sql(sql[0], rt.store, handles[: sql[1]])
    finally:
        await rt.close()
    return done, wall, cpu, sum(failures.values())


async def turn_sql(figures: Figures, store: SqliteSessionStore, handles: list[Any]) -> None:
    """A later turn on each of ``handles`` (active sessions), the store's connections traced."""
    counter = SqlCounter()
    with counter.tracing(store):
        for i, h in enumerate(handles):
            await h.run(f"traced turn {i}")
    kinds, transactions = counter.per_turn(len(handles))
    control = sum(v for k, v in kinds.items() if k.split(" ")[0] in ("BEGIN", "COMMIT"))
    figures.value("SQL statements per two-step turn (a later turn, local, SQLite)", sum(kinds.values()), "statements",
                  note=f"{sum(kinds.values()) - control:g} without BEGIN/COMMIT (as tests/runtime/test_turn_cost.py "
                  "counts: 16 for this non-idempotent tool, 12 for an idempotent one): "
                  + ", ".join(f"{k} {v:g}" for k, v in kinds.items()))  # fmt: skip
    figures.value("write transactions per two-step turn", transactions, "transactions", note="the floor needs 2")


def turn_messages(prompt: str) -> list[ModelMessage]:
    """The four messages of a two-step turn, as the tree's turn stores them (same parts, same size)."""
    call, model = new_id(), Origin(kind="model")
    return [
        ModelMessage(role="user", parts=[TextPart(text=prompt)], origin=Origin(kind="user")),
        ModelMessage(role="assistant", parts=[ToolCallPart(tool_call_id=call, tool_name="lookup", args={"q": prompt})],
                     origin=model),
        ModelMessage(role="tool", origin=Origin(kind="tool"),
                     parts=[ToolResultPart(tool_call_id=call, tool_name="lookup", result=f"facts about {prompt}")]),
        ModelMessage(role="assistant", parts=[TextPart(text="ok")], origin=model),
    ]  # fmt: skip


def raw_floor(path: Path, sessions: int, turns: int) -> tuple[int, float, float]:
    """``sessions`` x ``turns`` turns' durable writes, one turn after another: turns, wall and CPU seconds.
    A turn is two transactions: the prompt and the tool call with the run row and the thread's head,
    then the result and the answer, the run done, the head again. Rows are built before the clock."""
    heads: dict[int, tuple[str, str | None, int]] = {i: (new_id(), None, 0) for i in range(sessions)}
    plan: list[list[tuple[Any, ...]]] = []
    for t in range(turns):
        for i in range(sessions):
            thread_id, parent, depth = heads[i]
            run, txns = RunState(run_id=new_id(), thread_id=thread_id, agent=AGENT), list[tuple[Any, ...]]()
            messages = turn_messages(f"session {i} turn {t}")
            for k, half in enumerate((messages[:2], messages[2:])):
                at, revisions = now_ms(), list[tuple[Any, ...]]()
                for message in half:
                    entry_id, revision_id, depth = new_id(), new_id(), depth + 1
                    revisions.append((revision_id, parent, entry_id, depth, at, thread_id, at,
                                      message.model_dump_json()))  # fmt: skip
                    parent = revision_id
                run.history_revision_id, run.step_index, run.updated_at = parent, run.step_index + 1, at
                run.status = "done" if k else run.status
                txns.append((revisions, run_row(run), (thread_id, parent, at, at)))
            heads[i] = (thread_id, parent, depth)
            plan.append(txns)
    conn = connect_raw(path, "normal")
    try:
        gc.collect()
        start, cpu = time.perf_counter(), time.process_time()
        for txns in plan:
            for revisions, run_state, thread in txns:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(INSERT_REVISION, revisions)
                conn.execute(UPSERT_RUN, run_state)
                conn.execute(UPSERT_THREAD, thread)
                conn.execute("COMMIT")
        return len(plan), time.perf_counter() - start, time.process_time() - cpu
    finally:
        conn.close()


async def turn_cost(figures: Figures, folder: Path, s: dict[str, int]) -> None:
    """Part 1: the tree against the floor, rounds alternating; then a later turn's SQL."""
    shape = f"{s['sessions']:,} sessions x {s['turns']} two-step turns"
    tree: list[tuple[int, float, float, int]] = []
    floor: list[tuple[int, float, float]] = []
    for r in range(s["rounds"]):  # floor and tree alternate, so a change in the machine's load hits both
        floor.append(raw_floor(folder / f"floor-{r}.db", s["sessions"], s["turns"]))
        sql = (figures, s["sql_turns"]) if r == 0 else None
        tree.append(await tree_turns(sqlite_url(str(folder), f"tree-{r}.db"), "local", s["sessions"], s["turns"],
                                     sql=sql))  # fmt: skip
        print(f"turns: round {r + 1}: tree {tree[-1][0] / tree[-1][1]:,.0f} turns/s, "
              f"floor {floor[-1][0] / floor[-1][1]:,.0f}", flush=True)  # fmt: skip
    rates = [n / w for n, w, _, _ in tree]
    floors = [n / w for n, w, _ in floor]
    figures.value(f"tree turns/s, {shape}, local, SQLite", rates, "turns/s")
    figures.value(
        "raw durable-write floor turns/s", floors, "turns/s", note="2 transactions a turn, one turn at a time"
    )
    figures.value(f"tree turns/s / raw floor, {shape}", statistics.median(rates) / statistics.median(floors), "x",
                  target=Target(0.25, at_most=False), note="medians of alternating rounds")  # fmt: skip
    figures.time("tree: client CPU per turn", [c / n for n, _, c, _ in tree], note="this process, all threads")
    figures.time("floor: CPU per turn", [c / n for n, _, c in floor])
    cpu_ratio = statistics.median(n / c for n, _, c, _ in tree) / statistics.median(n / c for n, _, c in floor)
    figures.value("tree turns per CPU second / floor's", cpu_ratio, "x")
    figures.count("tree turns failed", sum(f for *_, f in tree))


async def steps_part(figures: Figures, folder: Path, s: dict[str, int]) -> None:
    """Part 2: N sessions x K tool steps on one SQLite store, group commit on (the default) and off."""

    async def make(on: bool) -> SqliteSessionStore:
        return await SqliteSessionStore.open(folder / f"steps-{os.urandom(4).hex()}.db", group_commit=on)

    rounds = await alternate(s["rounds"], make, lambda store, on: sessions_round(store, s["step_sessions"],
                                                                                 s["tool_steps"], False))  # fmt: skip
    shape = f"{s['step_sessions']:,} sessions x {s['tool_steps']} tool steps, one SQLite store"
    rate = {on: [r.steps_per_s for r in found] for on, found in rounds.items()}
    figures.value(f"model steps/s, {shape}, group commit on (default)", rate[True], "steps/s",
                  target=Target(10_000, at_most=False))  # fmt: skip
    figures.value(f"model steps/s, {shape}, group commit off", rate[False], "steps/s")
    figures.value(f"group commit on / off, {shape}", statistics.median(rate[True]) / statistics.median(rate[False]),
                  "x", target=Target(2.5, at_most=False))  # fmt: skip


async def langgraph(figures: Figures, folder: Path, s: dict[str, int], options: Options) -> None:
    """One session's 50-step runs (default @tool, SQLite normal) against LangGraph + SqliteSaver."""
    n = s["langgraph_steps"]
    if not options.peers:
        figures.fact("LangGraph", "not run (--skip-peers)")
        return
    try:
        run_langgraph_sync(folder, n)  # warm LangGraph's imports, as repertory's below
    except ImportError:
        figures.fact("LangGraph", "not installed (the bench extra)")
        return
    await run_repertory(folder, n, "normal", False, "list")
    ours = [(await run_repertory(folder, n, "normal", False, "list")).steps_per_s for _ in range(s["repeats"])]
    theirs = [run_langgraph_sync(folder, n).steps_per_s for _ in range(s["repeats"])]
    figures.value(f"steps/s of a {n}-step run, repertory", ours, "steps/s")
    figures.value(f"steps/s of a {n}-step run, LangGraph + SqliteSaver", theirs, "steps/s")
    ratio = statistics.median(ours) / statistics.median(theirs)
    figures.value(f"steps/s of a {n}-step run, repertory / LangGraph + SqliteSaver (SQLite normal)", ratio, "x",
                  target=Target(10.0, at_most=False))  # fmt: skip


def _synchronous_commit(url: str, value: str) -> None:
    """Set the server's ``synchronous_commit`` (the temporary server's superuser) and reload it."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET synchronous_commit = {value}")
        conn.execute("SELECT pg_reload_conf()")
    with psycopg.connect(url) as conn:  # a new session reads the reloaded setting, as the hosts' pools will
        row = conn.execute("SHOW synchronous_commit").fetchone()
    if row is None or row[0] != value:
        raise RuntimeError(f"synchronous_commit is {row}, not {value!r}, after the reload")


async def ray_part(figures: Figures, s: dict[str, int]) -> None:
    """Part 5: the same turns on PostgreSQL, local, then Ray with one host and one host per core."""
    cores, n = os.cpu_count() or 1, s["ray_sessions"]
    with TemporaryPostgres() as pg, local_ray():
        for value in ("on", "off"):
            _synchronous_commit(pg.url, value)
            rates: list[float] = []
            shapes: tuple[tuple[Backend, int | None], ...] = (("local", None), ("ray", 1), ("ray", cores))
            for backend, hosts in shapes:
                done, wall, cpu, failed = await tree_turns(pg.url, backend, n, 3, hosts)
                rates.append(done / wall)
                where = f"{backend}{f', {hosts} host(s)' if hosts else ''}"
                figures.value(f"turns/s, PostgreSQL synchronous_commit={value}, {where}, {n:,} sessions x 3",
                              rates[-1], "turns/s", note=f"client CPU {cpu:.1f} s of {wall:.1f} s wall; "
                              f"failures {failed}")  # fmt: skip
            figures.value(f"Ray turns/s, {cores} hosts / 1 host, PostgreSQL synchronous_commit={value}",
                          rates[2] / rates[1], "x", note=f"linear would be {cores}x")  # fmt: skip
    figures.fact("Ray", f"{cores} cores: the client, {cores} host processes and the PostgreSQL server share them")


async def scenario(figures: Figures, options: Options) -> None:
    """Parts 1 to 4 on SQLite files in one folder, then Ray on PostgreSQL."""
    s = SIZES[options.mode]
    figures.fact("store", "SQLite file (WAL, synchronous=NORMAL), a fresh one per round")
    with tempfile.TemporaryDirectory(prefix="repertory-turns-") as tmp:
        folder = Path(tmp)
        await turn_cost(figures, folder, s)
        await steps_part(figures, folder, s)
        await sqlite_loads(figures, folder, (s["load_depth"],), s["load_runs"])
        await langgraph(figures, folder, s, options)
    if options.quick or options.args.no_ray:
        figures.fact("Ray on PostgreSQL", "not measured: " + ("quick mode" if options.quick else "--no-ray"))
        return
    try:
        await ray_part(figures, s)
    except StoreError as exc:
        figures.fact("Ray on PostgreSQL", f"not measured: no PostgreSQL here: {exc}")


def _args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-ray", action="store_true", help="leave out Ray on PostgreSQL")


if __name__ == "__main__":
    main("turns", __doc__, scenario=scenario, add_args=_args)
