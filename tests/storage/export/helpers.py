"""Reading an export back, independently of ``repertory.analytics``, for the tests to compare."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from repertory import ModelMessage, SessionHandle
from repertory.storage import TreeStore
from repertory.storage.export import TABLES
from tests.testing.conformance.probes import history_row_counts

__all__ = ["message_view", "store_counts", "table_rows", "view_rows"]


async def store_counts(store: TreeStore, sessions: list[SessionHandle]) -> dict[str, int]:
    """Rows per base table, read through the store's own API (and its row-count probe for history)."""
    entries, revisions = await history_row_counts(store)
    turns = events = threads = 0
    for h in sessions:
        turns += len(await store.list_turns(h.id))
        events += await store.last_event_seq(h.id)
        threads += await store.load_thread(h.id) is not None
    return {
        "sessions": len(sessions),
        "threads": threads,
        "runs": len(await store.list_runs()),
        "entries": entries,
        "revisions": revisions,
        "turns": turns,
        "events": events,
    }


def message_view(m: ModelMessage) -> dict[str, Any]:
    """The columns ``messages`` derives from a message, computed from the message itself."""
    names = [p.tool_name for p in m.parts if getattr(p, "tool_name", None) is not None]  # type: ignore[union-attr]
    return {
        "role": m.role,
        "origin_kind": None if m.origin is None else m.origin.kind,
        "text": m.text,
        "tool_names": names,
    }


def table_rows(out: Path, table: str) -> list[dict[str, Any]]:
    """Every row of every part file of ``table``, read by pyarrow alone."""
    folder = out / table
    if not folder.is_dir() or not any(folder.glob("part-*.parquet")):
        return []
    data = pq.read_table(folder)
    assert data.schema.remove_metadata().equals(TABLES[table].schema), (table, data.schema)
    rows: list[dict[str, Any]] = data.to_pylist()
    return rows


def view_rows(con: duckdb.DuckDBPyConnection, table: str, order: str) -> list[tuple[Any, ...]]:
    """A view's rows without ``export_generation``, as JSON-comparable tuples in a stable order."""
    rel = con.sql(f"SELECT * EXCLUDE (export_generation) FROM {table} ORDER BY {order}")
    return [tuple(json.dumps(v, sort_keys=True, default=str) for v in row) for row in rel.fetchall()]
