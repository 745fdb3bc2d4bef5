"""Export benchmark: Parquet export throughput over a store of 1,000,000 history entries, and ``tree_usage``.

Run ``python -m benchmarks.export [--quick] [--entries N]``. It prints a table and writes
``benchmarks/results/export.json``. Nothing here asserts a speed (DESIGN.md, rule 8): a slow figure is
a finding, not a failure. Targets: first export >= 300,000 rows/s, ``tree_usage`` < 1 s.

The store is a SQLite file filled with direct inserts (the engine would take minutes to write a
million messages; the export reads rows, so how they got there does not matter). Its shape is a
fleet: trees of an orchestrator session with three spawned children and one fork of the
orchestrator (forked half-way, so it shares half its parent's history). Every thread is a run of
turns of 20 messages: a user message, nine tool calls each followed by its result (one call per turn
needs approval, one in ten results is an error), and a final reply. One run, one turn and three
events (turn.started, approval.requested, turn.completed) per turn. Messages are ~150-400 bytes of
JSON.

Figures:

- ``first export``: everything (the base tables plus the derived ``messages``, one row per message
  per thread lineage, so a fork's shared half counts again, and ``tool_calls``). rows/s counts every
  row written to every table; entries/s counts history entries only.
- ``incremental``: after 1% more turns are added to existing threads, and after no change at all.
- ``tree_usage``: ``repertory.analytics.connect`` then ``SELECT * FROM tree_usage(root)``, cold (first
  query, Parquet files read) and warm.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow

from repertory.analytics import connect
from repertory.core.ids import new_id
from repertory.storage.export import export_parquet
from repertory.storage.sqlite.store import SqliteSessionStore

RESULTS = Path(__file__).resolve().parent / "results" / "export.json"
TARGET_ROWS_PER_S = 300_000
TARGET_TREE_USAGE_S = 1.0
TURN = 20  # messages per turn
_T0 = 1_780_000_000_000
_WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar".split()


def _text(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choices(_WORDS, k=rng.randint(lo, hi)))


def _message(role: str, parts: list[dict[str, Any]], origin: str | None) -> str:
    return json.dumps(
        {"role": role, "parts": parts, "origin": None if origin is None else {"kind": origin, "id": None}},
        separators=(",", ":"),
    )


class Builder:
    """Writes a fleet straight into the store's tables (one transaction per batch)."""

    def __init__(self, conn: sqlite3.Connection, seed: int = 7) -> None:
        self.conn = conn
        self.rng = random.Random(seed)
        self.clock = _T0
        self.seq = 0
        self.entries: list[tuple[str, int, str]] = []
        self.revisions: list[tuple[str, str | None, str, int, int]] = []
        self.heads: dict[str, tuple[str | None, int]] = {}
        self.dirty: set[str] = set()
        self.count = 0

    def tick(self, ms: int = 1) -> int:
        self.clock += ms
        return self.clock

    def add(self, thread: str, message: str) -> None:
        head, depth = self.heads[thread]
        eid, rid, at = new_id(), new_id(), self.tick()
        self.entries.append((eid, at, message))
        self.revisions.append((rid, head, eid, depth + 1, at))
        self.heads[thread] = (rid, depth + 1)
        self.dirty.add(thread)
        self.count += 1

    def session(self, sid: str, root: str, parent: str | None, kind: str, head: str | None, depth: int) -> None:
        at = self.tick()
        lineage = {"kind": kind, "parent_id": parent, "forked_at_revision_id": head if kind == "forked" else None}
        record = {
            "session_id": sid,
            "agent": "orchestrator" if parent is None else "worker",
            "lineage": lineage,
            "root_id": root,
            "title": f"{kind} {sid[-4:]}",
            "model": "gpt-4o-mini",
            "cwd": None,
            "created_at": at,
            "updated_at": at,
        }
        self.conn.execute(
            "INSERT INTO sessions (session_id, parent_id, created_at, record) VALUES (?, ?, ?, ?)",
            (sid, parent, at, json.dumps(record)),
        )
        self.heads[sid] = (head, depth)
        self.dirty.add(sid)

    def turn(self, thread: str) -> None:
        rng = self.rng
        run_id, sub_id = new_id(), new_id()
        started = self.tick()
        user = _message("user", [{"type": "text", "text": _text(rng, 5, 30)}], "user")
        self.add(thread, user)
        approvals = []
        approve_at = rng.randrange(9)
        for i in range(9):
            call_id = f"call_{new_id()}"
            name = "delete_record" if i == approve_at else rng.choice(["search", "fetch", "summarise", "sql"])
            args = {"query": _text(rng, 2, 8), "limit": rng.randint(1, 50)}
            call = {"type": "tool-call", "tool_call_id": call_id, "tool_name": name, "args": args}
            self.add(thread, _message("assistant", [call], "model"))
            if i == approve_at:
                requested = self.clock
                self.tick(rng.randint(1_000, 120_000))
                decision = "approved" if rng.random() < 0.8 else "rejected"
                approvals.append({
                    "tool_call_id": call_id, "tool_name": name, "args": args, "requested_at": requested,
                    "decision": decision, "decided_at": self.clock, "approval": None,
                    "reason": None if decision == "approved" else "not approved", "args_replaced": False,
                })  # fmt: skip
            error = rng.random() < 0.1
            result = "boom: upstream timeout" if error else {"rows": rng.randint(0, 99), "text": _text(rng, 5, 40)}
            self.tick(rng.randint(1, 400))
            answer = {"type": "tool-result", "tool_call_id": call_id, "tool_name": name, "result": result,
                      "is_error": error}  # fmt: skip
            self.add(thread, _message("tool", [answer], "tool"))
        self.add(thread, _message("assistant", [{"type": "text", "text": _text(rng, 10, 60)}], "model"))
        head, _ = self.heads[thread]
        inp, out = rng.randint(2_000, 20_000), rng.randint(100, 2_000)
        state = {
            "schema_version": 1, "run_id": run_id, "thread_id": thread, "status": "done", "step_index": 10,
            "usage": {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out, "requests": 10},
            "cost": round((inp * 0.15 + out * 0.6) / 1e6, 6), "history_revision_id": head, "suspended_on": None,
            "scratch": {}, "result": "done", "error": None, "created_at": started, "updated_at": self.clock,
            "agent": "worker", "pending": [], "approvals": approvals, "context": [], "context_depth": None,
            "output_retries": 0,
        }  # fmt: skip
        self.seq += 1
        self.conn.execute(
            "INSERT INTO runs (run_id, thread_id, status, updated_at, write_seq, token, state) "
            "VALUES (?, ?, 'done', ?, ?, NULL, ?)",
            (run_id, thread, self.clock, self.clock * 1000 + self.seq, json.dumps(state)),
        )
        turn = {
            "submission_id": sub_id, "session_id": thread, "seq": 0, "kind": "message", "message": json.loads(user),
            "status": "done", "run_id": run_id, "output_type": None, "error": None, "created_at": started,
            "updated_at": self.clock,
        }  # fmt: skip
        seq = self.conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM turns WHERE session_id = ?", (thread,))
        turn["seq"] = seq.fetchone()[0]
        self.conn.execute(
            "INSERT INTO turns (submission_id, session_id, seq, status, record) VALUES (?, ?, ?, ?, ?)",
            (sub_id, thread, turn["seq"], "done", json.dumps(turn)),
        )
        last = self.conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?", (thread,)).fetchone()
        self.conn.executemany(
            "INSERT INTO events (session_id, seq, submission_id, type, at, data) VALUES (?, ?, ?, ?, ?, ?)",
            [
                (thread, last[0] + i + 1, sub_id, kind, started + i, json.dumps({"run_id": run_id}))
                for i, kind in enumerate(("turn.started", "approval.requested", "turn.completed"))
            ],
        )

    def flush(self) -> None:
        self.conn.executemany("INSERT INTO history_entries (id, created_at, message) VALUES (?, ?, ?)", self.entries)
        self.conn.executemany(
            "INSERT INTO history_revisions (id, parent_id, entry_id, depth, created_at) VALUES (?, ?, ?, ?, ?)",
            self.revisions,
        )
        self.entries, self.revisions = [], []
        for thread in self.dirty:
            head = self.heads[thread][0]
            self.conn.execute(
                "INSERT INTO threads (thread_id, head, created_at, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (thread_id) DO UPDATE SET head = excluded.head, updated_at = excluded.updated_at",
                (thread, head, _T0, self.clock),
            )
        self.dirty.clear()


