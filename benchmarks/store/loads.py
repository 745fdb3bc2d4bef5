"""``load_history`` at several depths of one lineage, as a store serves it warm and cold, and until used.

A SQL store keeps what it decoded or wrote (``repertory.storage.history_cache``), so a repeated
load of one lineage decodes nothing: timing only that would hide what a load costs the first time
in a process. Each depth is therefore timed four ways, one after another:

- ``median_ms``: ``load_history`` as called again on the same store (warm: the cache holds the lineage);
- ``used_median_ms``: the same, then ``messages`` and ``context_messages()`` read, which is what the
  engine does with a history before a model request: the time until the messages are in use;
- ``cold_median_ms``: the cache emptied before each call (``history_cache.clear()``), so the
  lineage is read and decoded from the rows, as the first load of it in a process is (the database's
  pages stay warm in its page cache; the files are not evicted);
- ``cold_used_median_ms``: the cold load, then the messages read.

The SQL alone is the store's own lineage query, timed the way the store runs it (``query``), and
``gc_off_median_ms`` is the cold load with the collector paused, which shows how much of it is the GC.
The history each call returns is dropped inside the timed region, as a caller's would be.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence

from benchmarks.store.report import TARGET_LOAD_MS_AT_10K, LoadHistory, LoadResult
from repertory.core.history import MessageHistory
from repertory.storage.history_cache import HistoryCache

__all__ = ["LoadableStore", "load_history", "measure_loads"]


class LoadableStore:
    """What the measurement needs of a store: ``load_history`` and its ``history_cache``."""

    def __init__(self, load: Callable[[str], Awaitable[MessageHistory | None]], cache: HistoryCache | None) -> None:
        self.load, self.cache = load, cache


async def _median_ms(
    runs: int, call: Callable[[], Awaitable[object]], before: Callable[[], None] | None = None, gc_off: bool = False
) -> tuple[float, float]:
    if before is not None:
        before()
    await call()  # warm the page cache and the connections; the first call is not the steady state
    samples: list[float] = []
    if gc_off:
        gc.disable()
    try:
        for _ in range(runs):
            if before is not None:
                before()
            start = time.perf_counter()
            await call()
            samples.append((time.perf_counter() - start) * 1e3)
    finally:
        gc.enable()
    return statistics.median(samples), min(samples)


async def measure_loads(
    store: LoadableStore,
    revision_ids: Sequence[str],
    depths: Sequence[int],
    runs: int,
    query: Callable[[str], Awaitable[object]],
) -> list[LoadResult]:
    """Each depth's figures; ``revision_ids[d - 1]`` is the revision at depth ``d``."""
    cold = store.cache.clear if store.cache is not None else None
    out: list[LoadResult] = []
    for depth in depths:
        revision_id = revision_ids[depth - 1]
        loaded = await store.load(revision_id)
        if loaded is None or len(loaded.messages) != depth:
            raise RuntimeError(f"load_history at depth {depth} returned the wrong lineage")
        del loaded

        async def load(rid: str = revision_id) -> None:
            await store.load(rid)

        async def used(rid: str = revision_id, want: int = depth) -> None:
            history = await store.load(rid)
            if history is None or len(history.messages) != want or len(history.context_messages()) != want:
                raise RuntimeError(f"load_history at depth {want} returned the wrong lineage")

        async def sql(rid: str = revision_id) -> object:
            return await query(rid)

        median, fastest = await _median_ms(runs, load)
        used_median, _ = await _median_ms(runs, used)
        cold_median, cold_fastest = await _median_ms(runs, load, cold)
        cold_used, _ = await _median_ms(runs, used, cold)
        query_median, _ = await _median_ms(runs, sql)
        gc_off, _ = await _median_ms(runs, load, cold, gc_off=True)
        out.append(
            LoadResult(
                depth=depth,
                runs=runs,
                median_ms=median,
                min_ms=fastest,
                used_median_ms=used_median,
                cold_median_ms=cold_median,
                cold_min_ms=cold_fastest,
                cold_used_median_ms=cold_used,
                query_median_ms=query_median,
                decode_median_ms=cold_median - query_median,
                gc_off_median_ms=gc_off,
            )
        )
    return out


def load_history(results: list[LoadResult]) -> LoadHistory:
    """The figures against the target, read at the deepest depth warm until used, and cold until used."""
    deepest = results[-1]
    warm = deepest.used_median_ms if deepest.used_median_ms is not None else deepest.median_ms
    cold = deepest.cold_used_median_ms
    return LoadHistory(
        meets_target=warm <= TARGET_LOAD_MS_AT_10K,
        meets_target_cold=None if cold is None else cold <= TARGET_LOAD_MS_AT_10K,
        results=results,
    )
