"""Export: Parquet export throughput over a store of 1,000,000 history entries, and ``tree_usage``.

Targets: a first export of at least 300,000 rows/s, ``tree_usage`` under 1 s. The store is a SQLite
file filled with direct inserts (the engine would take minutes to write a million messages; the
export reads rows, so how they got there does not matter). Its shape is a fleet: trees of an
orchestrator session with three spawned children and one fork of the orchestrator (forked half-way,
so it shares half its parent's history). Every thread is a run of turns of 20 messages: a user
message, nine tool calls each followed by its result (one call per turn needs approval, one in ten
results is an error), and a final reply. One run, one turn and three events (turn.started,
approval.requested, turn.completed) per turn. Messages are ~150-400 bytes of JSON. Measured once:

- the first export: everything (the base tables plus the derived ``messages``, one row per message
  per thread lineage, so a fork's shared half counts again, and ``tool_calls``); rows/s counts every
  row written to every table, entries/s history entries only;
- incremental: after 1% more turns are added to existing threads, and after no change at all;
- ``tree_usage``: ``repertory.analytics.connect`` then ``SELECT * FROM tree_usage(root)``, cold (first
  query, Parquet files read) and warm; ``thread_messages`` of the same root; the rows every view holds.

``python -m benchmarks.export [--quick] [--entries N] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.command import Options, main
from benchmarks.harness.figures import Figures, Target
from repertory.analytics import connect
from repertory.core.ids import new_id
from repertory.storage.export import ExportReport, export_parquet
from repertory.storage.sqlite.store import SqliteSessionStore

ENTRIES = {"full": 1_000_000, "quick": 5_000}

TURN = 20  # messages per turn
T0 = 1_780_000_000_000
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar".split()


def _text(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(lo, hi)))


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
        self.clock = T0
        self.seq = 0
        self.entries: list[tuple[str, int, str]] = []
        self.revisions: list[tuple[str, str | None, str, int, int]] = []
        self.heads: dict[str, tuple[str | None, int]] = {}
        self.dirty: set[str] = set()
        self.count = 0

    def tick(self, ms: int = 1) -> int:
        """Move the fleet's clock on by ``ms`` and return it."""
        self.clock += ms
        return self.clock

    def add(self, thread: str, message: str) -> None:
        """Append one message (its JSON) to a thread's history."""
        head, depth = self.heads[thread]
        eid, rid, at = new_id(), new_id(), self.tick()
        self.entries.append((eid, at, message))
        self.revisions.append((rid, head, eid, depth + 1, at))
        self.heads[thread] = (rid, depth + 1)
        self.dirty.add(thread)
        self.count += 1

    def session(self, sid: str, root: str, parent: str | None, kind: str, head: str | None, depth: int) -> None:
        """Insert a session row (a root, a spawned child or a fork at ``head``)."""
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
        """One turn of 20 messages on ``thread``, with its run, turn row and three events."""
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
        """Insert the pending history rows and move the dirty threads' heads."""
        # Entry rows of their own, as the first commit of a thread writes them (``sqlite._history``).
        self.conn.executemany("INSERT INTO history_entry_rows (id, created_at, message) VALUES (?, ?, ?)", self.entries)
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
                (thread, head, T0, self.clock),
            )
        self.dirty.clear()


async def _build(path: Path, entries: int) -> tuple[list[str], float]:
    """Fill a fresh store with ``entries`` history entries; the tree roots and the seconds taken."""
    started = time.perf_counter()
    await (await SqliteSessionStore.open(path)).close()  # the schema
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


def _grow(path: Path, fraction: float) -> int:
    """Add turns to existing threads until ``fraction`` more entries exist; the entries added."""
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


async def _export(figures: Figures, label: str, db: Path, out: Path, entries: int) -> ExportReport:
    """One export of the store into ``out`` (what changed since the last one, if any), its figures."""
    store = await SqliteSessionStore.open(db)
    try:
        export = await export_parquet(store, out)
    finally:
        await store.close()
    first = label == "first"
    written = export.tables["entries"].rows
    figures.time(f"{label} export", export.elapsed_s, note=f"{export.rows:,} rows, {written:,} history entries")
    figures.value(f"Parquet export, {label}, {entries:,} history entries", export.rows_per_s, "rows/s",
                  target=Target(300_000, at_most=False) if first else None,
                  note="every row written to every table")  # fmt: skip
    figures.value(f"{label} export: history entries/s", written / export.elapsed_s, "entries/s")
    figures.count(f"{label} export: rows written", export.rows)
    figures.fact(f"{label} export's rows", ", ".join(f"{k} {v.rows:,}" for k, v in export.tables.items()))
    return export


async def scenario(figures: Figures, options: Options) -> None:
    """Build the fleet, export it three times, query the export with DuckDB."""
    entries = options.args.entries or ENTRIES[options.mode]
    keep: Path | None = options.args.keep
    work = keep or Path(tempfile.mkdtemp(prefix="repertory-export-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    db, out = work / "fleet.db", work / "export"
    shutil.rmtree(out, ignore_errors=True)
    db.unlink(missing_ok=True)
    try:
        roots, build_s = await _build(db, entries)
        figures.time(f"building the store of {entries:,} history entries", build_s,
                     note=f"{len(roots):,} trees, direct inserts")  # fmt: skip
        figures.size("the store's SQLite file", db.stat().st_size)
        first = await _export(figures, "first", db, out, entries)
        figures.count("history entries added (+1%)", _grow(db, 0.01))
        await _export(figures, "incremental (+1%)", db, out, entries)
        await _export(figures, "unchanged", db, out, entries)
        started = time.perf_counter()
        con = connect(out)
        figures.time("analytics connect()", time.perf_counter() - started)
        root = roots[len(roots) // 2]
        usage: list[Any] = []
        for state in ("cold", "warm"):
            started = time.perf_counter()
            usage = con.execute("SELECT * FROM tree_usage(?)", [root]).fetchall()
            figures.time(f"tree_usage(root) over that export, {state}", time.perf_counter() - started,
                         target=Target(1.0) if state == "cold" else None)  # fmt: skip
        figures.fact("tree_usage(root)", json.dumps([list(r) for r in usage], default=str))
        started = time.perf_counter()
        msgs = con.execute("SELECT count(*) FROM thread_messages(?)", [root]).fetchone()
        figures.time("thread_messages(root)", time.perf_counter() - started, note=f"{msgs[0] if msgs else 0} rows")
        views = {name: con.execute(f"SELECT count(*) FROM {name}").fetchone() for name in first.tables}
        figures.fact("rows per view", ", ".join(f"{k} {v[0] if v else 0:,}" for k, v in views.items()))
        figures.size("the export's Parquet files", sum(p.stat().st_size for p in out.rglob("*") if p.is_file()))
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)


def _args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--entries", type=int, default=None, help="history entries in the store")
    parser.add_argument("--keep", type=Path, default=None, help="build the store and export in this folder")


if __name__ == "__main__":
    main("export", __doc__, scenario=scenario, add_args=_args)
