"""Limits benchmark: where one process stops, measured part by part (issue 21's design limits).

Run ``python -m benchmarks.limits [--quick] [--out PATH]``; it prints a table and writes
``benchmarks/results/limits.json``. Nothing here asserts a speed.

``benchmarks.turns`` measures a turn against its targets; this measures what those figures are made
of, so a target a single process cannot reach is shown to be out of reach by a measurement, not an
opinion. Four parts:

- ``pages``: what a SQLite ``COMMIT`` costs per page it writes to the WAL (synchronous ``NORMAL``,
  SQLite's own checkpoints off so only the commit is timed), on the file system the benchmarks
  write to and on tmpfs (``/dev/shm``) beside it. A raw ``sqlite3`` loop: k one-row inserts into k
  tables write k pages; the cost per page is the slope between 1 and 6.
- ``checkpoint``: what SQLite's automatic checkpoint costs (it runs inside the ``COMMIT`` that takes
  the log past 1,000 pages, on the event loop's thread for the store): ~1,000 pages of in-place
  updates and of appends copied into the database, with its two ``fsync`` calls (``NORMAL``) and
  without them (``OFF``, not a setting the store would use).
- ``step``: one session's 50-step runs (the ``benchmarks.steps`` workload, the default ``@tool``:
  two commits a step), split into the time inside the store's write transactions (SQLite's work
  and the Python that builds the rows inside them) and the rest, which is Python. With P the rest
  and S the transactions per step, group commit, which shares S between sessions but not P, can
  gain at most (P + S) / P (less: the rows are still built per write), and one process makes at
  most 1e6 / P steps a second however cheap the store is; 10,000 steps/s needs P + S <= 100 us.
- ``collector``: the session tree (``benchmarks.turns``' workload: sessions x three two-step turns,
  local, SQLite) with the cyclic garbage collector on and disabled, alternating; the collector's
  passes by generation, their time and what they collected, and the objects it tracks per
  session, by type (``gc.get_objects()`` after the sessions were created and after their turns).
- ``promotions``: what a turn leaves the collector when turns wait (``benchmarks.concurrency``'s
  workload: sessions x three turns against the log-normal 100 ms model, all at once). The full
  passes cost about five visits per object promoted into the oldest generation, so the count per
  turn is what sets their cost. At each middle pass (the one that promotes) the objects of the two
  young generations less what the pass freed are what it promoted; the middle generation's objects,
  counted by type at the same moment, give their kinds (empty lists apart).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.harness.cli import in_temp_folder, main_of, suite_entry
from benchmarks.harness.lognormal import AGENT as CONCURRENCY_AGENT
from benchmarks.harness.lognormal import LogNormalScript
from benchmarks.harness.lognormal import agents as concurrency_agents
from benchmarks.harness.model import BenchModel
from benchmarks.harness.report import RESULTS_DIR, Clock, Report, Row, finish, mode_of, row
from benchmarks.steps.workload import run_repertory
from benchmarks.turns.tree import drive_turns, open_tree, sqlite_url
from repertory import Runtime
from repertory.storage.sqlite import connection

__all__ = ["NAME", "PLOTS", "REPORT", "LimitsReport", "main", "measure", "run_suite"]

NAME = "limits"
PLOTS: list[Any] = []
_TABLES = (1, 3, 6)
_TMPFS = Path("/dev/shm")


class PageCost(BenchModel):
    """Raw commits writing ``tables`` one-row inserts, on one file system."""

    file_system: str
    tables: int
    pages_per_commit: float
    commit_us_p50: float
    commit_us_mean: float


class CheckpointCost(BenchModel):
    """One ~1,000-page ``PRAGMA wal_checkpoint(PASSIVE)``, median of five."""

    synchronous: str
    pattern: str
    frames: int
    ms: float


class StepSplit(BenchModel):
    """One session's 50-step runs: wall time per step and the part inside write transactions."""

    runs: int
    us_per_step: float
    transaction_us_per_step: float
    transactions_per_step: float


class CollectorRound(BenchModel):
    """One timed drive of the tree, the collector on or off."""

    collector: bool
    turns: int
    seconds: float
    turns_per_s: float
    passes: list[int]
    pass_seconds: list[float]
    collected: int