def build(path: Path, entries: int) -> tuple[list[str], float]:
    """Fill a fresh store with ``entries`` history entries; returns the tree roots and the seconds taken."""
    started = time.perf_counter()
    asyncio.run(_create(path))
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    b = Builder(conn)
    per_thread_turns = 10
    roots: list[str] = []
    conn.execute("BEGIN")
    while b.count < entries:
        root = new_id()
        roots.append(root)
        b.session(root, root, None, "root", None, 0)
        children = [new_id() for _ in range(3)]
        for child in children:
            b.session(child, root, root, "spawned", None, 0)
        for _ in range(per_thread_turns // 2):
            b.turn(root)
        fork = new_id()
        b.session(fork, root, root, "forked", b.heads[root][0], b.heads[root][1])
        for thread in [root, *children]:
            for _ in range(per_thread_turns // (2 if thread == root else 1)):
                b.turn(thread)
        for _ in range(per_thread_turns // 2):
            b.turn(fork)
        if len(b.entries) > 50_000:
            b.flush()
    b.flush()
    conn.execute("COMMIT")
    conn.close()
    return roots, time.perf_counter() - started


async def _create(path: Path) -> None:
    store = await SqliteSessionStore.open(path)
    await store.close()


def grow(path: Path, fraction: float) -> int:
    """Add turns to existing threads until ``fraction`` more entries exist; returns entries added."""
    conn = sqlite3.connect(path, isolation_level=None)
    b = Builder(conn, seed=11)
    b.clock = conn.execute("SELECT MAX(updated_at) FROM threads").fetchone()[0] + 1
    total = conn.execute("SELECT COUNT(*) FROM history_entries").fetchone()[0]
    threads = conn.execute(
        "SELECT t.thread_id, t.head, r.depth FROM threads t JOIN history_revisions r ON r.id = t.head"
    )
    for tid, head, depth in threads.fetchall():
        b.heads[tid] = (head, depth)
    conn.execute("BEGIN")
    ids = list(b.heads)
    while b.count < total * fraction:
        b.turn(b.rng.choice(ids))
    b.flush()
    conn.execute("COMMIT")
    conn.close()
    return b.count


async def _export(db: Path, out: Path) -> Any:
    store = await SqliteSessionStore.open(db)
    try:
        return await export_parquet(store, out)
    finally:
        await store.close()


def run(entries: int, mode: str, keep: Path | None = None, report_path: Path = RESULTS) -> dict[str, Any]:
    """Build a store of ``entries`` history entries, export it three times, query it; write ``report_path``."""
    load_before = list(os.getloadavg())
    work = keep or Path(tempfile.mkdtemp(prefix="repertory-export-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    db, out = work / "fleet.db", work / "export"
    for stale in (db, out):
        shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(missing_ok=True)
    try:
        roots, build_s = build(db, entries)
        print(f"built {entries:,} entries in {build_s:.1f}s ({db.stat().st_size / 1e6:.0f} MB)", flush=True)
        first = asyncio.run(_export(db, out))
        added = grow(db, 0.01)
        second = asyncio.run(_export(db, out))
        third = asyncio.run(_export(db, out))
        t = time.perf_counter()
        con = connect(out)
        connect_s = time.perf_counter() - t
        root = roots[len(roots) // 2]
        t = time.perf_counter()
        usage = con.execute("SELECT * FROM tree_usage(?)", [root]).fetchall()
        cold_s = time.perf_counter() - t
        t = time.perf_counter()
        con.execute("SELECT * FROM tree_usage(?)", [root]).fetchall()
        warm_s = time.perf_counter() - t
        t = time.perf_counter()
        msgs = con.execute("SELECT count(*) FROM thread_messages(?)", [root]).fetchone()
        thread_messages_s = time.perf_counter() - t
        counts = {name: con.execute(f"SELECT count(*) FROM {name}").fetchone()[0] for name in first.tables}
        out_bytes = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)

    def export_figures(report: Any) -> dict[str, Any]:
        return {
            "elapsed_s": round(report.elapsed_s, 3),
            "rows": report.rows,
            "rows_per_s": round(report.rows_per_s),
            "entries": report.tables["entries"].rows,
            "entries_per_s": round(report.tables["entries"].rows / report.elapsed_s) if report.elapsed_s else None,
            "per_table": {k: v.rows for k, v in report.tables.items()},
        }

    result = {
        "benchmark": "export",
        "mode": mode,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "cpu_count": os.cpu_count(),
            "sqlite_version": sqlite3.sqlite_version,
            "pyarrow": pyarrow.__version__,
            "duckdb": duckdb.__version__,
            "load_average_before": load_before,
            "load_average_after": list(os.getloadavg()),
        },
        "store": {"entries": entries, "trees": len(roots), "build_s": round(build_s, 1)},
        "first_export": export_figures(first),
        "incremental_export": {**export_figures(second), "entries_added": added},
        "unchanged_export": export_figures(third),
        "tree_usage": {
            "connect_s": round(connect_s, 3),
            "cold_s": round(cold_s, 3),
            "warm_s": round(warm_s, 3),
            "result": [list(r) for r in usage],
        },
        "thread_messages_s": round(thread_messages_s, 3),
        "thread_messages_rows": msgs[0] if msgs else 0,
        "view_rows": counts,
        "export_bytes": out_bytes,
        "targets": {"first_export_rows_per_s": TARGET_ROWS_PER_S, "tree_usage_s": TARGET_TREE_USAGE_S},
    }
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(json.dumps(result, indent=2) + "\n")
    f, i, u = result["first_export"], result["incremental_export"], result["unchanged_export"]
    print(f"{'figure':<34}{'value':>16}  target")
    print(f"{'first export rows/s (all tables)':<34}{f['rows_per_s']:>16,}  >= {TARGET_ROWS_PER_S:,}")
    print(f"{'first export entries/s':<34}{f['entries_per_s']:>16,}")
    print(f"{'first export':<34}{f['elapsed_s']:>15.2f}s  ({f['rows']:,} rows)")
    print(f"{'incremental export (+1%)':<34}{i['elapsed_s']:>15.2f}s  ({i['rows']:,} rows)")
    print(f"{'unchanged export':<34}{u['elapsed_s']:>15.2f}s  ({u['rows']:,} rows)")
    print(f"{'tree_usage cold (after connect)':<34}{cold_s:>15.3f}s  < {TARGET_TREE_USAGE_S} s")
    print(f"{'tree_usage warm':<34}{warm_s:>15.3f}s")
    print(f"{'connect':<34}{connect_s:>15.3f}s")
    print(f"load average before/after: {load_before[0]:.2f} / {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
    print(f"wrote {report_path}")
    return result


def run_suite(quick: bool, out_dir: Path = RESULTS.parent, peers: bool = True) -> dict[str, Any]:
    """The suite's entry (``python -m benchmarks``): measure, print, write ``out_dir/export.json``.

    ``quick`` is the suite's smoke size: 5,000 entries (a second), not the 100,000 of ``--quick``.
    """
    if quick:
        return run(5_000, "smoke", report_path=out_dir / "export.json")
    return run(1_000_000, "full", report_path=out_dir / "export.json")


def main() -> None:
    """Parse arguments, measure, print the table and write the JSON report."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100,000 entries instead of 1,000,000")
    parser.add_argument("--entries", type=int, default=None)
    parser.add_argument("--keep", type=Path, default=None, help="build the store and export in this folder")
    args = parser.parse_args()
    entries = args.entries or (100_000 if args.quick else 1_000_000)
    run(entries, "quick" if args.quick else "full", args.keep)


if __name__ == "__main__":
    main()
