"""Store benchmarks: commit throughput against raw sqlite3 and raw psycopg, history load, bytes per message.

Run ``python -m benchmarks.store [--quick] [--only sqlite|postgres]``. It prints a table and writes
``benchmarks/results/store.json`` with the machine, the durability of every figure, and the targets
the figures are read against. Nothing here asserts a speed (DESIGN.md, rule 8): a slow figure is a
finding, not a failure. ``--only`` measures one backend and replaces only its part of an existing
report. The PostgreSQL part lives in ``benchmarks.store_pg`` (see its docstring), the workload both
share in ``benchmarks._common``, and the table rendering in ``benchmarks._report``.

Why each SQLite part is shaped the way it is:

- Commits are driven the way an engine drives them: one ``MessageHistory`` kept in memory, one
  ``append`` per step, the run and thread pointers moved to the new head, and ``commit_session``
  with the previous head as base. So the figure is what a session step pays, not a synthetic bulk
  insert.
- Next to it runs a raw ``sqlite3`` loop with the same schema (created by the store's own
  ``ensure_schema``), the same statements and the same pragmas, one ``BEGIN IMMEDIATE``/``COMMIT``
  per iteration, ids and JSON prepared up front. It is the floor: whatever repertory adds on top is
  the ratio. A second raw loop adds the store's two guard reads (thread head, run status), which
  separates the cost of the compare-and-set from the cost of Python around the statements.
- The repertory and raw loops alternate round by round, so a noisy neighbour on a 2-core machine
  hits both sides instead of skewing the ratio.
- Disk growth is read after ``PRAGMA wal_checkpoint(TRUNCATE)``, so the WAL does not hide or inflate
  what a message really costs on disk; the WAL bytes written in between are reported too, because
  SQLite writes whole pages per commit and that, not the row size, is the I/O a step causes.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import pstats
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._common import (
    MESSAGE_BYTES,
    RESULTS,
    TARGET_COMMITS_PER_S,
    TARGET_DISK_RATIO,
    TARGET_LOAD_MS_AT_10K,
    TARGET_RATIO,
    EngineSession,
    make_message,
    timed,
)
from benchmarks._report import machine_info, render
from repertory.core.history import MessageHistory
from repertory.core.ids import new_id, now_ms
from repertory.core.messages import ModelMessage
from repertory.core.state import RunState
from repertory.storage.commit_plan import plan_commit
from repertory.storage.sqlite.schema import ensure_schema

# Private names on purpose: the raw loop must run the store's own statements and row shape, and an
# import that breaks when they are renamed is better than a raw loop that silently drifts from them.
from repertory.storage.sqlite.store import (
    _LINEAGE_SQL,
    _UPSERT_RUN,
    _UPSERT_THREAD,
    Durability,
    SqliteSessionStore,
    _run_row,
)

__all__ = ["main", "run_suite"]


# These two live inline in SqliteSessionStore.commit_session, so they are repeated here; if the store
# changes them, these must follow, or the ratio stops meaning anything.
_INSERT_ENTRY = "INSERT OR IGNORE INTO history_entries (id, created_at, message) VALUES (?, ?, ?)"
_INSERT_REVISION = (
    "INSERT OR IGNORE INTO history_revisions (id, parent_id, entry_id, depth, created_at) VALUES (?, ?, ?, ?, ?)"
)


# -- raw sqlite3 ---------------------------------------------------------------------------------


def _connect_raw(path: Path, durability: Durability) -> sqlite3.Connection:
    """A plain connection with the store's pragmas and schema: the raw loop's fair starting point."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 10000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA journal_size_limit = 67108864")
    conn.execute(f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}")
    ensure_schema(conn, str(path))
    return conn


