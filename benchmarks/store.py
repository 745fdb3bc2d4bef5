"""Store: what ``commit_session`` costs against a raw driver doing the same writes; history loads; disk.

A commit is driven the way the engine drives one (``benchmarks.harness.commits.EngineSession``: one
``MessageHistory`` in memory, one ``append`` per step, run and thread pointers moved, the previous
head as base), so a figure is what a session step pays, not a synthetic bulk insert. Messages are
1 KB of JSON. Nothing here asserts a speed.

SQLite (one writer, WAL; durability normal, and full: an fsync a commit):

- commits against a raw ``sqlite3`` loop on the store's own schema (``ensure_schema``), statements
  and pragmas, one ``BEGIN IMMEDIATE``/``COMMIT`` per row, ids and JSON made before the clock: the
  floor, whatever repertory adds is the ratio. A second raw loop adds the store's two guard reads
  (thread head, run status), which parts the compare-and-set from the Python around the statements.
  repertory and the raw loops alternate round by round, so a noisy neighbour hits all of them;
- ``load_history`` at depths 10 to 10,000 of one lineage, four ways: cached (the store's history
  cache holds it, as for a repeated load), first in the process (cache emptied: read and decoded),
  each alone and until its messages are used (``messages``, ``context_messages()``); then the SQL
  alone (the store's own query) and the first load with the collector paused;
- disk: bytes per appended message after ``wal_checkpoint(TRUNCATE)`` (so the WAL neither hides nor
  inflates it) at a shallow and a deep history, and the WAL bytes a commit writes (whole pages);
- the Python pieces of a commit, timed alone by pyperf, and cProfile over commits by group.

PostgreSQL (a throwaway server, ``synchronous_commit = on``: every commit waited for its WAL flush;
full mode or ``--only postgres``): 1 and 64 writers on one store (pool of 64), each writer its own
run and thread, against raw psycopg loops on the same tables in a schema of their own: ``raw``
(BEGIN, four statements, COMMIT), ``raw_pipelined`` (the same in one round trip),
``raw_function`` (``repertory.repertory_commit(...)`` with prebuilt parameters: the store's server
work without its Python) and ``raw_function_checked`` (the same on a pool checking connections on
checkout, as the store's). Loops rotate round by round; each round records the client's CPU time.

``python -m benchmarks.store [--quick] [--only sqlite|postgres]``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from benchmarks.harness.command import Options, Timer, main
from benchmarks.harness.commits import MESSAGE_BYTES, EngineSession, message_pool
from benchmarks.harness.figures import Figures, Target
from benchmarks.harness.profiling import cumulative, label, matches, stats_of, top_by_tottime, total_tottime
from repertory.core.history import MessageHistory
from repertory.core.ids import new_id, now_ms
from repertory.core.messages import ModelMessage
from repertory.core.state import RunState
from repertory.core.store import SessionStore
from repertory.errors import StoreError
from repertory.storage.commit_plan import plan_commit
from repertory.storage.history_cache import HistoryCache
from repertory.storage.postgres.schema import MIGRATIONS
from repertory.storage.postgres.store import COMMIT_SQL, PostgresSessionStore, event_arrays
from repertory.storage.postgres.store import LINEAGE_SQL as PG_LINEAGE_SQL
from repertory.storage.postgres.store import UPSERT_RUN as PG_UPSERT_RUN
from repertory.storage.sqlite.connection import connect
from repertory.storage.sqlite.schema import ensure_schema
from repertory.storage.sqlite.store import (
    INSERT_REVISIONS,
    LINEAGE_SQL,
    UPSERT_RUN,
    UPSERT_THREAD,
    Durability,
    SqliteSessionStore,
    run_row,
)
from repertory.testing.pg_temp import TemporaryPostgres

INSERT_REVISION = INSERT_REVISIONS  # with its writer thread and its message, as the store writes a step
SIZES: dict[str, dict[str, Any]] = {
    "full": {"commits": 1_000, "rounds": 10, "load_runs": 15, "appends": 200, "depths": (10, 1_000, 10_000),
             "profiled": 2_000, "durabilities": ("normal", "full"),
             "pg": {1: (1_000, 10, 400), 64: (40, 10, 10)}},
    "quick": {"commits": 100, "rounds": 1, "load_runs": 2, "appends": 50, "depths": (10, 100, 1_000),
              "profiled": 100, "durabilities": ("normal",), "pg": {1: (60, 2, 10), 64: (3, 2, 1)}},
}  # fmt: skip
"""Per mode; ``pg``: writers -> (commits per writer per round, rounds, warm-up commits per writer)."""
WAL_FRAME_HEADER = 24
POOL_SIZE = 64
RAW_SCHEMA = "rawbench"
PG_LOOPS = {
    "repertory": "EngineSession.step -> PostgresSessionStore.commit_session (store pool: check on checkout)",
    "raw": "psycopg: BEGIN, insert entry, insert revision, upsert run, upsert thread, COMMIT (6 round trips)",
    "raw_pipelined": "the raw transaction in psycopg pipeline mode (1 round trip)",
    "raw_function": "SELECT repertory.repertory_commit(...) with prebuilt params, pool without check",
    "raw_function_checked": "the same on a pool with check_connection on checkout, as the store's pool",
}
RAW_DDL = [s.replace("repertory.", f"{RAW_SCHEMA}.") for s in MIGRATIONS[1]
           if "FUNCTION" not in s and "repertory.meta" not in s]  # fmt: skip
RAW_ENTRY = (f"INSERT INTO {RAW_SCHEMA}.history_entries (id, created_at, message) VALUES (%s, %s, %s) "
             "ON CONFLICT (id) DO NOTHING")  # fmt: skip
RAW_REVISION = (f"INSERT INTO {RAW_SCHEMA}.history_revisions (id, parent_id, entry_id, depth, created_at) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING")  # fmt: skip
RAW_RUN = PG_UPSERT_RUN.replace("repertory.", f"{RAW_SCHEMA}.")
RAW_THREAD = (f"INSERT INTO {RAW_SCHEMA}.threads (thread_id, head, created_at, updated_at) "
              "VALUES (%s, %s, %s, %s) ON CONFLICT (thread_id) DO UPDATE SET head = excluded.head, "
              "updated_at = excluded.updated_at")  # fmt: skip
PG_SETTINGS = ("server_version", "synchronous_commit", "fsync", "wal_sync_method", "full_page_writes",
               "commit_delay", "shared_buffers", "max_connections", "wal_level")  # fmt: skip
# label -> (file suffix, or "~" for a built-in; function) whose cumulative time is the group: they never
# call one another on the commit path, so the groups add up; the rest is asyncio and glue.
PROFILE_GROUPS: dict[str, tuple[tuple[str, str], ...]] = {
    "sqlite statements": (("~", "<method 'execute' of 'sqlite3.Connection' objects>"),
                          ("~", "<method 'executemany' of 'sqlite3.Connection' objects>"),
                          ("~", "<method 'fetchone' of 'sqlite3.Cursor' objects>")),
    "MessageHistory.append": (("repertory/core/history.py", "append"),),
    "plan_commit": (("repertory/storage/commit_plan.py", "plan_commit"),),
    "model_dump_json (run row, entry)": (("pydantic/main.py", "model_dump_json"),),
    "the engine's pointer updates (point_at)": (("benchmarks/harness/commits.py", "point_at"),),
}  # fmt: skip
PRIVATE_ATTR_READS = ("pydantic/main.py", "__getattr__")  # MessageHistory's indexes read through a slow path


# -- the raw sqlite3 floor (also the turns benchmark's) -------------------------------------------------------


def connect_raw(path: Path, durability: Durability) -> sqlite3.Connection:
    """A plain connection with the store's pragmas and schema: the raw loop's fair starting point."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    for pragma in ("busy_timeout = 10000", "journal_mode = WAL", "journal_size_limit = 67108864",
                   f"synchronous = {'FULL' if durability == 'full' else 'NORMAL'}"):  # fmt: skip
        conn.execute(f"PRAGMA {pragma}")
    ensure_schema(conn, str(path))
    return conn


