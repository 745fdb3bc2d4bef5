"""Parts 1-2: memory per idle session, resident (history cache kept and cleared) and passivated.

N sessions each run one short turn, so each has an activated ``SessionActor``; memory is read with
the session's history cache kept (as the turn left it) and cleared (``Session.drop_cached_history``,
the figure the target is about), then after ``passivate_idle(0)``. tracemalloc's traced size after
``gc.collect()``, minus the same reading taken before the sessions existed, over N, is the headline;
the resident set grows by more and is read in a separate, untraced interpreter.
"""

from __future__ import annotations

import collections
import gc
import os
import time
import tracemalloc

from benchmarks.harness.procfs import proc_status
from benchmarks.harness.profiling import short_path
from benchmarks.sessions.report import MemoryPart, MemoryState, Reading, Site
from benchmarks.sessions.shared import AGENT, local_host, reply, runtime
from repertory.testing import ScriptedModel

__all__ = ["FRAMES", "WARMUP_SESSIONS", "memory"]

FRAMES = 10
WARMUP_SESSIONS = 200


def _census() -> collections.Counter[str]:
    """GC-tracked objects by type name (strings and ints are not tracked, so this is a partial view)."""
    return collections.Counter(type(o).__name__ for o in gc.get_objects())


def _owner(traceback: tracemalloc.Traceback) -> tuple[str, str]:
    """(the innermost repertory frame, the frame that allocated) of a traceback.

    Most of a session's memory is allocated inside pydantic, copy or asyncio; the repertory line
    that asked for it is the one a fix would change.
    """
    frames = list(traceback)  # oldest first
    alloc = f"{short_path(frames[-1].filename)}:{frames[-1].lineno}"
    for frame in reversed(frames):
        if "/repertory/" in frame.filename.replace("\\", "/"):
            return f"{short_path(frame.filename)}:{frame.lineno}", alloc
    return alloc, alloc


def _attribute(snap: tracemalloc.Snapshot, base: tracemalloc.Snapshot, n: int) -> tuple[list[Site], list[Site]]:
    """Memory growth since ``base`` by repertory line (and by allocating line), per session."""
    by_owner: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    by_pair: dict[tuple[str, str], list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    for stat in snap.compare_to(base, "traceback"):
        owner, alloc = _owner(stat.traceback)
        for sums in (by_owner[owner], by_pair[(owner, alloc)]):
            sums[0] += stat.size_diff
            sums[1] += stat.count_diff
    lines = [
        Site(site=k, bytes_per_session=v[0] / n, blocks_per_session=v[1] / n)
        for k, v in sorted(by_owner.items(), key=lambda kv: -kv[1][0])[:20]
    ]
    pairs = [
        Site(site=k[0], allocated_in=k[1], bytes_per_session=v[0] / n, blocks_per_session=v[1] / n)
        for k, v in sorted(by_pair.items(), key=lambda kv: -kv[1][0])[:30]
    ]
    return lines, pairs


async def memory(folder: str, n: int, traced: bool, warmup: int = WARMUP_SESSIONS) -> MemoryPart:
    """Create ``n`` sessions (one turn each) and read the process kept, cleared and passivated."""
    rt = await runtime(folder, "memory.db", ScriptedModel(reply))
    host = local_host(rt)
    try:
        # Warm-up: imports, pydantic validators, SQLite statement caches, reader connections and
        # executor threads are made once here, so they are not billed to the measured sessions.
        for _ in range(warmup):
            h = await rt.create_session(agent=AGENT)
            await h.run("warm-up")
        host.passivate_idle(0)
        del h
        gc.collect()

        readings: dict[str, Reading] = {}
        attribution: dict[str, tuple[list[Site], list[Site]]] = {}
        censuses: dict[str, collections.Counter[str]] = {}
        base_path = os.path.join(folder, "baseline.snapshot")
        if traced:
            tracemalloc.start(FRAMES)

        def read(label: str) -> None:
            # The traced size is read while no snapshot is alive: a snapshot is itself traced memory.
            gc.collect()
            status = proc_status()
            reading = Reading(resident=host.resident, VmRSS=status["VmRSS"], VmHWM=status["VmHWM"])
            if traced:
                reading.traced_bytes = tracemalloc.get_traced_memory()[0]
                snap = tracemalloc.take_snapshot().filter_traces(
                    [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen *>")]
                )
                if label == "baseline":
                    snap.dump(base_path)
                else:
                    attribution[label] = _attribute(snap, tracemalloc.Snapshot.load(base_path), n)
                del snap
                censuses[label] = _census()
            readings[label] = reading

        read("baseline")
        t0 = time.perf_counter()
        ids = []
        for i in range(n):
            h = await rt.create_session(agent=AGENT)
            await h.run(f"hello {i}")
            ids.append(h.id)
        fill_s = time.perf_counter() - t0
        del h
        read("resident_history_kept")
        # The host's own actors (all resident: nothing was passivated since their turn).
        cached_history = sum([(await host.actor(sid)).session.drop_cached_history() for sid in ids])
        del ids
        read("resident_history_cleared")
        passivated = host.passivate_idle(0)
        read("passivated")
        if traced:
            tracemalloc.stop()
    finally:
        await rt.close()

    base = readings["baseline"]
    states: dict[str, MemoryState] = {}
    for label in ("resident_history_kept", "resident_history_cleared", "passivated"):
        r = readings[label]
        state = MemoryState(resident=r.resident, rss_delta_bytes_per_session=(r.VmRSS - base.VmRSS) / n)
        if traced:
            assert r.traced_bytes is not None and base.traced_bytes is not None
            state.traced_bytes_per_session = (r.traced_bytes - base.traced_bytes) / n
            state.by_repertory_line, state.by_repertory_line_and_allocator = attribution[label]
            growth = censuses[label] - censuses["baseline"]
            state.gc_objects_per_session = {k: v / n for k, v in growth.most_common(20)}
        states[label] = state
    return MemoryPart(
        sessions=n,
        traced=traced,
        fill_seconds=fill_s,
        traceback_frames=FRAMES if traced else None,
        sessions_with_history_cache_after_turn=cached_history,
        passivated_by_passivate_idle_0=passivated,
        readings=readings,
        states=states,
    )
