"""The exported store: a fleet of session trees written straight into the store's tables.

The engine would take minutes to write a million messages, and the export reads rows, so how they
got there does not matter: ``Builder`` inserts sessions, history, runs, turns and events directly,
one transaction per batch (see ``benchmarks.export`` for the fleet's shape).
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import time
from pathlib import Path
from typing import Any

from repertory.core.ids import new_id
from repertory.storage.sqlite.store import SqliteSessionStore

__all__ = ["Builder", "build", "grow"]

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
