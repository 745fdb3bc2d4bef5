"""The memory workload: fill one resource, then time cold load, recall, the search alone, recall after append."""

from __future__ import annotations

import asyncio
import gc
import os
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from benchmarks.harness.report import Clock, Mode, finish
from benchmarks.memory.report import Latency, MemoryReport, SizeResult, WideSearch
from repertory.core.messages import ModelMessage
from repertory.core.store import SessionStore
from repertory.memory import HashingEmbedder, StoreMemory
from repertory.storage import InMemorySessionStore, SqliteSessionStore
from repertory.testing.pg_temp import TemporaryPostgres

__all__ = ["QUICK_SIZES", "SIZES", "measure"]

SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (1_000, 10_000)
THREAD_MESSAGES = 50
VOCABULARY = 3_000


def _vocabulary() -> list[str]:
    rng = random.Random(11)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 9))))
    return sorted(words)


WORDS = _vocabulary()
WEIGHTS = [1.0 / (rank + 1) for rank in range(VOCABULARY)]  # Zipf-like: a few words are everywhere


def sentence(rng: random.Random, lo: int = 12, hi: int = 40) -> str:
    """A message of ``lo`` to ``hi`` words of the vocabulary."""
    return " ".join(rng.choices(WORDS, WEIGHTS, k=rng.randint(lo, hi)))