@dataclass
class RawWriter:
    """One raw loop: its run and thread, rows built before the clock, optionally the store's guard reads."""

    conn: sqlite3.Connection
    guard_reads: bool
    run: RunState = field(default_factory=lambda: EngineSession.new().run)
    head: str | None = None
    depth: int = 0

    def prepare(self, messages: Sequence[ModelMessage]) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = []
        at, run, thread_id = now_ms(), run_row(self.run), self.run.thread_id
        for message in messages:
            entry_id, revision_id = new_id(), new_id()
            self.depth += 1
            revision = (revision_id, self.head, entry_id, self.depth, at, thread_id, at, message.model_dump_json())
            rows.append((self.head, revision, run, (thread_id, revision_id, at, at)))
            self.head = revision_id
        return rows

    def commit_all(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """One ``BEGIN IMMEDIATE``/``COMMIT`` per row, as the store does per ``commit_session``."""
        conn, run_id, thread_id = self.conn, self.run.run_id, self.run.thread_id
        for base, revision, run, thread in rows:
            conn.execute("BEGIN IMMEDIATE")
            if self.guard_reads:
                head = conn.execute("SELECT head FROM threads WHERE thread_id = ?", (thread_id,)).fetchone()
                conn.execute("SELECT status, token FROM runs WHERE run_id = ?", (run_id,)).fetchone()
                if head is not None and head[0] != base:
                    raise RuntimeError("raw loop: thread head moved")
            conn.execute(INSERT_REVISION, revision)
            conn.execute(UPSERT_RUN, run)
            conn.execute(UPSERT_THREAD, thread)
            conn.execute("COMMIT")


# -- SQLite ----------------------------------------------------------------------------------------------------


async def sqlite_commits(figures: Figures, folder: Path, durability: Durability, size: dict[str, Any]) -> None:
    """Engine-style ``commit_session`` against the two raw loops, alternating round by round."""
    commits, pool = size["commits"], message_pool()
    store = await SqliteSessionStore.open(folder / f"commits-{durability}.db", durability=durability)
    raw = RawWriter(connect_raw(folder / f"raw-{durability}.db", durability), guard_reads=False)
    guarded = RawWriter(connect_raw(folder / f"raw-guarded-{durability}.db", durability), guard_reads=True)
    batch = [pool[i % len(pool)] for i in range(commits)]
    seconds: dict[str, list[float]] = {"repertory": [], "raw": [], "guarded": []}
    try:
        warm = EngineSession.new()  # statement caches, the first pages of every table, the thread row
        for message in batch[:200]:
            await warm.step(store, message)
        for writer in (raw, guarded):
            writer.commit_all(writer.prepare(batch[:200]))
        for _ in range(size["rounds"]):
            session = EngineSession.new()  # a new session a round, as a host starts them
            started = time.perf_counter()
            for message in batch:
                await session.step(store, message)
            seconds["repertory"].append(time.perf_counter() - started)
            for name, writer in (("raw", raw), ("guarded", guarded)):
                rows = writer.prepare(batch)
                started = time.perf_counter()
                writer.commit_all(rows)
                seconds[name].append(time.perf_counter() - started)
    finally:
        await store.close()
        raw.conn.close()
        guarded.conn.close()
    rates = {k: [commits / s for s in v] for k, v in seconds.items()}
    head = f"SQLite {durability}"
    figures.value(f"{head}: commit_session/s, one writer", rates["repertory"], "commits/s",
                  target=Target(10_000, at_most=False) if durability == "normal" else None,
                  note=f"1 KB messages, {commits:,} a round")  # fmt: skip
    figures.value(f"{head}: raw sqlite3 commits/s", rates["raw"], "commits/s", note="the floor")
    figures.value(f"{head}: raw sqlite3 + guard reads commits/s", rates["guarded"], "commits/s")
    for name, shown in (("raw", "raw sqlite3"), ("guarded", "raw sqlite3 + guard reads")):
        ratios = [o / t for t, o in zip(seconds["repertory"], seconds[name], strict=True)]  # rate over rate
        figures.value(f"{head}: commit_session / {shown}", ratios, "x", note="round by round",
                      target=Target(0.4, at_most=False) if name == "raw" else None)  # fmt: skip
    overhead = statistics.median(seconds["repertory"]) / commits - statistics.median(seconds["raw"]) / commits
    figures.time(f"{head}: repertory's time per commit over the raw loop's", overhead)


class Loads:
    """``load_history`` of one lineage at several depths, and its SQL alone (``query``)."""

    def __init__(self, load: Callable[[str], Awaitable[MessageHistory | None]], cache: HistoryCache | None,
                 query: Callable[[str], Awaitable[object]]) -> None:  # fmt: skip
        self.load, self.cache, self.query = load, cache, query

    async def samples(self, runs: int, call: Callable[[], Awaitable[object]], cold: bool = False,
                      gc_off: bool = False) -> list[float]:  # fmt: skip
        """Seconds of ``runs`` calls after one untimed (``cold``: the history cache emptied before each)."""
        out: list[float] = []
        for n in range(runs + 1):
            if cold and self.cache is not None:
                self.cache.clear()
            if gc_off:
                gc.disable()
            try:
                started = time.perf_counter()
                await call()
                took = time.perf_counter() - started
            finally:
                gc.enable()
            if n:
                out.append(took)
        return out

    async def measure(self, figures: Figures, prefix: str, revisions: Sequence[str], depths: Sequence[int],
                      runs: int) -> None:  # fmt: skip
        """Each depth: cached and first in the process, alone and used; the SQL alone; GC paused."""
        for depth in depths:
            rid = revisions[depth - 1]

            async def load(rid: str = rid) -> None:
                await self.load(rid)

            async def used(rid: str = rid, want: int = depth) -> None:
                history = await self.load(rid)
                if history is None or len(history.messages) != want or len(history.context_messages()) != want:
                    raise RuntimeError(f"load_history at depth {want} returned the wrong lineage")

            async def sql(rid: str = rid) -> None:
                await self.query(rid)

            target = Target(0.05) if depth == 10_000 else None
            name = f"{prefix}load_history at depth {depth:,}"
            figures.time(f"{name}, cached", await self.samples(runs, load))
            figures.time(f"{name}, cached, messages used", await self.samples(runs, used), target=target)
            cold = await self.samples(runs, load, cold=True)
            figures.time(f"{name}, first in the process", cold, note="history cache emptied: read and decoded")
            figures.time(f"{name}, first in the process, messages used", await self.samples(runs, used, cold=True),
                         target=target)  # fmt: skip
            query = await self.samples(runs, sql)
            figures.time(f"{name}, the SQL alone", query)
            figures.time(f"{name}, decoding (first less the SQL)", statistics.median(cold) - statistics.median(query))
            figures.time(f"{name}, first in the process, GC paused", await self.samples(runs, load, cold=True,
                                                                                       gc_off=True))  # fmt: skip


async def _seeded_lineage(store: SessionStore, depth: int) -> list[str]:
    """One lineage of ``depth`` messages, its revision ids; the seeding session's copy is dropped before timing."""
    pool = message_pool()
    session = EngineSession.new()
    await session.seed(store, [pool[i % len(pool)] for i in range(depth)])
    revisions = [r.id for r in session.history.revisions]
    del session
    gc.collect()
    return revisions


async def sqlite_loads(figures: Figures, folder: Path, depths: Sequence[int], runs: int) -> None:
    """One lineage as deep as the deepest depth, loaded at each depth."""
    store = await SqliteSessionStore.open(folder / "load.db")
    reader = connect(store.path, uri=False, durability="normal", wal=True)
    try:
        revisions = await _seeded_lineage(store, max(depths))

        async def query(rid: str) -> object:  # on a reader in a worker thread, as load_history runs it
            return await asyncio.to_thread(lambda: reader.execute(LINEAGE_SQL, (rid,)).fetchall())

        await Loads(store.load_history, store.history_cache, query).measure(figures, "SQLite ", revisions, depths, runs)
    finally:
        reader.close()
        await store.close()


def _on_disk(store: SqliteSessionStore) -> int:
    """Main file plus WAL after a truncating checkpoint (the -shm index is memory, not data)."""
    if store.connections[0].execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]:
        raise RuntimeError("checkpoint was blocked; disk figures would be wrong")
    return sum(os.path.getsize(p) for p in (store.path, store.path + "-wal") if os.path.exists(p))


