"""Memory benchmark: ``StoreMemory.recall`` latency at 1,000 / 10,000 / 100,000 messages of one resource.

Run ``python -m benchmarks.memory [--quick] [--backends memory,sqlite,postgres]``. It prints a table
and writes ``benchmarks/results/memory.json``. Nothing here asserts a speed.
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
- "search": the vector search alone (``StoreMemory.index.search``, numpy), the part that grows with N;
- "recall after append": one message appended first, so the refresh reads one new row.

On PostgreSQL the table is ``VACUUM (ANALYZE)``d after the load, as autovacuum would leave it;
otherwise autovacuum analyses it during the timed calls and the figures measure that instead.

Each latency is the p50 / p95 / max of R timed calls after 5 warm-up calls. A second matrix shape
is also timed, search only: 1,536 dimensions (the size of OpenAI's text-embedding-3-small), random
unit vectors held in memory, to show the cost with a real embedding model's vectors.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.harness.cli import deliver
from benchmarks.harness.plots import Plot
from benchmarks.harness.report import RESULTS_DIR
from benchmarks.memory.report import MemoryReport

__all__ = ["NAME", "PLOTS", "REPORT", "run_suite"]

NAME = "memory"
REPORT = MemoryReport
PLOTS: list[Plot[MemoryReport]] = []


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> MemoryReport:
    """The suite's entry: measure, print, write ``out_dir/memory.json``.

    ``quick`` is the suite's smoke size: 500 messages, memory and SQLite, 10 rounds.
    """
    from benchmarks.memory.recall import measure

    if quick:
        report = measure(["memory", "sqlite"], (500,), 10, wide=False, mode="smoke")
    else:
        report = measure(["memory", "sqlite", "postgres"], (1_000, 10_000, 100_000), 200, wide=True, mode="full")
    deliver(report, out_dir / f"{NAME}.json")
    return report
