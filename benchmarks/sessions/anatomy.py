"""Part 5: the anatomy of one turn on an idle loop: its time, store calls, thread hops, SQL, transactions.

Turns run one after another with no model delay (the least a turn can cost here). Then, on a few
sessions, a later turn on an active session and a turn that activates one: the store's public
coroutine methods are wrapped on the instance (each call counted and timed), ``asyncio.to_thread``
is wrapped while they run (each hop to a worker thread counted and timed, by the store call that
made it), and SQLite trace callbacks on the store's connections count statements and write
transactions. Timing is wall time, meaningful on an idle loop only (where it is used). Last, the
same sequential turns with durability full, and how a turn's cost grows with the turns before it.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import gc
import inspect
import re
import statistics
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from benchmarks.harness.stats import dist_ms
from benchmarks.sessions.report import TURNS, AnatomyPart, Growth, Sequential, TurnAnatomy
from benchmarks.sessions.shared import AGENT, StampedModel, local_host, runtime
from repertory.storage.sqlite.store import SqliteSessionStore

__all__ = ["SqlCounter", "StoreProbe", "anatomy"]

P = ParamSpec("P")
T = TypeVar("T")
VERB = re.compile(r"^\s*(\w+)")
TABLE = re.compile(r"\b(?:FROM|INTO|UPDATE)\s+(\w+)", re.IGNORECASE)


class SqlCounter:
    """Counts statements by verb and table, and write transactions, from SQLite trace callbacks."""

    def __init__(self) -> None:
        self.statements: collections.Counter[str] = collections.Counter()
        self.transactions = 0
        self.autocommit_writes = 0
        self.in_transaction: dict[int, bool] = {}
        self.lock = threading.Lock()

    def callback(self, conn_id: int) -> Callable[[str], None]:
        """The trace callback for the connection ``conn_id`` (readers run on worker threads)."""

        def trace(sql: str) -> None:
            first = VERB.match(sql)
            verb = first.group(1).upper() if first else "?"
            table = TABLE.search(sql)
            with self.lock:
                self.statements[f"{verb} {table.group(1) if table else ''}".strip()] += 1
                if verb == "BEGIN":
                    self.in_transaction[conn_id] = True
                    self.transactions += 1
                elif verb in ("COMMIT", "ROLLBACK", "END"):
                    self.in_transaction[conn_id] = False
                elif verb in ("INSERT", "UPDATE", "DELETE") and not self.in_transaction.get(conn_id):
                    self.autocommit_writes += 1

        return trace

    def per_turn(self, turns: int) -> tuple[dict[str, float], float]:
        """Statements by kind and write transactions, per turn."""
        return {k: v / turns for k, v in self.statements.most_common()}, (
            self.transactions + self.autocommit_writes
        ) / turns

    @contextmanager
    def tracing(self, store: SqliteSessionStore) -> Iterator[int]:
        """Trace every connection the store has open now (the writer and its readers); yields how many readers."""
        conns = store.connections
        for conn in conns:
            conn.set_trace_callback(self.callback(id(conn)))
        try:
            yield len(conns) - 1
        finally:
            for conn in conns:
                conn.set_trace_callback(None)


class StoreProbe:
    """Counts and times the store's public coroutine calls, and the hops to a worker thread inside them."""

    def __init__(self, store: SqliteSessionStore) -> None:
        self.store = store
        self.calls: collections.Counter[str] = collections.Counter()
        self.spent: dict[str, float] = {}
        self.current: contextvars.ContextVar[str] = contextvars.ContextVar("store_call", default="(outside the store)")
        for name in dir(type(store)):
            if not name.startswith("_") and inspect.iscoroutinefunction(getattr(type(store), name, None)):
                setattr(store, name, self.counted(name, getattr(store, name)))

    def add(self, key: str, started: float) -> None:
        """Count one call of ``key`` that started at ``started``."""
        self.calls[key] += 1
        self.spent[key] = self.spent.get(key, 0.0) + time.perf_counter() - started

    def counted(
        self, name: str, method: Callable[..., Coroutine[Any, Any, Any]]
    ) -> Callable[..., Coroutine[Any, Any, Any]]:
        """``method``, counted and timed under ``name``, and named as the current store call."""

        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            token = self.current.set(name)
            t0 = time.perf_counter()
            try:
                return await method(*args, **kwargs)
            finally:
                self.add(name, t0)
                self.current.reset(token)

        return wrapper

    @contextmanager
    def hops(self) -> Iterator[None]:
        """Count ``asyncio.to_thread`` calls (the store's hops to a reader thread) while inside."""
        original = asyncio.to_thread

        async def to_thread(func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
            key = f"thread hop: {self.current.get()}"
            t0 = time.perf_counter()
            try:
                return await original(func, *args, **kwargs)
            finally:
                self.add(key, t0)

        asyncio.to_thread = to_thread
        try:
            yield
        finally:
            asyncio.to_thread = original

    def per_turn(self, turns: int) -> tuple[dict[str, float], dict[str, float]]:
        """Calls and wall microseconds of each store call and hop, per turn; then cleared."""
        calls = {k: v / turns for k, v in self.calls.most_common()}
        spent = {k: v / turns * 1e6 for k, v in sorted(self.spent.items(), key=lambda kv: -kv[1])}
        self.calls.clear()
        self.spent.clear()
        return calls, spent


async def anatomy(folder: str, sessions: int, long_turns: int, full_sessions: int = 50) -> AnatomyPart:
    """Sequential turns, one turn's anatomy (later and activating), durability full, growth with turns."""
    model = StampedModel(0.0)
    rt = await runtime(folder, "anatomy.db", model)
    try:
        for _ in range(20):
            h = await rt.create_session(agent=AGENT)
            await h.run("warm-up")
        local_host(rt).passivate_idle(0)
        handles = [await rt.create_session(agent=AGENT) for _ in range(sessions)]
        spans: list[tuple[str, int, float, float]] = []
        gc.collect()
        for t in range(TURNS):
            for i, h in enumerate(handles):
                key = f"seq {i} turn {t}"
                start = time.perf_counter()
                await h.run(key)
                spans.append((key, t, start, time.perf_counter()))
        sequential = Sequential(
            sessions=sessions,
            turns_per_session=TURNS,
            model_delay_ms=0.0,
            first_turn_ms=dist_ms([e - s for _, t, s, e in spans if t == 0]),
            later_turns_ms=dist_ms([e - s for _, t, s, e in spans if t > 0]),
            before_model_later_turns_ms=dist_ms([model.started[k] - s for k, t, s, _ in spans if t > 0]),
            after_model_later_turns_ms=dist_ms([e - model.replied[k] for k, t, _, e in spans if t > 0]),
        )

        store = rt.store
        assert isinstance(store, SqliteSessionStore)
        probe = [await rt.create_session(agent=AGENT) for _ in range(20)]
        for h in probe:
            await h.run("first turn, activates the session")
        counter = StoreProbe(store)
        sql = SqlCounter()
        n = len(probe)
        with sql.tracing(store) as readers, counter.hops():
            for h in probe:
                await h.run("a later turn on an active session")
        calls, spent = counter.per_turn(n)
        statements, transactions = sql.per_turn(n)
        later = TurnAnatomy(
            store_calls_per_turn=calls,
            store_call_us_per_turn=spent,
            sql_statements_per_turn=statements,
            write_transactions_per_turn=transactions,
            reader_connections=readers,
        )
        sql = SqlCounter()
        local_host(rt).passivate_idle(0)
        with sql.tracing(store), counter.hops():
            for h in probe:
                await h.run("a turn that activates the session again")
        calls, spent = counter.per_turn(n)
        statements, transactions = sql.per_turn(n)
        activates = TurnAnatomy(
            store_calls_per_turn=calls,
            store_call_us_per_turn=spent,
            sql_statements_per_turn=statements,
            write_transactions_per_turn=transactions,
        )
    finally:
        await rt.close()

    # The same sequential turns with every commit synced (durability full): a turn's write
    # transactions each cost a sync then.
    rt = await runtime(folder, "anatomy_full.db", StampedModel(0.0), durability="full")
    try:
        handles = [await rt.create_session(agent=AGENT) for _ in range(full_sessions)]
        full: list[float] = []
        for t in range(3):
            for h in handles:
                start = time.perf_counter()
                await h.run(f"full {t}")
                if t > 0:
                    full.append(time.perf_counter() - start)
    finally:
        await rt.close()

    # A turn's cost as the session grows: one session, many turns, sequential, no delay.
    rt = await runtime(folder, "long.db", StampedModel(0.0))
    try:
        h = await rt.create_session(agent=AGENT)
        times: list[float] = []
        gc.collect()
        for t in range(long_turns):
            start = time.perf_counter()
            await h.run(f"long turn {t}")
            times.append(time.perf_counter() - start)
        t0 = time.perf_counter()
        runs = await rt.store.list_runs(h.id)
        list_runs_ms = (time.perf_counter() - t0) * 1e3
        window = 10
        growth = Growth(
            turns=long_turns,
            median_turn_ms_by_window={
                f"turns {a + 1}-{a + window}": statistics.median(times[a : a + window]) * 1e3
                for a in sorted({0, long_turns // 4, long_turns // 2, long_turns - window})
            },
            list_runs_of_the_session_ms_at_end=list_runs_ms,
            runs_in_session=len(runs),
        )
    finally:
        await rt.close()
    return AnatomyPart(
        sequential=sequential,
        later_turn_on_active_session=later,
        turn_that_activates=activates,
        later_turns_durability_full_ms=dist_ms(full),
        growth_with_turns_in_session=growth,
    )
