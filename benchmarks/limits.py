"""Limits: where one process stops, measured part by part (issue 21's design limits).

``benchmarks.turns`` measures a turn against its targets; this measures what those figures are made
of, so a target one process cannot reach is shown out of reach by a measurement, not an opinion:

- pages: what a SQLite ``COMMIT`` costs per page it writes to the WAL (synchronous ``NORMAL``,
  SQLite's checkpoints off so only the commit is timed), on the file system the benchmarks write to
  and on tmpfs (``/dev/shm``) beside it: k one-row inserts into k tables write k pages; the cost per
  page is the slope from 1 to 6 tables;
- checkpoint: what SQLite's automatic checkpoint costs (it runs inside the ``COMMIT`` that takes the
  log past 1,000 pages, on the event loop's thread for the store): ~1,000 pages of in-place updates
  and of appends copied into the database, with its two ``fsync`` calls (``NORMAL``) and without
  (``OFF``, not a setting the store would use);
- step: one session's 50-step runs (``benchmarks.steps``' workload, the default ``@tool``: two
  commits a step), split into the time inside the store's write transactions (S) and the rest, Python
  (P). Group commit shares S between sessions, not P, so it gains at most (P + S) / P, and one process
  makes at most 1e6 / P steps a second however cheap the store: 10,000 steps/s needs P + S <= 100 us;
- collector: the session tree (``benchmarks.turns``' workload: sessions x three two-step turns,
  local, SQLite) with the cyclic collector on and disabled, alternating; its passes by generation,
  their time, and the objects it tracks per session, by type (``gc.get_objects()`` after creation and
  after the turns);
- promotions: what a turn leaves the collector when turns wait (``benchmarks.concurrency``'s model:
  log-normal 100 ms, all sessions at once). A full pass costs about five visits per object promoted
  to the oldest generation; at each middle pass (the one that promotes) the two young generations'
  objects less what the pass freed are what it promoted, and the middle generation's objects, counted
  by type at that moment, give their kinds.

``python -m benchmarks.limits [--quick]``.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.harness.command import Options, main
from benchmarks.harness.figures import Figures
from benchmarks.harness.lognormal import AGENT, LogNormalScript, agents
from benchmarks.harness.sqlite_files import remove_database
from benchmarks.steps import run_repertory
from benchmarks.turns import drive_turns, open_tree, sqlite_url
from repertory import Runtime
from repertory.storage.sqlite import connection

TABLES = (1, 3, 6)
TMPFS = Path("/dev/shm")
SIZES = {"full": (5_000, 20, (1_000, 3, 2), (3_000, 3, 0.1)), "quick": (300, 3, (100, 3, 1), (100, 3, 0.002))}
"""Per mode: raw commits a table count, 50-step runs, (sessions, turns, rounds), (sessions, turns, model median s)."""


def _file_system(path: Path) -> str:
    """The type of the file system holding ``path`` (the longest mount point that contains it)."""
    best, kind = "", "unknown"
    with contextlib.suppress(OSError), open("/proc/mounts") as fh:
        for parts in (line.split() for line in fh):
            mount = parts[1].rstrip("/") + "/" if len(parts) >= 3 else ""
            if mount and (str(path) + "/").startswith(mount) and len(parts[1]) > len(best):
                best, kind = parts[1], parts[2]
    return kind


def _fresh(db: Path, synchronous: str) -> sqlite3.Connection:
    remove_database(db)
    conn = sqlite3.connect(db, isolation_level=None)
    for pragma in ("journal_mode = WAL", f"synchronous = {synchronous}", "wal_autocheckpoint = 0"):
        conn.execute(f"PRAGMA {pragma}")
    return conn


def page_costs(figures: Figures, folder: Path, commits: int) -> None:
    """Raw commits of k one-row inserts into k tables, timed at the COMMIT alone; the slope per page."""
    fs, points = _file_system(folder), []
    for tables in TABLES:
        conn = _fresh(folder / f"pages-{tables}.db", "NORMAL")
        try:
            for t in range(tables):
                conn.execute(f"CREATE TABLE t{t} (id INTEGER PRIMARY KEY, v BLOB)")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            samples = []
            for _ in range(commits):
                conn.execute("BEGIN IMMEDIATE")
                for t in range(tables):
                    conn.execute(f"INSERT INTO t{t} (v) VALUES (?)", (b"x" * 200,))
                start = time.perf_counter()
                conn.execute("COMMIT")
                samples.append(time.perf_counter() - start)
            pages = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1] / commits
        finally:
            conn.close()
        mean = statistics.fmean(samples)
        points.append((pages, mean))
        figures.time(f"SQLite COMMIT of {tables} one-row insert(s), mean ({fs})", mean,
                     note=f"{pages:.1f} WAL pages; p50 {statistics.median(samples) * 1e6:.0f} us")  # fmt: skip
    (lo_pages, lo), (hi_pages, hi) = points[0], points[-1]
    if hi_pages > lo_pages:
        figures.time(f"SQLite COMMIT per WAL page written ({fs})", (hi - lo) / (hi_pages - lo_pages),
                     note="the slope of the mean from 1 to 6 tables; checkpoints off")  # fmt: skip


def checkpoint_cost(figures: Figures, folder: Path, synchronous: str, pattern: str) -> None:
    """Five ~1,000-page ``wal_checkpoint(PASSIVE)``s after 200 commits of five rows each."""
    conn = _fresh(folder / "checkpoint.db", synchronous)
    rows, tables, filler = 20_000, 5, b"y" * 300
    samples, frames = [], 0
    try:
        for t in range(tables):
            conn.execute(f"CREATE TABLE t{t} (id INTEGER PRIMARY KEY, v BLOB)")
            conn.executemany(f"INSERT INTO t{t} (v) VALUES (?)", [(filler,)] * rows)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        for rep in range(5):
            for i in range(200):  # ~1,000 pages: SQLite's checkpoint interval
                conn.execute("BEGIN IMMEDIATE")
                for t in range(tables):
                    if pattern == "appends":
                        conn.execute(f"INSERT INTO t{t} (v) VALUES (?)", (filler,))
                    else:  # a new value each round: SQLite skips writing a row whose bytes did not change
                        row = (i * 97 + rep * 7919) % rows + 1
                        conn.execute(f"UPDATE t{t} SET v = ? WHERE id = ?", (bytes([rep + 1]) * 300, row))
                conn.execute("COMMIT")
            start = time.perf_counter()
            frames = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
            samples.append(time.perf_counter() - start)
    finally:
        conn.close()
    how = "" if synchronous == "NORMAL" else ", without its two fsyncs (synchronous=OFF)"
    figures.time(f"SQLite's automatic checkpoint, ~1,000 pages of {pattern}{how}", samples,
                 note=f"{frames:,} pages; it runs inside a COMMIT, on the event loop's thread")  # fmt: skip


@contextlib.contextmanager
def _timed_transactions() -> Iterator[list[float]]:
    """[seconds, count] of every write transaction the SQLite store runs alone (one session's writes never
    batch): a wrapper in place of ``repertory.storage.sqlite.connection.transaction`` meanwhile."""
    original, spent = connection.transaction, [0.0, 0.0]

    def timed(conn: sqlite3.Connection, action: str, fn: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(conn, action, fn)
        finally:
            spent[0] += time.perf_counter() - start
            spent[1] += 1

    connection.transaction = timed
    try:
        yield spent
    finally:
        connection.transaction = original


async def step_split(figures: Figures, folder: Path, runs: int) -> None:
    """One session's 50-step runs: the time inside write transactions (S) and the rest (P)."""
    for _ in range(3):  # warm imports and caches
        await run_repertory(folder, 50, "normal", False, "list")
    with _timed_transactions() as spent:
        done = [await run_repertory(folder, 50, "normal", False, "list") for _ in range(runs)]
    # A run opens its store and session outside the timed part: their two transactions are left in S.
    steps = sum(r.steps + 1 for r in done)
    step, s = sum(r.seconds for r in done) / steps, spent[0] / steps
    figures.time("one session's step (50-step runs, default @tool)", step)
    figures.time("one session's step: inside write transactions (S)", s)
    figures.value("one session's step: write transactions", spent[1] / steps, "transactions")
    figures.time("one session's step: the rest, Python (P)", step - s)
    if step > s:
        figures.value("group commit's gain, at most (P + S) / P", step / (step - s), "x",
                      note="issue 21 asks 2.5x")  # fmt: skip
        figures.value("model steps/s of one process, at most 1e6 / P", 1 / (step - s), "steps/s",
                      note="issue 21 asks 10,000 steps/s on one SQLite store")  # fmt: skip