async def sqlite_disk(figures: Figures, folder: Path, depth: int, appends: int) -> float:
    """Seed a lineage to ``depth``, append ``appends`` messages a commit each, weigh the file; bytes a message."""
    pool = message_pool()
    store = await SqliteSessionStore.open(folder / f"disk-{depth}.db")
    session, writer = EngineSession.new(), store.connections[0]
    try:
        await session.seed(store, [pool[i % len(pool)] for i in range(depth)])
        writer.execute("PRAGMA wal_autocheckpoint = 0")  # the WAL's size is then every byte the commits wrote
        before = _on_disk(store)
        for i in range(appends):
            await session.step(store, pool[i % len(pool)])
        wal = os.path.getsize(store.path + "-wal") / appends
        per_message = (_on_disk(store) - before) / appends
        page = int(writer.execute("PRAGMA page_size").fetchone()[0])
    finally:
        await store.close()
    figures.fact("SQLite page size", page)
    figures.size(f"SQLite bytes per appended message, depth {depth:,}", per_message,
                 note=f"{appends} appends, after wal_checkpoint(TRUNCATE)")  # fmt: skip
    figures.value(f"SQLite bytes per appended message / its JSON, depth {depth:,}", per_message / MESSAGE_BYTES,
                  "x JSON", target=Target(2.0))  # fmt: skip
    figures.size(f"SQLite WAL bytes written per commit, depth {depth:,}", wal)
    figures.value(f"SQLite WAL pages written per commit, depth {depth:,}", wal / (page + WAL_FRAME_HEADER), "pages")
    return per_message


