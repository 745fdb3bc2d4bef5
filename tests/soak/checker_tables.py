"""The checker's own reading of a store and of its Parquet export: plain SQL and plain Parquet files.

The chaos checker must not trust the code it checks, so nothing here goes through repertory's
store classes, its export readers or its records: a store is read with ``sqlite3`` (a
``sqlite://`` URL or a plain path) or ``psycopg`` (``postgresql://``), table by table, into plain
tuples and decoded JSON; an export folder is read with ``pyarrow`` from the part files its
watermarks declare complete, keeping each row's latest generation by the table's key. The table
and column names are the stores' schemas (``repertory/storage/sqlite/schema.py`` and
``repertory/storage/postgres/schema.py``, the same tables and columns in both) and the export's
documented contract (``docs/guides/analytics.md``).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq  # type: ignore[import-untyped]

__all__ = ["EXPORT_KEYS", "Revision", "RunRow", "StoreTables", "TurnRow", "read_export", "read_store", "sqlite_path"]

EXPORT_KEYS: dict[str, tuple[str, ...]] = {
    "sessions": ("session_id",),
    "threads": ("thread_id",),
    "runs": ("run_id",),
    "entries": ("entry_id",),
    "revisions": ("revision_id",),
    "turns": ("submission_id",),
    "events": ("session_id", "seq"),
    "messages": ("thread_id", "position"),
    "tool_calls": ("thread_id", "call_entry_id", "tool_call_id"),
}
"""Each exported table's identifying columns (a later generation of a key replaces the earlier row)."""


@dataclass(frozen=True, slots=True)
class Revision:
    """One ``history_revisions`` row: a parent pointer, the entry it adds, its depth, the thread that wrote it."""

    parent_id: str | None
    entry_id: str
    depth: int
    thread_id: str | None


@dataclass(frozen=True, slots=True)
class RunRow:
    """One ``runs`` row: the plain columns and the decoded ``state`` JSON."""

    thread_id: str
    status: str
    token: str | None
    state: dict[str, Any]


@dataclass(frozen=True, slots=True)
class TurnRow:
    """One ``turns`` row: the plain columns and the decoded ``record`` JSON."""

    session_id: str
    seq: int
    status: str
    record: dict[str, Any]


@dataclass(slots=True)
class StoreTables:
    """Every table the checks read, whole, as the store holds it after the run."""

    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    session_parents: dict[str, str | None] = field(default_factory=dict)
    threads: dict[str, str | None] = field(default_factory=dict)
    runs: dict[str, RunRow] = field(default_factory=dict)
    entries: dict[str, str] = field(default_factory=dict)
    revisions: dict[str, Revision] = field(default_factory=dict)
    turns: dict[str, TurnRow] = field(default_factory=dict)
    events: list[tuple[str, int, str | None, str, int, str]] = field(default_factory=list)


def sqlite_path(url: str) -> str | None:
    """The file of a SQLite store URL (``sqlite:///rel``, ``sqlite:////abs``, a plain path); None for PostgreSQL."""
    if url.startswith(("postgresql://", "postgres://")):
        return None
    if url.startswith("sqlite://"):
        rest = url[len("sqlite://") :].split("?", 1)[0]
        return rest[1:] if rest.startswith("/") else rest
    return url


def _rows_sqlite(path: str, sql: dict[str, str]) -> dict[str, list[tuple[Any, ...]]]:
    # Read-only, so a checker never creates a file or takes the write lock of a live store.
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        conn.execute("BEGIN")  # one read transaction: every table from the same snapshot
        return {name: conn.execute(q.format(p="")).fetchall() for name, q in sql.items()}
    finally:
        conn.close()


def _rows_postgres(url: str, sql: dict[str, str]) -> dict[str, list[tuple[Any, ...]]]:
    import psycopg

    with psycopg.connect(url, autocommit=False) as conn:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        out: dict[str, list[tuple[Any, ...]]] = {}
        for name, q in sql.items():
            out[name] = [tuple(r) for r in conn.execute(q.format(p="repertory.")).fetchall()]
        return out


_SQL = {
    "sessions": "SELECT session_id, parent_id, record FROM {p}sessions",
    "threads": "SELECT thread_id, head FROM {p}threads",
    "runs": "SELECT run_id, thread_id, status, token, state FROM {p}runs",
    "entries": "SELECT id, message FROM {p}history_entries",
    "revisions": "SELECT id, parent_id, entry_id, depth, thread_id FROM {p}history_revisions",
    "turns": "SELECT submission_id, session_id, seq, status, record FROM {p}turns",
    "events": "SELECT session_id, seq, submission_id, type, at, data FROM {p}events",
}


def read_store(url: str) -> StoreTables:
    """Every row of the tables the checks need, read in one snapshot."""
    path = sqlite_path(url)
    rows = _rows_postgres(url, _SQL) if path is None else _rows_sqlite(path, _SQL)
    out = StoreTables()
    for sid, parent, record in rows["sessions"]:
        out.sessions[sid] = json.loads(record)
        out.session_parents[sid] = parent
    out.threads = {tid: head for tid, head in rows["threads"]}
    for rid, tid, status, token, state in rows["runs"]:
        out.runs[rid] = RunRow(tid, status, token, json.loads(state))
    out.entries = {eid: message for eid, message in rows["entries"]}
    out.revisions = {
        rid: Revision(parent, entry, int(depth), writer) for rid, parent, entry, depth, writer in rows["revisions"]
    }
    for sub, sid, seq, status, record in rows["turns"]:
        out.turns[sub] = TurnRow(sid, int(seq), status, json.loads(record))
    out.events = [(sid, int(seq), sub, typ, int(at), data) for sid, seq, sub, typ, at, data in rows["events"]]
    return out


def _committed_parts(folder: Path) -> list[Path]:
    """The part files of one table up to its watermark's generation (a half-written one is never read)."""
    mark = folder / "_watermark.json"
    if not mark.exists():
        return []
    generation = int(json.loads(mark.read_text())["generation"])
    parts = []
    for part in sorted(folder.glob("part-*.parquet")):
        if int(part.stem.split("-", 1)[1]) <= generation:
            parts.append(part)
    return parts


def read_export(export_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Each exported table's rows, latest generation per key; a table never exported is absent."""
    out: dict[str, list[dict[str, Any]]] = {}
    for table, key in EXPORT_KEYS.items():
        folder = export_dir / table
        if not folder.is_dir():
            continue
        latest: dict[tuple[Any, ...], dict[str, Any]] = {}
        for part in _committed_parts(folder):
            for row in pq.read_table(part).to_pylist():
                k = tuple(row[c] for c in key)
                held = latest.get(k)
                if held is None or row["export_generation"] >= held["export_generation"]:
                    latest[k] = row
        out[table] = list(latest.values())
    return out
