"""PostgreSQL store benchmark: ``commit_session`` throughput against raw psycopg, 1 and 64 writers; history loads.

Run through ``python -m benchmarks.store [--quick] [--only postgres]``; the figures land under the
``"postgres"`` key of ``benchmarks/results/store.json``. The server is a throwaway PostgreSQL from
``TemporaryPostgres`` (loopback TCP, fsync on) left at its default ``synchronous_commit = on``, so
every commit counted here returned only after its WAL record was flushed to disk.

How the loops are built:

- ``repertory``: the engine's way, as in the SQLite benchmark: one ``EngineSession`` per writer (its
  ``MessageHistory`` kept in memory), ``append``, run and thread pointers moved to the new head,
  ``commit_session`` with the previous head as base. All writers share one ``PostgresSessionStore``
  whose pool holds ``POOL_SIZE`` (64) connections, opened with ``PostgresSessionStore.open``.
- ``raw``: plain psycopg on a plain ``AsyncConnectionPool`` of the same size, against the same tables
  built in a separate schema (``rawbench``, from the store's own migration DDL). Per commit: check a
  connection out, ``BEGIN``, insert the entry, insert the revision, upsert the run (the store's own
  statement), upsert the thread head, ``COMMIT``: one transaction, one statement per round trip. Ids,
  timestamps and JSON are built before the clock starts. This is the floor the ratio is read against.

Three more raw loops split repertory's cost into parts, so a low ratio points at its cause:

- ``raw_pipelined``: the ``raw`` transaction in psycopg pipeline mode, so it costs one round trip.
- ``raw_function``: ``SELECT repertory.repertory_commit(...)`` (the store's own server-side commit,
  guards included) with parameters built up front, on a pool without a checkout check: the store's
  server work and round trips without any of its Python.
- ``raw_function_checked``: the same on a pool with ``check=AsyncConnectionPool.check_connection``,
  as the store's pool is configured: the difference is what the check on every checkout costs.

With 64 writers, each writer is one asyncio task with its own run and thread, so no two commits
contend for a row lock; the figure is aggregate commits per second across the tasks. The loops run
round by round in a rotating order, so a disturbance on a shared 2-core machine is spread over all
of them, and each round records the client process's CPU time as well as wall time: when the client
is the bottleneck, CPU microseconds per commit say so directly.
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from benchmarks.harness.commits import EngineSession
from benchmarks.store.loads import LoadableStore, load_history, measure_loads
from benchmarks.store.report import (
    TARGET_PG_RATIO,
    LoadHistory,
    PgCommitResult,
    PgSection,
    PgSkipped,
    PgVariantResult,
)
from repertory.core.ids import new_id, now_ms
from repertory.core.messages import ModelMessage
from repertory.core.state import RunState
from repertory.errors import StoreError
from repertory.storage.postgres.schema import MIGRATIONS
from repertory.storage.postgres.store import COMMIT_SQL, LINEAGE_SQL, UPSERT_RUN, PostgresSessionStore, event_arrays
from repertory.testing.pg_temp import TemporaryPostgres

__all__ = ["POOL_SIZE", "VARIANTS", "WRITERS", "run_postgres"]

POOL_SIZE = 64
WRITERS = (1, 64)
RAW_SCHEMA = "rawbench"

VARIANTS: dict[str, str] = {
    "repertory": "EngineSession.step -> PostgresSessionStore.commit_session (store pool: check on checkout)",
    "raw": "psycopg: BEGIN, insert entry, insert revision, upsert run, upsert thread, COMMIT (6 round trips)",
    "raw_pipelined": "the raw transaction in psycopg pipeline mode (1 round trip)",
    "raw_function": "SELECT repertory.repertory_commit(...) with prebuilt params, pool without check",
    "raw_function_checked": "the same on a pool with check_connection on checkout, as the store's pool",
}

# The raw schema: the store's migration DDL with the schema renamed; no meta table, no function.
RAW_DDL = [
    stmt.replace("repertory.", f"{RAW_SCHEMA}.")
    for stmt in MIGRATIONS[1]
    if "FUNCTION" not in stmt and "repertory.meta" not in stmt
]
RAW_ENTRY = (
    f"INSERT INTO {RAW_SCHEMA}.history_entries (id, created_at, message) VALUES (%s, %s, %s) "
    "ON CONFLICT (id) DO NOTHING"
)
RAW_REVISION = (
    f"INSERT INTO {RAW_SCHEMA}.history_revisions (id, parent_id, entry_id, depth, created_at) "
    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING"
)
RAW_RUN = UPSERT_RUN.replace("repertory.", f"{RAW_SCHEMA}.")
RAW_THREAD = (
    f"INSERT INTO {RAW_SCHEMA}.threads (thread_id, head, created_at, updated_at) VALUES (%s, %s, %s, %s) "
    "ON CONFLICT (thread_id) DO UPDATE SET head = excluded.head, updated_at = excluded.updated_at"
)

SETTINGS = (
    "server_version",
    "synchronous_commit",
    "fsync",
    "wal_sync_method",
    "full_page_writes",
    "commit_delay",
    "shared_buffers",
    "max_connections",
    "wal_level",
)


@dataclass
class RawPgWriter:
    """One raw writer: a run and a thread of its own, and the head its next commit builds on."""

    run: RunState = field(default_factory=lambda: EngineSession.new().run)
    head: str | None = None
    depth: int = 0

    def prepare(self, messages: Sequence[ModelMessage], function: bool) -> list[tuple[Any, ...]]:
        """Parameters for ``len(messages)`` commits: raw statement rows, or ``repertory_commit`` calls."""
        out: list[tuple[Any, ...]] = []
        run = self.run
        state = run.model_dump_json()  # a run row of the store's shape and size
        thread_id = run.thread_id
        no_events = event_arrays((), thread_id)  # a step that carries no events, as commit_session sends it
        for message in messages:
            at = now_ms()
            entry_id, revision_id = new_id(), new_id()
            self.depth += 1
            body = message.model_dump_json()
            if function:
                out.append(
                    (
                        thread_id, self.head, revision_id, at, at, at,
                        run.run_id, run.status, None, state, None,
                        [entry_id], [at], [body],
                        [revision_id], [self.head], [entry_id], [self.depth], [at],
                        *no_events,
                    )
                )  # fmt: skip
            else:
                out.append(
                    (
                        (entry_id, at, body),
                        (revision_id, self.head, entry_id, self.depth, at),
                        (run.run_id, thread_id, run.status, at, None, state),
                        (thread_id, revision_id, at, at),
                    )
                )
            self.head = revision_id
        return out


Commit = Callable[[psycopg.AsyncConnection[Any], tuple[Any, ...]], Awaitable[None]]


async def _raw_commit(conn: psycopg.AsyncConnection[Any], row: tuple[Any, ...]) -> None:
    entry, revision, run, thread = row
    async with conn.transaction():
        await conn.execute(RAW_ENTRY, entry)
        await conn.execute(RAW_REVISION, revision)
        await conn.execute(RAW_RUN, run)
        await conn.execute(RAW_THREAD, thread)


async def _raw_pipelined_commit(conn: psycopg.AsyncConnection[Any], row: tuple[Any, ...]) -> None:
    entry, revision, run, thread = row
    async with conn.pipeline(), conn.transaction():
        await conn.execute(RAW_ENTRY, entry)
        await conn.execute(RAW_REVISION, revision)
        await conn.execute(RAW_RUN, run)
        await conn.execute(RAW_THREAD, thread)


async def _function_commit(conn: psycopg.AsyncConnection[Any], params: tuple[Any, ...]) -> None:
    await conn.execute(COMMIT_SQL, params)


async def _drive_raw(pool: AsyncConnectionPool, commit: Commit, work: Sequence[Sequence[tuple[Any, ...]]]) -> None:
    """Every writer as its own task; each commit checks a connection out, as the store does."""

    async def writer(rows: Sequence[tuple[Any, ...]]) -> None:
        for row in rows:
            async with pool.connection() as conn:
                await commit(conn, row)

    await asyncio.gather(*(writer(rows) for rows in work))


async def _drive_repertory(
    store: PostgresSessionStore, sessions: Sequence[EngineSession], batch: Sequence[ModelMessage]
) -> None:
    async def writer(session: EngineSession) -> None:
        for message in batch:
            await session.step(store, message)

    await asyncio.gather(*(writer(s) for s in sessions))


@dataclass(frozen=True)
class Pools:
    """The store and the two raw pools (without and with the checkout check) every loop draws on."""

    store: PostgresSessionStore
    plain: AsyncConnectionPool
    checked: AsyncConnectionPool


async def _measure(
    pools: Pools, writers: int, per_writer: int, rounds: int, warmup: int, pool_msgs: Sequence[ModelMessage]
) -> PgCommitResult:
    batch = [pool_msgs[i % len(pool_msgs)] for i in range(per_writer)]
    sessions = [EngineSession.new() for _ in range(writers)]
    loops: dict[str, tuple[AsyncConnectionPool, Commit, bool]] = {
        "raw": (pools.plain, _raw_commit, False),
        "raw_pipelined": (pools.plain, _raw_pipelined_commit, False),
        "raw_function": (pools.plain, _function_commit, True),
        "raw_function_checked": (pools.checked, _function_commit, True),
    }
    raw = {name: [RawPgWriter() for _ in range(writers)] for name in loops}

    def round_of(name: str, size: int) -> Callable[[], Awaitable[None]]:
        """The work of one round, with every parameter built before it is timed."""
        messages = batch[:size]
        if name == "repertory":
            return lambda: _drive_repertory(pools.store, sessions, messages)
        pool, commit, function = loops[name]
        work = [w.prepare(messages, function) for w in raw[name]]
        return lambda: _drive_raw(pool, commit, work)

    # Warm-up: creates every thread (the first commit of a thread takes another path), fills the
    # pools, and gets each connection past psycopg's prepare threshold for every statement.
    for name in VARIANTS:
        await round_of(name, min(warmup, per_writer))()

    seconds: dict[str, list[float]] = {name: [] for name in VARIANTS}
    cpu: dict[str, list[float]] = {name: [] for name in VARIANTS}
    names = list(VARIANTS)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            work = round_of(name, per_writer)
            gc.collect()  # an earlier round's garbage is not billed to this one, in wall or CPU time
            cpu_start, wall_start = time.process_time(), time.perf_counter()
            await work()
            seconds[name].append(time.perf_counter() - wall_start)
            cpu[name].append((time.process_time() - cpu_start) / (writers * per_writer) * 1e6)
    await _check_heads(pools.plain, sessions, raw)

    total = writers * per_writer

    def variant(name: str) -> PgVariantResult:
        rates = [total / s for s in seconds[name]]
        rate = statistics.median(rates)
        return PgVariantResult(
            name=name,
            description=VARIANTS[name],
            commits_per_s=rate,
            best_commits_per_s=max(rates),
            us_per_commit=1e6 / rate,
            mean_latency_us=writers * 1e6 / rate,
            client_cpu_us_per_commit=statistics.median(cpu[name]),
            # CPU seconds per wall second: near 1.0, the one Python thread is what limits the rate.
            client_cpu_cores=statistics.median(c * r / 1e6 for c, r in zip(cpu[name], rates, strict=True)),
            rounds=rates,
            client_cpu_rounds_us=cpu[name],
        )

    def ratio(other: str) -> float:
        # Repertory's rate over the other's, round by round, is the other's seconds over repertory's.
        return statistics.median(o / t for t, o in zip(seconds["repertory"], seconds[other], strict=True))

    main = ratio("raw")
    return PgCommitResult(
        writers=writers,
        commits_per_writer_per_round=per_writer,
        commits_per_round=total,
        rounds=rounds,
        variants={name: variant(name) for name in VARIANTS},
        ratio=main,
        ratio_vs_raw_pipelined=ratio("raw_pipelined"),
        ratio_vs_raw_function=ratio("raw_function"),
        ratio_vs_raw_function_checked=ratio("raw_function_checked"),
        meets_ratio_target=main >= TARGET_PG_RATIO,
    )


async def _check_heads(
    pool: AsyncConnectionPool, sessions: Sequence[EngineSession], raw: dict[str, list[RawPgWriter]]
) -> None:
    """Every loop really wrote what it claims: each thread's stored head is its writer's last revision."""
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


async def _server_settings(conn: psycopg.AsyncConnection[Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in SETTINGS:
        cur = await conn.execute("SELECT current_setting(%s)", (name,))
        row = await cur.fetchone()
        out[name] = "" if row is None else str(row[0])
    return out


async def bench_postgres(
    url: str, quick: bool, pool_msgs: Sequence[ModelMessage]
) -> tuple[dict[str, str], list[PgCommitResult]]:
    """Open the store and the raw pools on ``url``, build the raw schema, and measure 1 and 64 writers."""
    store = await PostgresSessionStore.open(url, min_size=POOL_SIZE, max_size=POOL_SIZE)
    common: dict[str, Any] = {"min_size": POOL_SIZE, "max_size": POOL_SIZE, "open": False}
    plain = AsyncConnectionPool(url, kwargs={"autocommit": True}, name="raw", **common)
    checked = AsyncConnectionPool(
        url, kwargs={"autocommit": True}, check=AsyncConnectionPool.check_connection, name="raw-checked", **common
    )
    try:
        await plain.open(wait=True, timeout=60)
        await checked.open(wait=True, timeout=60)
        async with plain.connection() as conn:
            await conn.execute(f"DROP SCHEMA IF EXISTS {RAW_SCHEMA} CASCADE")
            await conn.execute(f"CREATE SCHEMA {RAW_SCHEMA}")
            for stmt in RAW_DDL:
                await conn.execute(stmt)
            settings = await _server_settings(conn)
        pools = Pools(store, plain, checked)
        # (per-writer commits, rounds, warm-up commits per writer) at each concurrency.
        # The pools hand connections out first in, first out, so one writer cycles through all 64 of
        # them: a full run's warm-up gives every connection more commits than psycopg's prepare
        # threshold (5) before the clock starts. The quick run is a smoke run and skips that.
        shape = {1: (60, 2, 10), 64: (3, 2, 1)} if quick else {1: (1_000, 10, 400), 64: (40, 10, 10)}
        results = []
        for writers in WRITERS:
            per_writer, rounds, warmup = shape[writers]
            results.append(await _measure(pools, writers, per_writer, rounds, warmup, pool_msgs))
    finally:
        await store.close()
        await plain.close()
        await checked.close()
    return settings, results


async def bench_pg_load(url: str, quick: bool, pool_msgs: Sequence[ModelMessage]) -> LoadHistory:
    """``load_history`` at the SQLite part's depths, on its own store (a default pool), warm and cold.

    The SQL alone is the store's own lineage query on a plain connection, fetched as the store does.
    """
    depths = (10, 1_000, 10_000)
    store = await PostgresSessionStore.open(url)
    session = EngineSession.new()
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    try:
        await session.seed(store, [pool_msgs[i % len(pool_msgs)] for i in range(max(depths))])
        revision_ids = [r.id for r in session.history.revisions]
        del session
        gc.collect()

        async def query(rid: str) -> object:
            cur = await conn.execute(LINEAGE_SQL, (rid,))
            return await cur.fetchall()

        loadable = LoadableStore(store.load_history, store.history_cache)
        results = await measure_loads(loadable, revision_ids, depths, 5 if quick else 15, query)
    finally:
        await conn.close()
        await store.close()
    return load_history(results)


async def run_postgres(quick: bool, pool_msgs: Sequence[ModelMessage]) -> PgSection | PgSkipped:
    """The PostgreSQL section of the report, on a throwaway server started and removed here.

    Without server binaries the section says so (``skipped``, printed in the table) rather than
    failing the SQLite figures measured in the same run.
    """
    started = time.perf_counter()
    try:
        pg = TemporaryPostgres()
    except StoreError as exc:
        return PgSkipped(skipped=str(exc))
    load_before = list(os.getloadavg())
    with pg:
        settings, results = await bench_postgres(pg.url, quick, pool_msgs)
        loads = await bench_pg_load(pg.url, quick, pool_msgs)
    return PgSection(
        server=settings,
        durability=(
            f"synchronous_commit={settings['synchronous_commit']} (the PostgreSQL default), "
            f"fsync={settings['fsync']}, wal_sync_method={settings['wal_sync_method']}: "
            "every commit returned after its WAL was flushed to disk"
        ),
        client={"psycopg": psycopg.__version__, "libpq": psycopg.pq.version(), "impl": psycopg.pq.__impl__},
        pool_size=POOL_SIZE,
        target_ratio=TARGET_PG_RATIO,
        variants=VARIANTS,
        results=results,
        mode="quick" if quick else "full",
        load_average_before_after=[load_before[0], os.getloadavg()[0]],
        seconds=time.perf_counter() - started,
        load_history=loads,
    )