async def sqlite_profile(figures: Figures, folder: Path, commits: int) -> None:
    """cProfile over engine-style commits: shares by group (cProfile taxes Python calls, not SQLite's C)."""
    pool = message_pool()
    store = await SqliteSessionStore.open(folder / "profile.db")
    session, profiler = EngineSession.new(), cProfile.Profile()
    try:
        for message in pool * 12:
            await session.step(store, message)
        gc.collect()
        profiler.enable()
        for i in range(commits):
            await session.step(store, pool[i % len(pool)])
        profiler.disable()
    finally:
        await store.close()
    stats = stats_of(profiler)
    total = total_tottime(stats)
    groups = {name: cumulative(stats, wheres) for name, wheres in PROFILE_GROUPS.items()}
    groups["everything else (asyncio, context managers, glue)"] = max(total - sum(groups.values()), 0.0)
    figures.time("cProfile: a commit, profiled", total / commits, note="the profiler's overhead included")
    for name, seconds in sorted(groups.items(), key=lambda kv: kv[1], reverse=True):
        figures.value(f"cProfile: {name}, share of a commit", seconds / total * 100, "%",
                      note=f"{seconds / commits * 1e6:.1f} us a commit, profiled")  # fmt: skip
    private = cumulative(stats, [PRIVATE_ATTR_READS])
    calls = sum(s[1] for key, s in stats.items() if matches(key, *PRIVATE_ATTR_READS))
    figures.value("cProfile: pydantic private-attribute reads a commit", calls / commits, "calls",
                  note=f"{private / total:.0%} of the profiled time, across the groups")  # fmt: skip
    top = top_by_tottime(stats, 8)
    figures.fact("cProfile top own time, us a commit",
                 "; ".join(f"{label(k, basename=True)} {s[2] / commits * 1e6:.1f}" for k, s in top))  # fmt: skip


