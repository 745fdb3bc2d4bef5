"""The raw ``sqlite3`` floor of the store benchmark: the store's own schema, statements and pragmas, no repertory.

One ``BEGIN IMMEDIATE``/``COMMIT`` per iteration, ids and JSON prepared before the clock starts:
whatever repertory adds on top is the ratio. A second flavour adds the store's two guard reads
(thread head, run status), which separates the cost of the compare-and-set from the cost of Python
around the statements. The statements are the store's own public ones (``UPSERT_RUN``, ...), so the
loop cannot silently drift from what the store runs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness.commits import EngineSession
from repertory.core.ids import new_id, now_ms
from repertory.core.messages import ModelMessage
from repertory.core.state import RunState
from repertory.storage.sqlite.schema import ensure_schema
from repertory.storage.sqlite.store import (
    INSERT_REVISIONS,
    UPSERT_RUN,
    UPSERT_THREAD,
    Durability,
    run_row,
)

__all__ = ["INSERT_REVISION", "RawWriter", "connect_raw"]

INSERT_REVISION = INSERT_REVISIONS  # with its writer thread and its message, as the store writes a step


def connect_raw(path: Path, durability: Durability) -> sqlite3.Connection:
    """A plain connection with the store's pragmas and schema: the raw loop's fair starting point."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 10000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA journal_size_limit = 67108864")
    conn.execute(f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}")
    ensure_schema(conn, str(path))
    return conn


@dataclass
class RawWriter:
    """The raw loop's state: one run and thread, rows built before the clock starts."""

    conn: sqlite3.Connection
    guard_reads: bool
    run: RunState = field(default_factory=lambda: EngineSession.new().run)
    head: str | None = None
    depth: int = 0

    def prepare(self, messages: Sequence[ModelMessage]) -> list[tuple[Any, ...]]:
        """Ids, timestamps and JSON for ``len(messages)`` commits, so the timed loop is statements only."""
        rows: list[tuple[Any, ...]] = []
        parent, depth, at = self.head, self.depth, now_ms()
        run = run_row(self.run)  # the store's own run row (same columns, same JSON size)
        thread_id = self.run.thread_id
        for message in messages:
            entry_id, revision_id = new_id(), new_id()
            depth += 1
            rows.append(
                (
                    parent,
                    (revision_id, parent, entry_id, depth, at, thread_id, at, message.model_dump_json()),
                    run,
                    (thread_id, revision_id, at, at),
                )
            )
            parent = revision_id
        self.head, self.depth = parent, depth
        return rows

    def commit_all(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """One ``BEGIN IMMEDIATE``/``COMMIT`` per row, as the store does per ``commit_session``."""
        conn, run_id, thread_id = self.conn, self.run.run_id, self.run.thread_id
        for base, revision, run, thread in rows:
            conn.execute("BEGIN IMMEDIATE")
            if self.guard_reads:
                head = conn.execute("SELECT head FROM threads WHERE thread_id = ?", (thread_id,)).fetchone()
                conn.execute("SELECT status, token FROM runs WHERE run_id = ?", (run_id,)).fetchone()
                if head is not None and head[0] != base:
                    raise RuntimeError("raw loop: thread head moved")
            conn.execute(INSERT_REVISION, revision)
            conn.execute(UPSERT_RUN, run)
            conn.execute(UPSERT_THREAD, thread)
            conn.execute("COMMIT")
