"""Memory: ``StoreMemory.recall`` latency at 1,000 / 10,000 / 100,000 messages of one resource.

The target read against: a recall stays under 50 ms at 100,000 messages of one resource. Per
backend (in-memory, a SQLite file, a throwaway PostgreSQL) and size N: one resource whose N
messages are spread over threads of 50 messages, each message 12-40 words drawn (Zipf-like,
seeded) from a 3,000-word vocabulary, written through the public path (``StoreMemory.append`` +
``flush``: embedding with the default ``HashingEmbedder`` (512 dims) and one transaction per
batch of 64), so "ingest" is messages/s of embedding + storing. Then, on a new ``StoreMemory``
(a new process's view):

- cold load: ``load_index()``, reading every vector of the resource into the matrix (once per
  process and resource);
- recall: ``recall()`` of a fresh thread with a 10-word query, warm index, defaults (last 10
  messages of other threads, top 3 semantic hits, working memory): flush check, the recent-messages
  query, embedding the query, the incremental index refresh (an indexed range read that finds
  nothing), the exact search over all N vectors, loading the hits' texts, the working-memory read;
- search: the vector search alone (``StoreMemory.index.search``, numpy), the part that grows with N;
- recall after append: one message appended first, so the refresh reads one new row.

On PostgreSQL the table is ``VACUUM (ANALYZE)``d after the load, as autovacuum would leave it;
otherwise autovacuum analyses it during the timed calls and the figures measure that instead.
Every latency keeps its R timed calls (after 5 warm-up calls). A second matrix shape is timed,
search only: 1,536 dimensions (OpenAI's text-embedding-3-small), random unit vectors in memory,
the cost with a real embedding model's vectors.

``python -m benchmarks.memory [--quick] [--backends memory,sqlite,postgres] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import gc
import random
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from benchmarks.harness.command import Options, main
from benchmarks.harness.figures import Figures, Target
from repertory.core.messages import ModelMessage
from repertory.core.store import SessionStore
from repertory.memory import HashingEmbedder, StoreMemory
from repertory.storage import InMemorySessionStore, SqliteSessionStore
from repertory.testing.pg_temp import TemporaryPostgres

SIZES = {"full": (1_000, 10_000, 100_000), "quick": (500,)}
BACKENDS = {"full": "memory,sqlite,postgres", "quick": "memory,sqlite"}
ROUNDS = {"full": 200, "quick": 10}
THREAD_MESSAGES = 50
VOCABULARY = 3_000
WIDE_DIMS = 1_536
TARGET_AT = 100_000


def _vocabulary() -> list[str]:
    rng = random.Random(11)
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))))
    return sorted(words)


WORDS = _vocabulary()
WEIGHTS = [1.0 / (rank + 1) for rank in range(VOCABULARY)]  # Zipf-like: a few words are everywhere


def _sentence(rng: random.Random, lo: int = 12, hi: int = 40) -> str:
    return " ".join(rng.choices(WORDS, WEIGHTS, k=rng.randint(lo, hi)))


def _unit_rows(vectors: NDArray[np.float32]) -> NDArray[np.float32]:
    """Rows scaled to unit length, as the index expects its queries and rows (zero rows stay zero)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: NDArray[np.float32] = (vectors / norms).astype(np.float32, copy=False)
    return out


async def _fill(memory: StoreMemory, n: int) -> float:
    """Append ``n`` messages thread by thread and flush; the seconds taken."""
    rng = random.Random(n)
    start = time.perf_counter()
    for t in range(0, n, THREAD_MESSAGES):
        batch = [
            ModelMessage.user(_sentence(rng)) if i % 2 == 0 else ModelMessage.assistant(_sentence(rng))
            for i in range(min(THREAD_MESSAGES, n - t))
        ]
        await memory.append(thread_id=f"thread-{t // THREAD_MESSAGES}", messages=batch)
        if t % 5_000 == 0:
            await memory.flush()  # keeps the queue short, as a live system's would be
    await memory.flush()
    return time.perf_counter() - start


async def _timed(fn: Callable[[int], Awaitable[object]], rounds: int) -> list[float]:
    """Seconds of ``rounds`` calls of ``fn(i)`` after 5 warm-up calls (``fn(-1)``...)."""
    for i in range(5):
        await fn(-1 - i)
    samples = []
    for i in range(rounds):
        start = time.perf_counter()
        await fn(i)
        samples.append(time.perf_counter() - start)
    return samples