@dataclass
class RawWriter:
    """The raw loop's state: one run and thread, rows built before the clock starts."""

    conn: sqlite3.Connection
    guard_reads: bool
    run: RunState = field(default_factory=lambda: EngineSession.new().run)
    head: str | None = None
    depth: int = 0

    def prepare(self, messages: Sequence[ModelMessage]) -> list[tuple[Any, ...]]:
        """Ids, timestamps and JSON for ``len(messages)`` commits, so the timed loop is statements only."""
        rows: list[tuple[Any, ...]] = []
        parent, depth, at = self.head, self.depth, now_ms()
        run_row = _run_row(self.run)  # the store's own run row (same columns, same JSON size)
        thread_id = self.run.thread_id
        for message in messages:
            entry_id, revision_id = new_id(), new_id()
            depth += 1
            rows.append(
                (
                    parent,
                    (entry_id, at, message.model_dump_json()),
                    (revision_id, parent, entry_id, depth, at),
                    run_row,
                    (thread_id, revision_id, at, at),
                )
            )
            parent = revision_id
        self.head, self.depth = parent, depth
        return rows

    def commit_all(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """One ``BEGIN IMMEDIATE``/``COMMIT`` per row, as the store does per ``commit_session``."""
        conn, run_id, thread_id = self.conn, self.run.run_id, self.run.thread_id
        for base, entry, revision, run, thread in rows:
            conn.execute("BEGIN IMMEDIATE")
            if self.guard_reads:
                head = conn.execute("SELECT head FROM threads WHERE thread_id = ?", (thread_id,)).fetchone()
                conn.execute("SELECT status, token FROM runs WHERE run_id = ?", (run_id,)).fetchone()
                if head is not None and head[0] != base:
                    raise RuntimeError("raw loop: thread head moved")
            conn.execute(_INSERT_ENTRY, entry)
            conn.execute(_INSERT_REVISION, revision)
            conn.execute(_UPSERT_RUN, run)
            conn.execute(_UPSERT_THREAD, thread)
            conn.execute("COMMIT")


# -- 1. commit throughput ---------------------------------------------------------------------------


@dataclass
class CommitResult:
    """Commits per second for repertory and the raw floor, one durability.

    Rates are medians over rounds, with the best round beside them (on a shared machine the best
    round is the least disturbed one). The ratio is the median of per-round ratios: a round of
    repertory and the raw round right after it share whatever load the machine had then.
    """

    durability: Durability
    commits_per_round: int
    rounds: int
    repertory_commits_per_s: float
    raw_commits_per_s: float
    raw_with_guard_reads_commits_per_s: float
    repertory_best_commits_per_s: float
    raw_best_commits_per_s: float
    ratio: float
    ratio_vs_raw_with_guard_reads: float
    repertory_us_per_commit: float
    raw_us_per_commit: float
    raw_with_guard_reads_us_per_commit: float
    overhead_us_per_commit: float
    repertory_rounds: list[float]
    raw_rounds: list[float]
    raw_with_guard_reads_rounds: list[float]
    meets_throughput_target: bool
    meets_ratio_target: bool


async def bench_commits(
    workdir: Path, durability: Durability, commits: int, rounds: int, pool: Sequence[ModelMessage]
) -> CommitResult:
    """Engine-style ``commit_session`` against the raw loop, alternating round by round."""
    store = await SqliteSessionStore.open(workdir / f"commits-{durability}.db", durability=durability)
    raw = RawWriter(_connect_raw(workdir / f"raw-{durability}.db", durability), guard_reads=False)
    guarded = RawWriter(_connect_raw(workdir / f"raw-guarded-{durability}.db", durability), guard_reads=True)
    batch = [pool[i % len(pool)] for i in range(commits)]

    async def repertory_round() -> None:
        # A new session each round, as a host starts sessions: memory does not pile up round on round.
        session = EngineSession.new()
        for message in batch:
            await session.step(store, message)

    def raw_round(writer: RawWriter) -> Callable[[], Awaitable[None]]:
        rows = writer.prepare(batch)

        async def go() -> None:
            writer.commit_all(rows)

        return go

    try:
        # Warm-up: statement caches, the first pages of every table, the thread row's creation.
        warm = EngineSession.new()
        for message in batch[: min(200, commits)]:
            await warm.step(store, message)
        for writer in (raw, guarded):
            writer.commit_all(writer.prepare(batch[: min(200, commits)]))
        rep_s: list[float] = []
        raw_s: list[float] = []
        guarded_s: list[float] = []
        for _ in range(rounds):
            rep_s.append(await timed(repertory_round))
            raw_s.append(await timed(raw_round(raw)))
            guarded_s.append(await timed(raw_round(guarded)))
    finally:
        await store.close()
        raw.conn.close()
        guarded.conn.close()

    def rates(seconds: list[float]) -> list[float]:
        return [commits / s for s in seconds]

    rep, base, guard = (statistics.median(rates(s)) for s in (rep_s, raw_s, guarded_s))
    # Rate ratio per round is raw seconds over repertory seconds.
    ratio = statistics.median(r / t for t, r in zip(rep_s, raw_s, strict=True))
    ratio_guarded = statistics.median(g / t for t, g in zip(rep_s, guarded_s, strict=True))
    return CommitResult(
        durability=durability,
        commits_per_round=commits,
        rounds=rounds,
        repertory_commits_per_s=rep,
        raw_commits_per_s=base,
        raw_with_guard_reads_commits_per_s=guard,
        repertory_best_commits_per_s=max(rates(rep_s)),
        raw_best_commits_per_s=max(rates(raw_s)),
        ratio=ratio,
        ratio_vs_raw_with_guard_reads=ratio_guarded,
        repertory_us_per_commit=1e6 / rep,
        raw_us_per_commit=1e6 / base,
        raw_with_guard_reads_us_per_commit=1e6 / guard,
        overhead_us_per_commit=1e6 / rep - 1e6 / base,
        repertory_rounds=rates(rep_s),
        raw_rounds=rates(raw_s),
        raw_with_guard_reads_rounds=rates(guarded_s),
        meets_throughput_target=rep >= TARGET_COMMITS_PER_S,
        meets_ratio_target=ratio >= TARGET_RATIO,
    )


# -- 2. load_history --------------------------------------------------------------------------------


@dataclass
class LoadResult:
    """``load_history`` at one depth: whole call, the SQL alone, and the whole call with the GC paused.

    Decoding a deep history makes hundreds of thousands of objects, which triggers full collections;
    the GC-off figure shows how much of the time is the collector rather than the decoding itself.
    """

    depth: int
    runs: int
    median_ms: float
    min_ms: float
    query_median_ms: float
    decode_median_ms: float
    gc_off_median_ms: float


async def _median_ms(runs: int, call: Callable[[], Awaitable[object]], gc_off: bool = False) -> tuple[float, float]:
    await call()  # warm the page cache and the reader pool; the first call is not the steady state
    samples: list[float] = []
    if gc_off:
        gc.disable()
    try:
        for _ in range(runs):
            start = time.perf_counter()
            await call()
            samples.append((time.perf_counter() - start) * 1e3)
    finally:
        gc.enable()
    return statistics.median(samples), min(samples)


async def bench_load(workdir: Path, depths: Sequence[int], runs: int, pool: Sequence[ModelMessage]) -> list[LoadResult]:
    """One lineage as deep as the deepest depth; each depth loads the revision at that depth.

    The seeding session's in-memory history is dropped before timing, so the collector walks only
    what ``load_history`` itself allocates, not the benchmark's own copy of the conversation.
    """
    store = await SqliteSessionStore.open(workdir / "load.db")
    session = EngineSession.new()
    try:
        await session.seed(store, [pool[i % len(pool)] for i in range(max(depths))])
        revision_ids = [r.id for r in session.history.revisions]
        del session
        gc.collect()
        out: list[LoadResult] = []
        for depth in depths:
            revision_id = revision_ids[depth - 1]
            loaded = await store.load_history(revision_id)
            if loaded is None or len(loaded.messages) != depth:
                raise RuntimeError(f"load_history at depth {depth} returned the wrong lineage")

            async def load(rid: str = revision_id) -> object:
                return await store.load_history(rid)

            # The store's own query on its own reader pool, through its public read().
            async def query(rid: str = revision_id) -> object:
                return await store.read("bench", lambda c: c.execute(_LINEAGE_SQL, (rid,)).fetchall())

            median, fastest = await _median_ms(runs, load)
            query_median, _ = await _median_ms(runs, query)
            gc_off, _ = await _median_ms(runs, load, gc_off=True)
            out.append(LoadResult(depth, runs, median, fastest, query_median, median - query_median, gc_off))
        return out
    finally:
        await store.close()


# -- 3. bytes on disk -------------------------------------------------------------------------------


@dataclass
class DiskResult:
    """Disk growth and WAL bytes written per appended message, at one starting depth."""

    depth: int
    appends: int
    message_json_bytes: int
    page_size: int
    db_bytes_before: int
    db_bytes_after: int
    bytes_per_message: float
    ratio_to_message_json: float
    wal_bytes_per_commit: float
    wal_pages_per_commit: float
    meets_target: bool


_WAL_FRAME_HEADER = 24


def _size(path: str) -> int:
    return os.path.getsize(path) if os.path.exists(path) else 0


def _on_disk(store: SqliteSessionStore) -> int:
    """Main file plus WAL after a truncating checkpoint (the -shm index is memory, not data)."""
    busy, _, _ = store._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    if busy:
        raise RuntimeError("checkpoint was blocked; disk figures would be wrong")
    return _size(store.path) + _size(store.path + "-wal")


async def bench_disk(workdir: Path, depth: int, appends: int, pool: Sequence[ModelMessage]) -> DiskResult:
    """Seed a lineage to ``depth``, then append ``appends`` messages one commit each and weigh the file."""
    store = await SqliteSessionStore.open(workdir / f"disk-{depth}.db")
    session = EngineSession.new()
    writer = store._writer
    try:
        await session.seed(store, [pool[i % len(pool)] for i in range(depth)])
        # No automatic checkpoint while we count: the WAL's size then is every byte the commits wrote.
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        before = _on_disk(store)
        for i in range(appends):
            await session.step(store, pool[i % len(pool)])
        wal_written = _size(store.path + "-wal")
        after = _on_disk(store)
        writer.execute("PRAGMA wal_autocheckpoint = 1000")
        page_size = int(writer.execute("PRAGMA page_size").fetchone()[0])
    finally:
        await store.close()
    per_message = (after - before) / appends
    ratio = per_message / MESSAGE_BYTES
    return DiskResult(
        depth=depth,
        appends=appends,
        message_json_bytes=MESSAGE_BYTES,
        page_size=page_size,
        db_bytes_before=before,
        db_bytes_after=after,
        bytes_per_message=per_message,
        ratio_to_message_json=ratio,
        wal_bytes_per_commit=wal_written / appends,
        wal_pages_per_commit=wal_written / appends / (page_size + _WAL_FRAME_HEADER),
        meets_target=ratio <= TARGET_DISK_RATIO,
    )


# -- where the time goes ----------------------------------------------------------------------------


def _per_call_us(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def component_costs(calls: int, message: ModelMessage) -> dict[str, float]:
    """Microseconds per call of the Python pieces of one commit, timed alone (no profiler overhead)."""
    session = EngineSession.new()
    session.history.extend([message, message])
    base = session.history.revisions[0].id
    session._point_at(session.history.revision_id)
    run, thread, history = session.run, session.thread, session.history
    scratch = MessageHistory()

    def set_pointers() -> None:
        session._point_at(history.revision_id)

    def serialise_rows() -> None:
        # What commit_session builds before BEGIN: the run row's JSON and each new entry's JSON.
        run.model_dump_json()
        message.model_dump_json()

    return {
        "new_id": _per_call_us(new_id, calls),
        "history_append": _per_call_us(lambda: scratch.append(message), calls),
        "set_pointers_and_timestamps": _per_call_us(set_pointers, calls),
        "plan_commit_one_revision": _per_call_us(
            lambda: plan_commit(run, thread, history, base, lambda _: False), calls
        ),
        "run_model_dump_json": _per_call_us(run.model_dump_json, calls),
        "message_model_dump_json": _per_call_us(message.model_dump_json, calls),
        "serialise_rows_total": _per_call_us(serialise_rows, calls),
    }


_Where = tuple[str, str]  # (end of the file name, or "~" for built-ins; function name)

# label -> functions whose *cumulative* time is the group. These never call one another on the commit
# path, so the groups add up; what is left over is asyncio, context managers and glue.
_PROFILE_GROUPS: dict[str, tuple[_Where, ...]] = {
    "sqlite statements (execute/executemany/fetchone)": (
        ("~", "<method 'execute' of 'sqlite3.Connection' objects>"),
        ("~", "<method 'executemany' of 'sqlite3.Connection' objects>"),
        ("~", "<method 'fetchone' of 'sqlite3.Cursor' objects>"),
    ),
    "MessageHistory.append (ids, records)": (("repertory/runtime/history.py", "append"),),
    "plan_commit (pointer checks, walk back)": (("repertory/storage/_commit.py", "plan_commit"),),
    "model_dump_json (run row + entry JSON)": (("pydantic/main.py", "model_dump_json"),),
    "engine pointer updates (benchmark's _point_at)": (("benchmarks/_common.py", "_point_at"),),
}
# Cuts across the groups above: pydantic private attributes (MessageHistory's indexes) are read
# through BaseModel.__getattr__, a slow path, on every lookup.
_PRIVATE_ATTR_READS: _Where = ("pydantic/main.py", "__getattr__")


def _matches(key: tuple[str, int, str], where: _Where) -> bool:
    filename, _, name = key
    suffix, wanted = where
    return name == wanted and (filename == "~" if suffix == "~" else filename.endswith(suffix))


def _label(key: tuple[str, int, str]) -> str:
    filename, line, name = key
    if filename == "~":
        return name
    return f"{Path(filename).name}:{line}({name})"


async def profile_commits(workdir: Path, commits: int, pool: Sequence[ModelMessage]) -> dict[str, Any]:
    """cProfile over engine-style commits: top functions by own time, and time by group.

    cProfile taxes every Python call, so Python-heavy parts look bigger than they are; the groups are
    read as shares of the profiled loop, and the unprofiled component costs give the true sizes.
    """
    store = await SqliteSessionStore.open(workdir / "profile.db")
    session = EngineSession.new()
    batch = [pool[i % len(pool)] for i in range(commits)]
    try:
        for message in batch[:200]:
            await session.step(store, message)
        profiler = cProfile.Profile()
        gc.collect()
        profiler.enable()
        for message in batch:
            await session.step(store, message)
        profiler.disable()
    finally:
        await store.close()
    stats = pstats.Stats(profiler)
    raw_stats: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for _, _, tt, _, _ in raw_stats.values())
    top = sorted(raw_stats.items(), key=lambda kv: kv[1][2], reverse=True)[:15]

    def cumulative(wheres: Sequence[_Where]) -> float:
        return sum(ct for key, (_, _, _, ct, _) in raw_stats.items() if any(_matches(key, w) for w in wheres))

    groups = {label: cumulative(wheres) for label, wheres in _PROFILE_GROUPS.items()}
    groups["everything else (asyncio, context managers, glue)"] = max(total - sum(groups.values()), 0.0)
    private_reads = cumulative([_PRIVATE_ATTR_READS])
    private_calls = sum(nc for key, (_, nc, _, _, _) in raw_stats.items() if _matches(key, _PRIVATE_ATTR_READS))
    ranked = sorted(groups.items(), key=lambda kv: kv[1], reverse=True)
    summary = (
        "; ".join(f"{label.split(' (')[0]} {s / total:.0%}" for label, s in ranked)
        + f"; across them, pydantic private-attribute reads {private_reads / total:.0%}"
        f" ({private_calls / commits:.0f} per commit)"
    )
    return {
        "commits": commits,
        "durability": "normal",
        "profiled_total_s": total,
        "profiled_us_per_commit": total / commits * 1e6,
        "summary": summary,
        "top_by_tottime": [
            {
                "function": _label(key),
                "ncalls": nc,
                "tottime_s": tt,
                "cumtime_s": ct,
                "tottime_us_per_commit": tt / commits * 1e6,
            }
            for key, (_, nc, tt, ct, _) in top
        ],
        "groups": {
            label: {"seconds": s, "share": s / total, "us_per_commit": s / commits * 1e6} for label, s in groups.items()
        },
        "pydantic_private_attr_reads": {
            "calls_per_commit": private_calls / commits,
            "us_per_commit": private_reads / commits * 1e6,
            "share": private_reads / total,
        },
    }


async def run_sqlite(quick: bool, pool: Sequence[ModelMessage], smoke: bool = False) -> dict[str, Any]:
    """Every SQLite measurement, in one temporary folder on the same disk as the system's temp dir.

    ``smoke`` (the suite's ``--quick``) shrinks every size until the whole part takes a second or
    two: it proves the code runs, its figures mean nothing.
    """
    # Many short rounds rather than a few long ones: a burst of load from elsewhere spoils one round.
    commits, rounds = (100, 1) if smoke else (250, 2) if quick else (1_000, 10)
    load_runs = 2 if smoke else 5 if quick else 15
    appends = 50 if smoke else 200
    depths = (10, 100, 1_000) if smoke else (10, 1_000, 10_000)
    with tempfile.TemporaryDirectory(prefix="repertory-bench-") as tmp:
        workdir = Path(tmp)
        throughput = [
            await bench_commits(workdir, durability, commits, rounds, pool)
            for durability in (("normal",) if smoke else ("normal", "full"))  # an fsync each: slow on a busy disk
        ]
        loads = await bench_load(workdir, depths, load_runs, pool)
        disks = [await bench_disk(workdir, depth, appends, pool) for depth in (depths[0], depths[-1])]
        profile = await profile_commits(workdir, 100 if smoke else 500 if quick else 2_000, pool)
    deepest = loads[-1]
    return {
        "commit_throughput": [asdict(r) for r in throughput],
        "load_history": {
            "target_ms_at_10000": TARGET_LOAD_MS_AT_10K,
            "meets_target": deepest.median_ms <= TARGET_LOAD_MS_AT_10K,
            "results": [asdict(r) for r in loads],
        },
        "bytes_on_disk": {
            "target_max_ratio": TARGET_DISK_RATIO,
            "flat": abs(disks[-1].bytes_per_message - disks[0].bytes_per_message) <= 0.1 * disks[0].bytes_per_message,
            "results": [asdict(d) for d in disks],
        },
        "component_costs_us": component_costs(200 if smoke else 2_000 if quick else 20_000, pool[0]),
        "profile": profile,
    }


_SQLITE_DURABILITY = {
    "commit_throughput": ["normal", "full"],
    "load_history": "normal",
    "bytes_on_disk": "normal",
    "profile": "normal",
}


async def run(quick: bool, only: str | None = None, smoke: bool = False) -> dict[str, Any]:
    """The report: SQLite, then PostgreSQL (``only`` names one of them to measure just that one)."""
    pool = [make_message(i) for i in range(16)]
    machine = machine_info()
    report: dict[str, Any] = {
        "benchmark": "store",
        "mode": "smoke" if smoke else "quick" if quick else "full",
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine,
        "workdir": tempfile.gettempdir(),
        "durability": {},
        "message_json_bytes": MESSAGE_BYTES,
        "run_state_json_bytes": len(EngineSession.new().run.model_dump_json()),
    }
    if only in (None, "sqlite"):
        report["durability"].update(_SQLITE_DURABILITY)
        report.update(await run_sqlite(quick, pool, smoke))
    if only in (None, "postgres"):
        # Imported here: the PostgreSQL loops use that store's private statements, and a change
        # there must not stop the SQLite figures (or the suite's SQLite-only quick run).
        from benchmarks.store_pg import run_postgres

        section = await run_postgres(quick, pool)
        report["durability"]["postgres"] = section.get("durability", "not measured")
        report["postgres"] = section
    # Other work on the machine is the main source of noise; say how busy it was.
    machine["load_average_after"] = list(os.getloadavg())
    return report


def _merge(previous: dict[str, Any], fresh: dict[str, Any], only: str) -> dict[str, Any]:
    """``fresh`` (one backend) written over the matching part of ``previous`` (both backends)."""
    if only == "postgres":
        merged = dict(previous)
        merged["postgres"] = fresh["postgres"]
        merged["durability"] = {**previous.get("durability", {}), "postgres": fresh["durability"]["postgres"]}
        merged["postgres_measured_on"] = {k: fresh[k] for k in ("mode", "created_at", "machine")}
        return merged
    merged = dict(fresh)
    if "postgres" in previous:
        merged["postgres"] = previous["postgres"]
        merged["durability"]["postgres"] = previous.get("durability", {}).get("postgres")
        merged["postgres_measured_on"] = previous.get(
            "postgres_measured_on", {k: previous.get(k) for k in ("mode", "created_at", "machine")}
        )
    return merged


def run_suite(quick: bool, out_dir: Path = RESULTS.parent, peers: bool = True) -> dict[str, Any]:
    """The suite's entry (``python -m benchmarks``): measure, print, write ``out_dir/store.json``.

    ``quick`` is the suite's smoke size: SQLite only (starting a PostgreSQL server takes seconds).
    """
    report = asyncio.run(run(quick, "sqlite" if quick else None, smoke=quick))
    print(render(report))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "store.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def main(argv: Sequence[str] | None = None) -> None:
    """Parse arguments, measure, print the table and write the JSON report."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.store", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer commits and runs (a smoke run, noisier)")
    parser.add_argument(
        "--only", choices=("sqlite", "postgres"), help="measure one backend; the other's figures in --out are kept"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"JSON report path (default: {RESULTS})")
    args = parser.parse_args(argv)
    report = asyncio.run(run(args.quick, args.only))
    print(render(report))
    if args.only and args.out.exists():
        report = _merge(json.loads(args.out.read_text()), report, args.only)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, args.out)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
