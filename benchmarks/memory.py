"""Memory benchmark: ``StoreMemory.recall`` latency at 1,000 / 10,000 / 100,000 messages of one resource.

Run ``python -m benchmarks.memory [--quick] [--backends memory,sqlite,postgres]``. It prints a table
and writes ``benchmarks/results/memory.json``. Nothing here asserts a speed (DESIGN.md, rule 8).
The target read against: a recall stays under 50 ms at 100,000 messages of one resource.

The workload, per backend and size N: one resource whose N messages are spread over threads of 50
messages, each message 12-40 words drawn (Zipf-like, seeded) from a 3,000-word vocabulary, written
through the public path (``StoreMemory.append`` + ``flush``: embedding with the default
``HashingEmbedder`` (512 dims) and one transaction per batch of 64), so "ingest" is messages/s of
embedding + storing. Then, on a new ``StoreMemory`` (a new process's view):

- "cold load": ``load_index()``, reading every vector of the resource into the matrix (once per
  process and resource);
- "recall": ``recall()`` of a fresh thread with a 10-word query, warm index, defaults (last 10
  messages of other threads, top 3 semantic hits, working memory): flush check, the recent-messages
  query, embedding the query, the incremental index refresh (an indexed range read that finds
  nothing), the exact search over all N vectors, loading the hits' texts, the working-memory read;
- "search": the vector search alone (``ResourceIndex.search``, numpy), the part that grows with N;
- "recall after append": one message appended first, so the refresh reads one new row.

On PostgreSQL the table is ``VACUUM (ANALYZE)``d after the load, as autovacuum would leave it;
otherwise autovacuum analyses it during the timed calls and the figures measure that instead.

Each latency is the p50 / p95 / max of R timed calls after 5 warm-up calls. A second matrix shape
is also timed, search only: 1,536 dimensions (the size of OpenAI's text-embedding-3-small), random
unit vectors held in memory, to show the cost with a real embedding model's vectors.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._report import machine_info
from repertory.core.messages import ModelMessage
from repertory.memory import HashingEmbedder, StoreMemory
from repertory.memory._index import ResourceIndex, normalise
from repertory.storage import InMemorySessionStore, SqliteSessionStore

RESULTS = Path(__file__).resolve().parent / "results" / "memory.json"
TARGET_RECALL_MS_AT_100K = 50.0
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
    return " ".join(rng.choices(WORDS, WEIGHTS, k=rng.randint(lo, hi)))


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


async def timed(fn: Callable[[int], Awaitable[Any]], rounds: int) -> dict[str, float]:
    for i in range(5):
        await fn(-1 - i)
    samples = []
    for i in range(rounds):
        start = time.perf_counter()
        await fn(i)
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return {
        "p50_ms": round(statistics.median(samples), 3),
        "p95_ms": round(samples[min(len(samples) - 1, int(0.95 * len(samples)))], 3),
        "max_ms": round(samples[-1], 3),
        "rounds": rounds,
    }


async def measure(backend: str, store: Any, n: int, rounds: int) -> dict[str, Any]:
    resource = f"user-{n}"
    writer = StoreMemory(store, resource=resource)
    ingest_s = await fill(writer, n)
    await writer.set_working_memory({"name": "Ada", "prefers": "window seats", "open_tasks": ["renew passport"]})
    await writer.close()
    if backend == "postgres":
        # Steady state: after a bulk load autovacuum would otherwise analyse the table during the
        # timed calls (measured: recall p50 26 ms while it ran, 12 ms after).
        import psycopg

        with psycopg.connect(store._conninfo, autocommit=True) as conn:
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

    index = memory._index
    embedder = memory.embedder
    vectors = [normalise(await embedder.embed([q]))[0] for q in queries]

    async def search(i: int) -> None:
        await index.search(vectors[i], 3, memory.min_score, exclude_thread="bench-new-thread")

    async def recall_after_append(i: int) -> None:
        await memory.append(thread_id="bench-other", messages=[ModelMessage.user(queries[i])])
        await memory.recall(thread_id="bench-new-thread", query=[ModelMessage.user(queries[i])])

    result = {
        "backend": backend,
        "messages": n,
        "indexed": loaded,
        "dims": int(index._matrix.shape[1]) if index._matrix is not None else 0,
        "matrix_mb": round(index.size * 4 * (index._matrix.shape[1] if index._matrix is not None else 0) / 1e6, 1),
        "ingest_messages_per_s": round(n / ingest_s),
        "cold_load_s": round(cold_s, 3),
        "recall": await timed(recall, rounds),
        "search": await timed(search, rounds),
        "recall_after_append": await timed(recall_after_append, max(10, rounds // 4)),
    }
    await memory.close()
    return result


async def wide_search(n: int, dims: int, rounds: int) -> dict[str, Any]:
    """Search alone over ``n`` random unit vectors of ``dims`` dimensions (a real embedder's size)."""
    rng = np.random.default_rng(5)
    index = ResourceIndex(InMemorySessionStore(), "wide", "random")
    for start in range(0, n, 10_000):
        rows = normalise(rng.normal(size=(min(10_000, n - start), dims)).astype(np.float32))
        index.add(list(range(start + 1, start + rows.shape[0] + 1)), [f"t{start}"] * rows.shape[0], rows.tobytes())
    queries = normalise(rng.normal(size=(rounds + 10, dims)).astype(np.float32))

    async def search(i: int) -> None:
        await index.search(queries[i], 3, 0.25, exclude_thread="t0")

    return {
        "messages": n,
        "dims": dims,
        "matrix_mb": round(n * dims * 4 / 1e6, 1),
        "search": await timed(search, rounds),
    }


async def run(backends: Sequence[str], sizes: Sequence[int], rounds: int, wide: bool) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    pg = None
    with tempfile.TemporaryDirectory() as folder:
        try:
            for backend in backends:
                for n in sizes:
                    if backend == "memory":
                        store: Any = InMemorySessionStore()
                    elif backend == "sqlite":
                        store = await SqliteSessionStore.open(os.path.join(folder, f"memory-{n}.db"))
                    else:
                        from repertory.storage.postgres.store import PostgresSessionStore
                        from repertory.testing.pg_temp import TemporaryPostgres

                        if pg is None:
                            pg = TemporaryPostgres().start()
                        store = await PostgresSessionStore.open(pg.url)
                    print(f"  {backend:8} {n:>7,} messages ...", flush=True)
                    results.append(await measure(backend, store, n, rounds))
                    await store.close()
        finally:
            if pg is not None:
                pg.cleanup()
    wide_results = [await wide_search(n, 1536, rounds) for n in sizes] if wide else []
    return {
        "benchmark": "memory",
        "machine": machine_info(),
        "embedder": HashingEmbedder().name,
        "durability": "SQLite WAL + synchronous=NORMAL; PostgreSQL synchronous_commit=on (TemporaryPostgres)",
        "target": {"recall_ms_at_100k": TARGET_RECALL_MS_AT_100K},
        "results": results,
        "wide_search_1536": wide_results,
    }


def render(report: dict[str, Any]) -> str:
    lines = [
        f"embedder: {report['embedder']}; target: recall < {TARGET_RECALL_MS_AT_100K:.0f} ms at 100,000 messages",
        "",
        "| backend | messages | ingest msg/s | cold load s | recall p50 / p95 ms | search p50 ms "
        "| recall after append p50 ms | matrix MB |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in report["results"]:
        lines.append(
            f"| {r['backend']} | {r['messages']:,} | {r['ingest_messages_per_s']:,} | {r['cold_load_s']} "
            f"| {r['recall']['p50_ms']} / {r['recall']['p95_ms']} | {r['search']['p50_ms']} "
            f"| {r['recall_after_append']['p50_ms']} | {r['matrix_mb']} |"
        )
    if report["wide_search_1536"]:
        lines += [
            "",
            "| 1,536-dim vectors (search only) | messages | p50 / p95 ms | matrix MB |",
            "| --- | ---: | ---: | ---: |",
        ]
        for w in report["wide_search_1536"]:
            lines.append(
                f"| random unit vectors | {w['messages']:,} | {w['search']['p50_ms']} / "
                f"{w['search']['p95_ms']} | {w['matrix_mb']} |"
            )
    return "\n".join(lines)


def run_suite(quick: bool, out_dir: Path = RESULTS.parent, peers: bool = True) -> dict[str, Any]:
    """The suite's entry (``python -m benchmarks``): measure, print, write ``out_dir/memory.json``.

    ``quick`` is the suite's smoke size: 500 messages, memory and SQLite, 10 rounds.
    """
    if quick:
        report = asyncio.run(run(["memory", "sqlite"], (500,), 10, wide=False))
    else:
        report = asyncio.run(run(["memory", "sqlite", "postgres"], SIZES, 200, wide=True))
    report["quick"] = quick
    report["mode"] = "smoke" if quick else "full"
    print(render(report))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "memory.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def main(argv: Sequence[str] | None = None) -> None:
    """Parse arguments, measure, print the table and write the JSON report."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 and 10,000 messages, memory and SQLite, 30 rounds")
    parser.add_argument("--backends", default=None, help="comma-separated: memory,sqlite,postgres")
    parser.add_argument("--rounds", type=int, default=None, help="timed calls per latency figure")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"JSON report path (default: {RESULTS})")
    args = parser.parse_args(argv)
    backends = (args.backends or ("memory,sqlite" if args.quick else "memory,sqlite,postgres")).split(",")
    sizes = QUICK_SIZES if args.quick else SIZES
    rounds = args.rounds or (30 if args.quick else 200)
    report = asyncio.run(run(backends, sizes, rounds, wide=not args.quick))
    report["quick"] = args.quick
    report["mode"] = "quick" if args.quick else "full"
    print(render(report))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