async def _one_size(figures: Figures, backend: str, store: SessionStore, n: int, rounds: int, pg: str | None) -> None:
    """Fill one resource with ``n`` messages, then time every figure on a fresh ``StoreMemory``."""
    resource = f"user-{n}"
    writer = StoreMemory(store, resource=resource)
    ingest_s = await _fill(writer, n)
    await writer.set_working_memory({"name": "Ada", "prefers": "window seats", "open_tasks": ["renew passport"]})
    await writer.close()
    if pg is not None:  # steady state: autovacuum would otherwise analyse the table during the timed calls
        import psycopg

        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute("VACUUM (ANALYZE) repertory.memory_messages")
    gc.collect()
    memory = StoreMemory(store, resource=resource)  # a fresh process's view: cold cache
    start = time.perf_counter()
    loaded = await memory.load_index()
    cold_s = time.perf_counter() - start
    rng = random.Random(99)
    queries = [_sentence(rng, 10, 10) for _ in range(rounds + 10)]

    async def recall(i: int) -> None:
        got = await memory.recall(thread_id="bench-new-thread", query=[ModelMessage.user(queries[i])])
        assert len(got.messages) == 10 and got.working_memory is not None

    index = memory.index
    vectors = [_unit_rows(np.atleast_2d(await memory.embedder.embed([q])))[0] for q in queries]
    dims = int(vectors[0].shape[0]) if index.size else 0

    async def search(i: int) -> None:
        await index.search(vectors[i], 3, memory.min_score, exclude_thread="bench-new-thread")

    async def recall_after_append(i: int) -> None:
        await memory.append(thread_id="bench-other", messages=[ModelMessage.user(queries[i])])
        await memory.recall(thread_id="bench-new-thread", query=[ModelMessage.user(queries[i])])

    at = f"{n:,} messages of one resource ({backend})"
    figures.value(f"ingest, {at}", n / ingest_s, "messages/s", note="embed + store, batches of 64")
    figures.time(f"cold load, {at}", cold_s, note=f"load_index(): {loaded:,} vectors of {dims} dims")
    figures.time(f"recall, {at}", await _timed(recall, rounds), target=Target(0.050) if n == TARGET_AT else None,
                 note="warm index, defaults")  # fmt: skip
    figures.time(f"search alone, {at}", await _timed(search, rounds), note="numpy, exact")
    figures.time(f"recall after an append, {at}", await _timed(recall_after_append, max(10, rounds // 4)))
    figures.size(f"index matrix, {at}", index.size * 4 * dims)
    await memory.close()


async def _wide(figures: Figures, n: int, rounds: int) -> None:
    """Search alone over ``n`` random unit vectors of ``WIDE_DIMS`` dimensions (a real embedder's size)."""
    rng = np.random.default_rng(5)
    index = StoreMemory(InMemorySessionStore(), resource="wide").index
    for start in range(0, n, 10_000):
        rows = _unit_rows(rng.normal(size=(min(10_000, n - start), WIDE_DIMS)).astype(np.float32))
        index.add(list(range(start + 1, start + rows.shape[0] + 1)), [f"t{start}"] * rows.shape[0], rows.tobytes())
    queries = _unit_rows(rng.normal(size=(rounds + 10, WIDE_DIMS)).astype(np.float32))

    async def search(i: int) -> None:
        await index.search(queries[i], 3, 0.25, exclude_thread="t0")

    at = f"{n:,} random unit vectors of {WIDE_DIMS:,} dims"
    figures.time(f"search alone, {at}", await _timed(search, rounds))
    figures.size(f"index matrix, {at}", n * WIDE_DIMS * 4)


async def scenario(figures: Figures, options: Options) -> None:
    """Every backend at every size, then the 1,536-dim search."""
    backends = (options.args.backends or BACKENDS[options.mode]).split(",")
    rounds = options.args.rounds or ROUNDS[options.mode]
    figures.fact("embedder", HashingEmbedder().name)
    figures.fact("durability", "SQLite WAL + synchronous=NORMAL; PostgreSQL synchronous_commit=on (TemporaryPostgres)")
    pg: TemporaryPostgres | None = None
    with tempfile.TemporaryDirectory(prefix="repertory-memory-") as folder:
        try:
            for backend in backends:
                for n in SIZES[options.mode]:
                    store: SessionStore
                    url: str | None = None
                    if backend == "memory":
                        store = InMemorySessionStore()
                    elif backend == "sqlite":
                        store = await SqliteSessionStore.open(Path(folder) / f"memory-{n}.db")
                    else:
                        from repertory.storage.postgres.store import PostgresSessionStore

                        pg = pg or TemporaryPostgres().start()
                        url = pg.url
                        store = await PostgresSessionStore.open(url)
                    print(f"  {backend:8} {n:>7,} messages ...", flush=True)
                    await _one_size(figures, backend, store, n, rounds, url)
                    await store.close()
        finally:
            if pg is not None:
                pg.cleanup()
    for n in SIZES[options.mode]:
        await _wide(figures, n, rounds)


def _args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backends", default=None, help="comma-separated: memory,sqlite,postgres")
    parser.add_argument("--rounds", type=int, default=None, help="timed calls per latency figure")


if __name__ == "__main__":
    main("memory", __doc__, scenario=scenario, add_args=_args)