def _tracked() -> collections.Counter[str]:
    gc.collect()
    return collections.Counter(type(o).__name__ for o in gc.get_objects())


async def collector_round(figures: Figures | None, url: str, sessions: int, turns: int, on: bool) -> float:
    """One drive of the tree, the collector on or disabled; turns/s. With ``figures``: its passes and a census."""
    before = _tracked() if figures is not None else None
    rt, handles = await open_tree(url, "local", sessions, None)
    counts, seconds, collected, started = [0, 0, 0], [0.0, 0.0, 0.0], [0], [0.0]

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
            return
        counts[info["generation"]] += 1
        seconds[info["generation"]] += time.perf_counter() - started[0]
        collected[0] += info["collected"]

    failures: dict[str, int] = {}
    try:
        created = _tracked() if figures is not None else None
        gc.collect()
        gc.callbacks.append(watch)
        if not on:
            gc.disable()
        start = time.perf_counter()
        try:
            done = await drive_turns(handles, turns, failures)
        finally:
            wall = time.perf_counter() - start
            gc.enable()
            gc.callbacks.remove(watch)
        if figures is not None and before is not None and created is not None:
            added = _tracked() - created
            at_creation, by_turns = sum((created - before).values()) / sessions, sum(added.values()) / sessions
            figures.value(f"objects the collector tracks per session after {turns} turns ({sessions:,} sessions)",
                          at_creation + by_turns, "objects",
                          note=f"{at_creation:.0f} at creation, {by_turns:.0f} added by the turns")  # fmt: skip
            figures.fact("objects added per session, by type",
                         ", ".join(f"{k} {n / sessions:.1f}" for k, n in added.most_common(12)))  # fmt: skip
            for g, name in enumerate(("young", "middle", "full")):
                figures.count(f"collector passes over the drive, {name}", counts[g])
                figures.time(f"collector passes over the drive, {name}, time", seconds[g])
            figures.value("the collector's share of the drive", sum(seconds) / wall * 100, "%")
            figures.count("objects the collector freed over the drive", collected[0])
    finally:
        await rt.close()
    if failures:
        raise RuntimeError(f"turns failed: {failures}")
    return done / wall


