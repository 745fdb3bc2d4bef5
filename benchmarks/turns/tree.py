"""The tree's side: N sessions x T two-step turns through ``Runtime`` (local or Ray), and one turn's SQL.

Every session is created first, then all N run their T turns at once (``asyncio.gather``), each
turn ``await handle.run(...)`` after the previous one, against a zero-delay ``ScriptedModel`` that
calls a default ``@tool`` (not idempotent: its call is durable before it runs) and then answers.
So a turn is two model steps and every figure is the runtime's own cost: the model never waits.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from dataclasses import dataclass
from typing import Any

from benchmarks.harness.model import BenchModel
from benchmarks.sessions.anatomy import SqlCounter
from repertory import Agent, Runtime, tool
from repertory.core.messages import ModelMessage
from repertory.core.model import ToolSpec
from repertory.storage.sqlite.store import SqliteSessionStore
from repertory.testing import ScriptedModel
from repertory.tree.runtime import Backend

__all__ = ["AGENT", "Opened", "TreeRun", "TurnSql", "agents", "drive_turns", "open_tree", "turn_sql", "tree_turns"]

AGENT = "assistant"
CREATE_BATCH = 500
USAGE = {"input_tokens": 50, "output_tokens": 10}


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


class TreeRun(BenchModel):
    """N sessions x T turns on one backend and store, all launched at once."""

    backend: str
    store: str
    hosts: int | None
    sessions: int
    turns_per_session: int
    turns: int
    seconds: float
    turns_per_s: float
    client_cpu_seconds: float
    failures: dict[str, int]


class TurnSql(BenchModel):
    """One later two-step turn on an active session, as SQLite saw it (trace callbacks)."""

    turns_traced: int
    statements_per_turn: float
    statements_by_kind_per_turn: dict[str, float]
    write_transactions_per_turn: float


@dataclass
class Opened:
    """A runtime on the store and its sessions, created and warm, no turn run yet."""

    rt: Runtime
    handles: list[Any]


async def open_tree(url: str, backend: Backend, sessions: int, hosts: int | None) -> Opened:
    """Start a runtime on ``url`` and create ``sessions`` sessions (after one warm-up turn of its own)."""
    options: dict[str, Any] = {"hosts": hosts, "keep_hosts": False} if backend == "ray" else {}
    rt = await Runtime.start(store=url, backend=backend, agents=agents(), idle_timeout=3600.0, **options)
    warm = await rt.create_session(agent=AGENT)
    await warm.run("warm-up")
    handles: list[Any] = []
    for start in range(0, sessions, CREATE_BATCH):
        batch = min(CREATE_BATCH, sessions - start)
        handles += await asyncio.gather(*(rt.create_session(agent=AGENT) for _ in range(batch)))
    return Opened(rt, handles)


async def drive_turns(handles: list[Any], turns: int, failures: dict[str, int]) -> int:
    """Run ``turns`` turns on every session at once (each session's one after another); the turns done.

    A turn that raises or ends wrongly is counted in ``failures`` by kind, not raised: measured, not asserted.
    """
    done = 0

    async def session(i: int) -> None:
        nonlocal done
        for t in range(turns):
            try:
                result = await handles[i].run(f"session {i} turn {t}")
            except Exception as exc:  # measured, not asserted: counted and reported
                failures[type(exc).__name__] = failures.get(type(exc).__name__, 0) + 1
                continue
            if result.status != "done" or result.text != "ok":
                failures[f"status {result.status}"] = failures.get(f"status {result.status}", 0) + 1
            done += 1

    await asyncio.gather(*(session(i) for i in range(len(handles))))
    return done


async def tree_turns(
    url: str,
    backend: Backend,
    sessions: int,
    turns: int,
    *,
    hosts: int | None = None,
    sql_turns: int = 0,
    store: str | None = None,
) -> tuple[TreeRun, TurnSql | None]:
    """Time ``sessions`` x ``turns`` turns; then, untimed, trace ``sql_turns`` later turns' SQL (SQLite)."""
    opened = await open_tree(url, backend, sessions, hosts)
    failures: dict[str, int] = {}
    sql = None
    try:
        gc.collect()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        done = await drive_turns(opened.handles, turns, failures)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        if sql_turns:
            sql = await turn_sql(opened.rt, opened.handles[:sql_turns])
    finally:
        await opened.rt.close()
    store = store or ("PostgreSQL" if url.startswith("postgres") else "SQLite file (WAL), durability normal")
    run = TreeRun(
        backend=backend, store=store, hosts=hosts if backend == "ray" else None, sessions=sessions,
        turns_per_session=turns, turns=done, seconds=wall, turns_per_s=done / wall, client_cpu_seconds=cpu,
        failures=failures,
    )  # fmt: skip
    return run, sql


async def turn_sql(rt: Runtime, handles: list[Any]) -> TurnSql | None:
    """A later turn on each of ``handles`` (active sessions) with the store's connections traced."""
    store = rt.store
    if not isinstance(store, SqliteSessionStore):
        return None
    counter = SqlCounter()
    with counter.tracing(store):
        for i, h in enumerate(handles):
            await h.run(f"traced turn {i}")
    by_kind, transactions = counter.per_turn(len(handles))
    return TurnSql(
        turns_traced=len(handles),
        statements_per_turn=sum(by_kind.values()),
        statements_by_kind_per_turn=by_kind,
        write_transactions_per_turn=transactions,
    )


def sqlite_url(folder: str, name: str) -> str:
    """A fresh SQLite file in ``folder`` (durability normal, the store's default)."""
    return f"sqlite:///{os.path.join(folder, name)}"