def timings(timer: Timer, options: Options) -> None:
    """The Python pieces of one commit, each timed alone."""
    message = message_pool(1)[0]
    session = EngineSession.new()
    session.history.extend([message, message])
    base = session.history.revisions[0].id
    session.point_at(session.history.revision_id)
    run, thread, history, scratch = session.run, session.thread, session.history, MessageHistory()

    def looped(call: Callable[[], object]) -> Callable[[int], float]:
        def time_loops(loops: int) -> float:
            started = time.perf_counter()
            for _ in range(loops):
                call()
            return time.perf_counter() - started

        return time_loops

    def serialise_rows() -> None:  # what commit_session builds before BEGIN
        run.model_dump_json()
        message.model_dump_json()

    pieces: dict[str, Callable[[], object]] = {
        "new_id()": new_id,
        "MessageHistory.append": lambda: scratch.append(message),
        "pointers and timestamps (point_at)": lambda: session.point_at(history.revision_id),
        "plan_commit, one revision": lambda: plan_commit(run, thread, history, base, lambda _: False),
        "RunState.model_dump_json": run.model_dump_json,
        "message model_dump_json": message.model_dump_json,
        "the rows serialised (run + message)": serialise_rows,
    }
    for name, call in pieces.items():
        timer.bench(f"commit piece: {name}", looped(call))