def unit_rows(vectors: NDArray[np.float32]) -> NDArray[np.float32]:
    """Rows scaled to unit length, as the index expects its queries and rows (zero rows stay zero)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: NDArray[np.float32] = (vectors / norms).astype(np.float32, copy=False)
    return out


async def fill(memory: StoreMemory, n: int) -> float:
    """Append ``n`` messages thread by thread and flush; returns seconds taken."""
    rng = random.Random(n)
    start = time.perf_counter()
    for t in range(0, n, THREAD_MESSAGES):
        batch = [
            ModelMessage.user(sentence(rng)) if i % 2 == 0 else ModelMessage.assistant(sentence(rng))
            for i in range(min(THREAD_MESSAGES, n - t))
        ]
        await memory.append(thread_id=f"thread-{t // THREAD_MESSAGES}", messages=batch)
        if t % 5_000 == 0:
            await memory.flush()  # keeps the queue short, as a live system's would be
    await memory.flush()
    return time.perf_counter() - start


async def timed(fn: Callable[[int], Awaitable[Any]], rounds: int) -> Latency:
    """p50 / p95 / max of ``rounds`` calls of ``fn(i)`` after 5 warm-up calls (``fn(-1)``...)."""
    for i in range(5):
        await fn(-1 - i)
    samples = []
    for i in range(rounds):
        start = time.perf_counter()
        await fn(i)
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return Latency(
        p50_ms=round(statistics.median(samples), 3),
        p95_ms=round(samples[min(len(samples) - 1, int(0.95 * len(samples)))], 3),
        max_ms=round(samples[-1], 3),
        rounds=rounds,
    )


async def one_size(backend: str, store: SessionStore, n: int, rounds: int, pg_url: str | None) -> SizeResult:
    """Fill one resource with ``n`` messages, then time every figure on a fresh ``StoreMemory``."""
    resource = f"user-{n}"
    writer = StoreMemory(store, resource=resource)
    ingest_s = await fill(writer, n)
    await writer.set_working_memory({"name": "Ada", "prefers": "window seats", "open_tasks": ["renew passport"]})
    await writer.close()
    if pg_url is not None:
        # Steady state: after a bulk load autovacuum would otherwise analyse the table during the
        # timed calls (measured: recall p50 26 ms while it ran, 12 ms after).
        import psycopg

        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("VACUUM (ANALYZE) repertory.memory_messages")
    gc.collect()

    memory = StoreMemory(store, resource=resource)  # a fresh process's view: cold cache
    start = time.perf_counter()
    loaded = await memory.load_index()
    cold_s = time.perf_counter() - start
    rng = random.Random(99)
    queries = [sentence(rng, 10, 10) for _ in range(rounds + 10)]

    async def recall(i: int) -> None:
        got = await memory.recall(thread_id="bench-new-thread", query=[ModelMessage.user(queries[i])])
        assert len(got.messages) == 10 and got.working_memory is not None

    index = memory.index
    vectors = [unit_rows(np.atleast_2d(await memory.embedder.embed([q])))[0] for q in queries]
    dims = int(vectors[0].shape[0]) if index.size else 0

    async def search(i: int) -> None:
        await index.search(vectors[i], 3, memory.min_score, exclude_thread="bench-new-thread")

    async def recall_after_append(i: int) -> None:
        await memory.append(thread_id="bench-other", messages=[ModelMessage.user(queries[i])])
        await memory.recall(thread_id="bench-new-thread", query=[ModelMessage.user(queries[i])])

    result = SizeResult(
        backend=backend,
        messages=n,
        indexed=loaded,
        dims=dims,
        matrix_mb=round(index.size * 4 * dims / 1e6, 1),
        ingest_messages_per_s=round(n / ingest_s),
        cold_load_s=round(cold_s, 3),
        recall=await timed(recall, rounds),
        search=await timed(search, rounds),
        recall_after_append=await timed(recall_after_append, max(10, rounds // 4)),
    )
    await memory.close()
    return result


async def wide_search(n: int, dims: int, rounds: int) -> WideSearch:
    """Search alone over ``n`` random unit vectors of ``dims`` dimensions (a real embedder's size)."""
    rng = np.random.default_rng(5)
    index = StoreMemory(InMemorySessionStore(), resource="wide").index
    for start in range(0, n, 10_000):
        rows = unit_rows(rng.normal(size=(min(10_000, n - start), dims)).astype(np.float32))
        index.add(list(range(start + 1, start + rows.shape[0] + 1)), [f"t{start}"] * rows.shape[0], rows.tobytes())
    queries = unit_rows(rng.normal(size=(rounds + 10, dims)).astype(np.float32))

    async def search(i: int) -> None:
        await index.search(queries[i], 3, 0.25, exclude_thread="t0")

    return WideSearch(messages=n, dims=dims, matrix_mb=round(n * dims * 4 / 1e6, 1), search=await timed(search, rounds))


async def _run(
    backends: Sequence[str], sizes: Sequence[int], rounds: int, wide: bool
) -> tuple[list[SizeResult], list[WideSearch]]:
    results: list[SizeResult] = []
    pg: TemporaryPostgres | None = None
    with tempfile.TemporaryDirectory() as folder:
        try:
            for backend in backends:
                for n in sizes:
                    store: SessionStore
                    pg_url: str | None = None
                    if backend == "memory":
                        store = InMemorySessionStore()
                    elif backend == "sqlite":
                        store = await SqliteSessionStore.open(os.path.join(folder, f"memory-{n}.db"))
                    else:
                        from repertory.storage.postgres.store import PostgresSessionStore

                        if pg is None:
                            pg = TemporaryPostgres().start()
                        pg_url = pg.url
                        store = await PostgresSessionStore.open(pg_url)
                    print(f"  {backend:8} {n:>7,} messages ...", flush=True)
                    results.append(await one_size(backend, store, n, rounds, pg_url))
                    await store.close()
        finally:
            if pg is not None:
                pg.cleanup()
    wide_results = [await wide_search(n, 1536, rounds) for n in sizes] if wide else []
    return results, wide_results


def measure(backends: Sequence[str], sizes: Sequence[int], rounds: int, *, wide: bool, mode: Mode) -> MemoryReport:
    """Every backend at every size (and the 1,536-dim search when ``wide``); the report with its summary."""
    clock = Clock.start("memory", mode)
    results, wide_results = asyncio.run(_run(backends, sizes, rounds, wide))
    report = MemoryReport(
        **clock.frame(),
        embedder=HashingEmbedder().name,
        durability="SQLite WAL + synchronous=NORMAL; PostgreSQL synchronous_commit=on (TemporaryPostgres)",
        results=results,
        wide_search_1536=wide_results,
        quick=mode != "full",
    )
    return finish(report, clock)
