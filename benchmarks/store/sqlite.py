"""The SQLite part of the store benchmark: commit throughput against the raw floor, history loads, disk.

- Commits are engine-style (``benchmarks.harness.commits.EngineSession``); the repertory and raw
  loops alternate round by round, so a noisy neighbour on a 2-core machine hits both sides instead
  of skewing the ratio.
- Disk growth is read after ``PRAGMA wal_checkpoint(TRUNCATE)``, so the WAL does not hide or inflate
  what a message really costs on disk; the WAL bytes written in between are reported too, because
  SQLite writes whole pages per commit and that, not the row size, is the I/O a step causes.
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from benchmarks.harness.commits import MESSAGE_BYTES, EngineSession
from benchmarks.harness.timing import timed
from benchmarks.store.loads import LoadableStore, measure_loads
from benchmarks.store.raw import RawWriter, connect_raw
from benchmarks.store.report import (
    TARGET_COMMITS_PER_S,
    TARGET_DISK_RATIO,
    TARGET_RATIO,
    CommitResult,
    DiskResult,
    LoadResult,
)
from repertory.core.messages import ModelMessage
from repertory.storage.sqlite.connection import connect
from repertory.storage.sqlite.store import LINEAGE_SQL, Durability, SqliteSessionStore

__all__ = ["bench_commits", "bench_disk", "bench_load"]

WAL_FRAME_HEADER = 24


async def bench_commits(
    workdir: Path, durability: Durability, commits: int, rounds: int, pool: Sequence[ModelMessage]
) -> CommitResult:
    """Engine-style ``commit_session`` against the raw loop, alternating round by round."""
    store = await SqliteSessionStore.open(workdir / f"commits-{durability}.db", durability=durability)
    raw = RawWriter(connect_raw(workdir / f"raw-{durability}.db", durability), guard_reads=False)
    guarded = RawWriter(connect_raw(workdir / f"raw-guarded-{durability}.db", durability), guard_reads=True)
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


async def bench_load(workdir: Path, depths: Sequence[int], runs: int, pool: Sequence[ModelMessage]) -> list[LoadResult]:
    """One lineage as deep as the deepest depth; each depth loads the revision at that depth.

    Timed warm, cold and until used (``benchmarks.store.loads``). The seeding session's in-memory
    history is dropped before timing, so the collector walks only what ``load_history`` itself
    allocates, not the benchmark's own copy of the conversation. The SQL alone is the store's own
    query (``LINEAGE_SQL``) on a reader connection in a worker thread, which is how
    ``load_history`` runs it when it reads rows.
    """
    store = await SqliteSessionStore.open(workdir / "load.db")
    reader = connect(store.path, uri=False, durability="normal", wal=True)
    session = EngineSession.new()
    try:
        await session.seed(store, [pool[i % len(pool)] for i in range(max(depths))])
        revision_ids = [r.id for r in session.history.revisions]
        del session
        gc.collect()

        async def query(rid: str) -> object:
            return await asyncio.to_thread(lambda: reader.execute(LINEAGE_SQL, (rid,)).fetchall())

        return await measure_loads(
            LoadableStore(store.load_history, store.history_cache), revision_ids, depths, runs, query
        )
    finally:
        reader.close()
        await store.close()


def _size(path: str) -> int:
    return os.path.getsize(path) if os.path.exists(path) else 0


def _on_disk(store: SqliteSessionStore) -> int:
    """Main file plus WAL after a truncating checkpoint (the -shm index is memory, not data)."""
    busy, _, _ = store.connections[0].execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    if busy:
        raise RuntimeError("checkpoint was blocked; disk figures would be wrong")
    return _size(store.path) + _size(store.path + "-wal")


async def bench_disk(workdir: Path, depth: int, appends: int, pool: Sequence[ModelMessage]) -> DiskResult:
    """Seed a lineage to ``depth``, then append ``appends`` messages one commit each and weigh the file."""
    store = await SqliteSessionStore.open(workdir / f"disk-{depth}.db")
    session = EngineSession.new()
    writer = store.connections[0]  # the writer: its pragmas are the commits' own
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
        wal_pages_per_commit=wal_written / appends / (page_size + WAL_FRAME_HEADER),
        meets_target=ratio <= TARGET_DISK_RATIO,
    )