# -- PostgreSQL ------------------------------------------------------------------------------------------------


@dataclass
class RawPgWriter:
    """One raw writer: a run and a thread of its own, and the head its next commit builds on."""

    run: RunState = field(default_factory=lambda: EngineSession.new().run)
    head: str | None = None
    depth: int = 0

    def prepare(self, messages: Sequence[ModelMessage], function: bool) -> list[tuple[Any, ...]]:
        """Parameters of ``len(messages)`` commits: the raw statements' rows, or ``repertory_commit``'s."""
        out: list[tuple[Any, ...]] = []
        run, state, thread_id = self.run, self.run.model_dump_json(), self.run.thread_id
        no_events = event_arrays((), thread_id)  # a step without events, as commit_session sends it
        for message in messages:
            at, entry_id, revision_id, body = now_ms(), new_id(), new_id(), message.model_dump_json()
            self.depth += 1
            if function:
                out.append((thread_id, self.head, revision_id, at, at, at, run.run_id, run.status, None, state, None,
                            [entry_id], [at], [body], [revision_id], [self.head], [entry_id], [self.depth], [at],
                            *no_events))  # fmt: skip
            else:
                out.append(((entry_id, at, body), (revision_id, self.head, entry_id, self.depth, at),
                            (run.run_id, thread_id, run.status, at, None, state),
                            (thread_id, revision_id, at, at)))  # fmt: skip
            self.head = revision_id
        return out


PgCommit = Callable[[psycopg.AsyncConnection[Any], tuple[Any, ...]], Awaitable[None]]


async def _raw_commit(conn: psycopg.AsyncConnection[Any], row: tuple[Any, ...]) -> None:
    async with conn.transaction():
        for sql, params in zip((RAW_ENTRY, RAW_REVISION, RAW_RUN, RAW_THREAD), row, strict=True):
            await conn.execute(sql, params)


async def _raw_pipelined_commit(conn: psycopg.AsyncConnection[Any], row: tuple[Any, ...]) -> None:
    async with conn.pipeline():
        await _raw_commit(conn, row)


async def _function_commit(conn: psycopg.AsyncConnection[Any], params: tuple[Any, ...]) -> None:
    await conn.execute(COMMIT_SQL, params)


@dataclass(frozen=True)
class Pools:
    """The store and the two raw pools (without and with the checkout check)."""

    store: PostgresSessionStore
    plain: AsyncConnectionPool
    checked: AsyncConnectionPool