class Census(BenchModel):
    """Objects the collector tracks, per session: after creation, and added by the turns."""

    sessions: int
    turns_per_session: int
    at_creation: float
    added_by_turns: float
    top_added: dict[str, float]


class Promotions(BenchModel):
    """Objects promoted to the oldest generation per turn, turns waiting on a log-normal model."""

    sessions: int
    turns: int
    median_delay_s: float
    seconds: float
    middle_passes: int
    promoted_per_turn: float
    top_kinds_per_turn: dict[str, float]


class LimitsReport(Report):
    """``benchmarks/results/limits.json``."""

    pages: list[PageCost]
    checkpoints: list[CheckpointCost]
    step: StepSplit
    collector: list[CollectorRound]
    census: Census
    promotions: Promotions | None = None

    def _slope(self, fs: str) -> tuple[float, PageCost, PageCost] | None:
        rows = sorted((p for p in self.pages if p.file_system == fs), key=lambda p: p.pages_per_commit)
        if len(rows) < 2 or rows[-1].pages_per_commit == rows[0].pages_per_commit:
            return None
        lo, hi = rows[0], rows[-1]
        return (hi.commit_us_mean - lo.commit_us_mean) / (hi.pages_per_commit - lo.pages_per_commit), lo, hi

    def summarise(self) -> list[Row]:
        """Per-page commit cost, checkpoint cost, a step's split, and the collector's share."""
        out: list[Row] = []
        for fs in dict.fromkeys(p.file_system for p in self.pages):
            slope = self._slope(fs)
            if slope is not None:
                per_page, lo, hi = slope
                out.append(
                    row(
                        f"SQLite COMMIT per WAL page written ({fs})",
                        round(per_page, 1),
                        "us",
                        note=f"{lo.pages_per_commit:.1f} pages: {lo.commit_us_mean:.0f} us mean "
                        f"({lo.commit_us_p50:.0f} p50); {hi.pages_per_commit:.1f} pages: "
                        f"{hi.commit_us_mean:.0f} us ({hi.commit_us_p50:.0f}); checkpoints off",
                    )
                )
        by = {(c.synchronous, c.pattern): c for c in self.checkpoints}
        for pattern in ("in-place updates", "appends"):
            on, off = by.get(("NORMAL", pattern)), by.get(("OFF", pattern))
            if on is not None and off is not None:
                out.append(
                    row(
                        f"SQLite's automatic checkpoint, ~{on.frames:,} pages of {pattern}",
                        round(on.ms, 1),
                        "ms",
                        note=f"without its two fsyncs (synchronous=OFF): {off.ms:.1f} ms; it runs inside "
                        "a COMMIT, on the event loop's thread",
                    )
                )
        s = self.step
        python = s.us_per_step - s.transaction_us_per_step
        out.append(
            row(
                "one session's step (50-step runs, default @tool): inside write transactions",
                round(s.transaction_us_per_step, 1),
                "us",
                note=f"of {s.us_per_step:.0f} us a step ({s.transactions_per_step:.1f} transactions); "
                f"the rest, Python: {python:.0f} us",
            )
        )
        if python > 0:
            out.append(
                row(
                    "group commit's gain, at most (P + S) / P",
                    round(s.us_per_step / python, 2),
                    "x",
                    note=f"P {python:.0f} us of Python per step, S {s.transaction_us_per_step:.0f} us in "
                    "transactions; issue 21 asks 2.5x",
                )
            )
            out.append(
                row(
                    "model steps/s of one process, at most 1e6 / P",
                    round(1e6 / python),
                    "steps/s",
                    note="issue 21 asks 10,000 steps/s on one SQLite store",
                )
            )
        on_rounds = [r for r in self.collector if r.collector]
        off_rounds = [r for r in self.collector if not r.collector]
        if on_rounds and off_rounds:
            on_rate = statistics.median(r.turns_per_s for r in on_rounds)
            off_rate = statistics.median(r.turns_per_s for r in off_rounds)
            first = on_rounds[0]
            share = sum(first.pass_seconds) / first.seconds
            out.append(
                row(
                    f"the tree, {self.census.sessions:,} sessions x {self.census.turns_per_session} turns: "
                    "turns/s with the collector disabled / on",
                    round(off_rate / on_rate, 2),
                    "x",
                    note=f"{off_rate:,.0f} vs {on_rate:,.0f} turns/s; passes (young/middle/full) "
                    f"{'/'.join(map(str, first.passes))} took "
                    f"{'/'.join(f'{t:.2f}' for t in first.pass_seconds)} s, {share:.0%} of the drive; "
                    f"collected {first.collected} objects",
                )
            )
        c = self.census
        top = ", ".join(f"{name} {n:.0f}" for name, n in list(c.top_added.items())[:8])
        out.append(
            row(
                f"objects the collector tracks per session after {c.turns_per_session} turns",
                round(c.at_creation + c.added_by_turns),
                "objects",
                note=f"{c.at_creation:.0f} at creation, {c.added_by_turns:.0f} added by the turns: {top}",
            )
        )
        pr = self.promotions
        if pr is not None:
            kinds = ", ".join(f"{name} {n:.0f}" for name, n in list(pr.top_kinds_per_turn.items())[:8])
            out.append(
                row(
                    f"objects promoted to the oldest generation per turn, {pr.sessions:,} sessions x {pr.turns} "
                    f"turns at once, log-normal {pr.median_delay_s * 1000:.0f} ms model",
                    round(pr.promoted_per_turn),
                    "objects",
                    note=f"{pr.middle_passes} middle passes in {pr.seconds:.1f} s; {kinds}",
                )
            )
        return out  # fmt: skip