async def promotions(figures: Figures, url: str, sessions: int, turns: int, median_s: float) -> None:
    """Objects promoted to the oldest generation per turn, all sessions' turns waiting on the model."""
    rt = await Runtime.start(store=url, agents=agents(LogNormalScript(median_s)), idle_timeout=3600.0)
    kinds: collections.Counter[str] = collections.Counter()
    state = {"at_start": 0, "promoted": 0, "passes": 0}

    def watch(phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 1:
            return
        if phase == "stop":
            state["promoted"] += state["at_start"] - info["collected"]
            return
        middle = gc.get_objects(1)  # survived a pass, so whole (the young may be half-built)
        state["at_start"] = len(middle) + len(gc.get_objects(0))
        state["passes"] += 1
        for o in middle:
            kinds["list (empty)" if type(o) is list and not o else type(o).__qualname__] += 1

    failures: dict[str, int] = {}
    try:
        handles = [await rt.create_session(agent=AGENT) for _ in range(sessions)]
        await handles[0].run("warm-up")
        gc.collect()
        gc.callbacks.append(watch)
        start = time.perf_counter()
        try:
            await drive_turns(handles, turns, failures)
        finally:
            wall = time.perf_counter() - start
            gc.callbacks.remove(watch)
    finally:
        await rt.close()
    if failures:
        raise RuntimeError(f"turns failed: {failures}")
    done, sampled = sessions * turns, sum(kinds.values()) or 1
    scale = state["promoted"] / done / sampled  # the middle generation's mix, scaled to what was promoted
    figures.value(f"objects promoted to the oldest generation per turn, {sessions:,} sessions x {turns} turns at "
                  f"once, log-normal {median_s * 1000:.0f} ms model", state["promoted"] / done, "objects",
                  note=f"{state['passes']} middle passes in {wall:.1f} s")  # fmt: skip
    figures.fact("promoted per turn, by kind", ", ".join(f"{k} {n * scale:.1f}" for k, n in kinds.most_common(16)))


async def scenario(figures: Figures, options: Options) -> None:
    """Every part, on files in a temporary folder (and ``/dev/shm`` for the tmpfs figures, when it is one)."""
    commits, step_runs, (sessions, turns, rounds), promoting = SIZES[options.mode]
    with tempfile.TemporaryDirectory(prefix="repertory-limits-") as tmp:
        folder = Path(tmp)
        page_costs(figures, folder, commits)
        if TMPFS.is_dir() and _file_system(TMPFS) == "tmpfs" and _file_system(folder) != "tmpfs":
            with tempfile.TemporaryDirectory(dir=TMPFS, prefix="repertory-limits-") as shm:
                page_costs(figures, Path(shm), commits)
        for pattern in ("in-place updates", "appends"):
            for synchronous in ("NORMAL", "OFF"):
                checkpoint_cost(figures, folder, synchronous, pattern)
        await step_split(figures, folder, step_runs)
        rates: dict[bool, list[float]] = {True: [], False: []}
        for r in range(rounds):
            for on in (True, False):
                url = sqlite_url(tmp, f"collector-{r}-{on}.db")
                rates[on].append(await collector_round(figures if r == 0 and on else None, url, sessions, turns, on))
        shape = f"the tree, {sessions:,} sessions x {turns} turns"
        figures.value(f"{shape}: turns/s, collector on", rates[True], "turns/s")
        figures.value(f"{shape}: turns/s, collector disabled", rates[False], "turns/s")
        figures.value(f"{shape}: turns/s with the collector disabled / on",
                      statistics.median(rates[False]) / statistics.median(rates[True]), "x")  # fmt: skip
        await promotions(figures, sqlite_url(tmp, "promotions.db"), *promoting)


if __name__ == "__main__":
    main("limits", __doc__, scenario=scenario)