async def pg_commits(figures: Figures, pools: Pools, writers: int, shape: tuple[int, int, int]) -> None:
    """Every loop at ``writers`` concurrent writers, rotating round by round, wall and client CPU time."""
    per_writer, rounds, warmup = shape
    pool_msgs = message_pool()
    batch = [pool_msgs[i % len(pool_msgs)] for i in range(per_writer)]
    sessions = [EngineSession.new() for _ in range(writers)]
    loops: dict[str, tuple[AsyncConnectionPool, PgCommit, bool]] = {
        "raw": (pools.plain, _raw_commit, False),
        "raw_pipelined": (pools.plain, _raw_pipelined_commit, False),
        "raw_function": (pools.plain, _function_commit, True),
        "raw_function_checked": (pools.checked, _function_commit, True),
    }
    raw = {name: [RawPgWriter() for _ in range(writers)] for name in loops}

    def round_of(name: str, size: int) -> Callable[[], Awaitable[object]]:
        """One round's work, every parameter built before it is timed; each writer a task of its own."""
        messages = batch[:size]
        if name == "repertory":

            async def engine(s: EngineSession) -> None:
                for message in messages:
                    await s.step(pools.store, message)

            return lambda: asyncio.gather(*(engine(s) for s in sessions))
        pool, commit, function = loops[name]
        work = [w.prepare(messages, function) for w in raw[name]]

        async def writer(rows: Sequence[tuple[Any, ...]]) -> None:
            for row in rows:
                async with pool.connection() as conn:  # a checkout per commit, as the store does
                    await commit(conn, row)

        return lambda: asyncio.gather(*(writer(rows) for rows in work))

    # Warm-up: every thread created, the pools filled, each connection past psycopg's prepare threshold.
    for name in PG_LOOPS:
        await round_of(name, min(warmup, per_writer))()
    seconds: dict[str, list[float]] = {name: [] for name in PG_LOOPS}
    cpu: dict[str, list[float]] = {name: [] for name in PG_LOOPS}
    names = list(PG_LOOPS)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            work = round_of(name, per_writer)
            gc.collect()  # an earlier round's garbage is not billed to this one
            cpu0, wall0 = time.process_time(), time.perf_counter()
            await work()
            seconds[name].append(time.perf_counter() - wall0)
            cpu[name].append((time.process_time() - cpu0) / (writers * per_writer))
    await _check_heads(pools.plain, sessions, raw)
    total, head = writers * per_writer, f"PostgreSQL, {writers} writer(s)"
    for name, about in PG_LOOPS.items():
        rates = [total / s for s in seconds[name]]
        figures.value(f"{head}: {name} commits/s", rates, "commits/s", note=about)
        figures.time(f"{head}: {name} client CPU per commit", cpu[name])
        figures.value(f"{head}: {name} client cores busy", [c * r for c, r in zip(cpu[name], rates, strict=True)],
                      "cores", note="near 1: the client's one thread is what limits the rate")  # fmt: skip
        if name != "repertory":
            ratios = [o / t for t, o in zip(seconds["repertory"], seconds[name], strict=True)]
            figures.value(f"{head}: commit_session / {name}", ratios, "x", note="round by round",
                          target=Target(0.5, at_most=False) if name == "raw" else None)  # fmt: skip


async def _check_heads(pool: AsyncConnectionPool, sessions: Sequence[EngineSession],
                       raw: dict[str, list[RawPgWriter]]) -> None:  # fmt: skip
    """Every loop wrote what it claims: each thread's stored head is its writer's last revision."""
    expected: dict[tuple[str, str], str | None] = {("repertory", s.thread.thread_id): s.head for s in sessions}
    for name, writers in raw.items():
        schema = RAW_SCHEMA if name in ("raw", "raw_pipelined") else "repertory"
        expected.update({(schema, w.run.thread_id): w.head for w in writers})
    async with pool.connection() as conn:
        for schema in ("repertory", RAW_SCHEMA):
            cur = await conn.execute(f"SELECT thread_id, head FROM {schema}.threads")
            stored = {(schema, t): h for t, h in await cur.fetchall()}
            for key, head in expected.items():
                if key[0] == schema and stored.get(key) != head:
                    raise RuntimeError(f"{schema} thread {key[1]}: stored head {stored.get(key)!r}, expected {head!r}")