REPORT = LimitsReport


def _file_system(path: Path) -> str:
    """The type of the file system holding ``path`` (the longest mount point that contains it)."""
    best, kind = "", "unknown"
    with contextlib.suppress(OSError), open("/proc/mounts") as fh:
        for line in fh:
            parts = line.split()
            if (
                len(parts) >= 3
                and (str(path) + "/").startswith(parts[1].rstrip("/") + "/")
                and len(parts[1]) > len(best)
            ):
                best, kind = parts[1], parts[2]
    return kind


def _fresh(db: Path, synchronous: str) -> sqlite3.Connection:
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(f"{db}{suffix}")
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    return conn


def _page_cost(folder: Path, tables: int, commits: int) -> PageCost:
    db = folder / f"pages-{tables}.db"
    conn = _fresh(db, "NORMAL")
    try:
        for t in range(tables):
            conn.execute(f"CREATE TABLE t{t} (id INTEGER PRIMARY KEY, v BLOB)")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        blob, samples = b"x" * 200, []
        for _ in range(commits):
            conn.execute("BEGIN IMMEDIATE")
            for t in range(tables):
                conn.execute(f"INSERT INTO t{t} (v) VALUES (?)", (blob,))
            start = time.perf_counter()
            conn.execute("COMMIT")
            samples.append(time.perf_counter() - start)
        frames = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
    finally:
        conn.close()
    return PageCost(
        file_system=_file_system(folder), tables=tables, pages_per_commit=round(frames / commits, 2),
        commit_us_p50=round(statistics.median(samples) * 1e6, 1),
        commit_us_mean=round(statistics.fmean(samples) * 1e6, 1),
    )  # fmt: skip


def _checkpoint_cost(folder: Path, synchronous: str, pattern: str) -> CheckpointCost:
    conn = _fresh(folder / "checkpoint.db", synchronous)
    rows, tables, filler = 20_000, 5, b"y" * 300
    try:
        for t in range(tables):
            conn.execute(f"CREATE TABLE t{t} (id INTEGER PRIMARY KEY, v BLOB)")
            conn.executemany(f"INSERT INTO t{t} (v) VALUES (?)", [(filler,)] * rows)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        samples, frames = [], 0
        for rep in range(5):
            for i in range(200):  # 200 commits of 5 rows: ~1,000 pages, SQLite's checkpoint interval
                conn.execute("BEGIN IMMEDIATE")
                for t in range(tables):
                    if pattern == "appends":
                        conn.execute(f"INSERT INTO t{t} (v) VALUES (?)", (filler,))
                    else:
                        # A new value each round: SQLite skips writing a row whose bytes did not change.
                        value = bytes([rep + 1]) * 300
                        conn.execute(f"UPDATE t{t} SET v = ? WHERE id = ?", (value, (i * 97 + rep * 7919) % rows + 1))
                conn.execute("COMMIT")
            start = time.perf_counter()
            frames = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
            samples.append(time.perf_counter() - start)
    finally:
        conn.close()
    return CheckpointCost(
        synchronous=synchronous, pattern=pattern, frames=frames, ms=round(statistics.median(samples) * 1e3, 2)
    )