async def postgres(figures: Figures, size: dict[str, Any]) -> None:
    """The PostgreSQL part on a throwaway server; without server binaries, a fact says why not."""
    try:
        pg = TemporaryPostgres()
    except StoreError as exc:
        figures.fact("PostgreSQL", f"not measured: {exc}")
        return
    with pg:
        store = await PostgresSessionStore.open(pg.url, min_size=POOL_SIZE, max_size=POOL_SIZE)
        common: dict[str, Any] = {"min_size": POOL_SIZE, "max_size": POOL_SIZE, "open": False,
                                  "kwargs": {"autocommit": True}}  # fmt: skip
        plain = AsyncConnectionPool(pg.url, name="raw", **common)
        checked = AsyncConnectionPool(pg.url, check=AsyncConnectionPool.check_connection, name="checked", **common)
        try:
            await plain.open(wait=True, timeout=60)
            await checked.open(wait=True, timeout=60)
            async with plain.connection() as conn:
                await conn.execute(f"DROP SCHEMA IF EXISTS {RAW_SCHEMA} CASCADE")
                await conn.execute(f"CREATE SCHEMA {RAW_SCHEMA}")
                for stmt in RAW_DDL:
                    await conn.execute(stmt)
                settings = {}
                for name in PG_SETTINGS:
                    row = await (await conn.execute("SELECT current_setting(%s)", (name,))).fetchone()
                    settings[name] = "" if row is None else str(row[0])
            figures.fact("PostgreSQL server", ", ".join(f"{k}={v}" for k, v in settings.items()))
            figures.fact("PostgreSQL client", f"psycopg {psycopg.__version__}, libpq {psycopg.pq.version()} "
                         f"({psycopg.pq.__impl__}), pools of {POOL_SIZE}")  # fmt: skip
            for writers, shape in size["pg"].items():
                await pg_commits(figures, Pools(store, plain, checked), writers, shape)
        finally:
            await store.close()
            await plain.close()
            await checked.close()
        await pg_loads(figures, pg.url, size)


async def pg_loads(figures: Figures, url: str, size: dict[str, Any]) -> None:
    """``load_history`` on PostgreSQL (a default pool); the SQL alone on a plain connection."""
    depths = size["depths"]
    store = await PostgresSessionStore.open(url)
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    try:
        revisions = await _seeded_lineage(store, max(depths))

        async def query(rid: str) -> object:
            return await (await conn.execute(PG_LINEAGE_SQL, (rid,))).fetchall()

        loads = Loads(store.load_history, store.history_cache, query)
        await loads.measure(figures, "PostgreSQL ", revisions, depths, size["load_runs"])
    finally:
        await conn.close()
        await store.close()


async def scenario(figures: Figures, options: Options) -> None:
    """SQLite (commits, loads, disk, profile), then PostgreSQL; quick mode measures SQLite only."""
    size, only = SIZES[options.mode], options.args.only or ("sqlite" if options.quick else None)
    figures.fact("message", f"{MESSAGE_BYTES} B of JSON; run row {len(EngineSession.new().run.model_dump_json())} B")
    if only != "postgres":
        figures.fact("SQLite", "WAL; durability normal (synchronous=NORMAL) unless named full (FULL)")
        with tempfile.TemporaryDirectory(prefix="repertory-store-") as tmp:
            folder = Path(tmp)
            for durability in size["durabilities"]:
                await sqlite_commits(figures, folder, durability, size)
            await sqlite_loads(figures, folder, size["depths"], size["load_runs"])
            shallow, deep = size["depths"][0], size["depths"][-1]
            low, high = [await sqlite_disk(figures, folder, d, size["appends"]) for d in (shallow, deep)]
            figures.value(f"SQLite bytes per appended message, depth {deep:,} / depth {shallow:,}", high / low, "x",
                          target=Target(1.1), note="flat: within 10%")  # fmt: skip
            await sqlite_profile(figures, folder, size["profiled"])
    if only == "sqlite":
        figures.fact("PostgreSQL", "not measured: " + ("quick mode" if options.quick else "--only sqlite"))
    else:
        await postgres(figures, size)


def _args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--only", choices=("sqlite", "postgres"),
                        help="measure one backend (the suite written holds its figures alone)")  # fmt: skip


if __name__ == "__main__":
    main("store", __doc__, timings=timings, scenario=scenario, add_args=_args, processes=3)