@contextlib.contextmanager
def _timed_transactions() -> Iterator[list[float]]:
    """Time every write transaction the SQLite store runs alone: [seconds, count].

    A wrapper put in place of ``repertory.storage.sqlite.connection.transaction`` for the duration
    (one session's writes never batch, so every one of them goes through it).
    """
    original = connection.transaction
    spent = [0.0, 0.0]

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


async def _step_split(folder: Path, runs: int) -> StepSplit:
    steps = 50
    for _ in range(3):  # warm imports and caches
        await run_repertory(folder, steps, "normal", False, "list")
    with _timed_transactions() as spent:
        done = [await run_repertory(folder, steps, "normal", False, "list") for _ in range(runs)]
    # A run also opens its store and creates its session outside the timed part: their transactions
    # are few (two of a run's ~100) and are left in, a slight overstatement of S.
    total_steps = sum(r.steps + 1 for r in done)
    wall = sum(r.seconds for r in done)
    return StepSplit(
        runs=runs, us_per_step=round(wall * 1e6 / total_steps, 1),
        transaction_us_per_step=round(spent[0] * 1e6 / total_steps, 1),
        transactions_per_step=round(spent[1] / total_steps, 2),
    )  # fmt: skip


def _tracked() -> collections.Counter[str]:
    gc.collect()
    return collections.Counter(type(o).__name__ for o in gc.get_objects())


async def _collector_round(
    folder: Path, r: int, sessions: int, turns: int, on: bool, census: bool
) -> tuple[CollectorRound, Census | None]:
    before = _tracked() if census else None
    opened = await open_tree(sqlite_url(str(folder), f"collector-{r}.db"), "local", sessions, None)
    counts, seconds, collected, started = [0, 0, 0], [0.0, 0.0, 0.0], [0], [0.0]

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
            return
        g = info["generation"]
        counts[g] += 1
        seconds[g] += time.perf_counter() - started[0]
        collected[0] += info["collected"]

    failures: dict[str, int] = {}
    try:
        created = _tracked() if census else None
        gc.collect()
        gc.callbacks.append(watch)
        if not on:
            gc.disable()
        start = time.perf_counter()
        try:
            done = await drive_turns(opened.handles, turns, failures)
        finally:
            wall = time.perf_counter() - start
            gc.enable()
            gc.callbacks.remove(watch)
        result = None
        if census and before is not None and created is not None:
            after = _tracked()
            added = after - created
            result = Census(
                sessions=sessions, turns_per_session=turns,
                at_creation=round(sum((created - before).values()) / sessions, 1),
                added_by_turns=round(sum(added.values()) / sessions, 1),
                top_added={name: round(n / sessions, 2) for name, n in added.most_common(12)},
            )  # fmt: skip
    finally:
        await opened.rt.close()
    if failures:
        raise RuntimeError(f"turns failed: {failures}")
    return CollectorRound(
        collector=on, turns=done, seconds=round(wall, 3), turns_per_s=round(done / wall, 1), passes=counts,
        pass_seconds=[round(s, 3) for s in seconds], collected=collected[0],
    ), result  # fmt: skip


async def _promotions(folder: Path, sessions: int, turns: int, median_s: float) -> Promotions:
    rt = await Runtime.start(
        store=sqlite_url(str(folder), "promotions.db"), agents=concurrency_agents(LogNormalScript(median_s)),
        idle_timeout=3600.0,
    )  # fmt: skip
    kinds: collections.Counter[str] = collections.Counter()
    state = {"at_start": 0, "promoted": 0, "passes": 0}

    def watch(phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 1:
            return
        if phase == "stop":
            state["promoted"] += state["at_start"] - info["collected"]
            return
        # Only the middle generation is looked into: its objects survived a pass, so they are
        # whole (the young one may hold objects still being built).
        middle = gc.get_objects(1)
        state["at_start"] = len(middle) + len(gc.get_objects(0))
        state["passes"] += 1
        for o in middle:
            kinds["list (empty)" if type(o) is list and not o else type(o).__qualname__] += 1

    failures: dict[str, int] = {}
    try:
        handles = [await rt.create_session(agent=CONCURRENCY_AGENT) for _ in range(sessions)]
        await handles[0].run("warm-up")

        async def session(i: int) -> None:
            for t in range(turns):
                try:
                    await handles[i].run(f"session {i} turn {t}")
                except Exception as exc:  # measured, not asserted: counted, then reported
                    failures[type(exc).__name__] = failures.get(type(exc).__name__, 0) + 1

        gc.collect()
        gc.callbacks.append(watch)
        start = time.perf_counter()
        try:
            await asyncio.gather(*(session(i) for i in range(sessions)))
        finally:
            wall = time.perf_counter() - start
            gc.callbacks.remove(watch)
    finally:
        await rt.close()
    if failures:
        raise RuntimeError(f"turns failed: {failures}")
    done = sessions * turns
    sampled = sum(kinds.values()) or 1
    scale = state["promoted"] / done / sampled  # the middle generation's mix, scaled to what was promoted
    return Promotions(
        sessions=sessions, turns=turns, median_delay_s=median_s, seconds=round(wall, 2),
        middle_passes=state["passes"], promoted_per_turn=round(state["promoted"] / done, 1),
        top_kinds_per_turn={name: round(n * scale, 1) for name, n in kinds.most_common(16)},
    )  # fmt: skip


async def measure_async(quick: bool, folder: Path) -> LimitsReport:
    """Every part, on files in ``folder`` (and ``/dev/shm`` for the tmpfs figures, when it exists)."""
    clock = Clock.start(NAME, mode_of(quick))
    commits = 300 if quick else 5_000
    places = [folder]
    if _TMPFS.is_dir() and _file_system(_TMPFS) == "tmpfs" and _file_system(folder) != "tmpfs":
        places.append(_TMPFS)
    pages: list[PageCost] = []
    for place in places:
        with tempfile.TemporaryDirectory(dir=place, prefix="repertory-limits-") as where:
            pages += [_page_cost(Path(where), t, commits) for t in _TABLES]
    checkpoints = [
        _checkpoint_cost(folder, sync, pattern)
        for pattern in ("in-place updates", "appends")
        for sync in ("NORMAL", "OFF")
    ]
    step = await _step_split(folder, 3 if quick else 20)
    sessions, turns, rounds = (100, 3, 1) if quick else (1_000, 3, 2)
    collector: list[CollectorRound] = []
    census: Census | None = None
    for r in range(rounds):
        for on in (True, False):
            done, counted = await _collector_round(folder, 2 * r + int(on), sessions, turns, on, census is None and on)
            collector.append(done)
            census = census or counted
    assert census is not None
    promotions = await (_promotions(folder, 100, 3, 0.002) if quick else _promotions(folder, 3_000, 3, 0.1))
    report = LimitsReport(
        benchmark=NAME, mode=clock.mode, created_at=clock.created_at, machine=clock.machine,
        pages=pages, checkpoints=checkpoints, step=step, collector=collector, census=census,
        promotions=promotions,
    )  # fmt: skip
    return finish(report, clock)


def measure(quick: bool) -> LimitsReport:
    """The whole measurement in a fresh temporary folder."""
    return in_temp_folder(NAME, measure_async, quick)


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> LimitsReport:
    """The suite's entry: measure, print, write ``out_dir/limits.json``."""
    return suite_entry(NAME, measure, quick, out_dir)


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.limits [--quick] [--out PATH]``."""
    main_of(NAME, __doc__, "100 sessions, fewer commits (seconds)", measure, argv)


if __name__ == "__main__":
    main()
