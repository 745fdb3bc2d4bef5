"""The exported tables: their Arrow schemas, keys, and whether a row can change after it is written.

These schemas are the stable contract of the export (documented in docs/guides/analytics.md): a column
is never renamed or retyped, only added. Timestamps stay epoch milliseconds (``int64``), as in
every repertory record, so a value read from Parquet equals the value in the store; DuckDB's
``epoch_ms(x)`` turns one into a timestamp. JSON documents (messages, run state, tool arguments
and results) are JSON text columns, so no reader has to agree on a nested type for them.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa  # type: ignore[import-untyped]

__all__ = ["BASE_TABLES", "DERIVED_TABLES", "TABLES", "TableSpec"]

_S = pa.string()
_I = pa.int64()

GENERATION = pa.field("export_generation", _I, nullable=False)


@dataclass(frozen=True, slots=True)
class TableSpec:
    """One exported table: its schema, the columns that identify a row, and whether rows change.

    A row of a ``mutable`` table may be exported again in a later generation with new values;
    readers keep the version with the highest ``export_generation`` per ``key`` (the views of
    ``repertory.analytics`` do). Rows of an immutable table are exported exactly once.
    """

    name: str
    schema: pa.Schema
    key: tuple[str, ...]
    mutable: bool


def _schema(*fields: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([pa.field(n, t) for n, t in fields] + [GENERATION])


SESSIONS = TableSpec(
    "sessions",
    _schema(
        ("session_id", _S), ("parent_id", _S), ("root_id", _S), ("lineage_kind", _S),
        ("forked_at_revision_id", _S), ("agent", _S), ("title", _S), ("model", _S), ("cwd", _S),
        ("created_at", _I), ("updated_at", _I), ("record", _S),
    ),
    ("session_id",),
    True,
)  # fmt: skip

THREADS = TableSpec(
    "threads",
    _schema(("thread_id", _S), ("head_revision_id", _S), ("depth", _I), ("created_at", _I), ("updated_at", _I)),
    ("thread_id",),
    True,
)

RUNS = TableSpec(
    "runs",
    _schema(
        ("run_id", _S), ("thread_id", _S), ("status", _S), ("agent", _S), ("step_index", _I),
        ("input_tokens", _I), ("output_tokens", _I), ("total_tokens", _I), ("requests", _I),
        ("cache_read_tokens", _I), ("cache_write_tokens", _I), ("cost", pa.float64()),
        ("history_revision_id", _S), ("suspended_kind", _S), ("suspended_reason", _S),
        ("suspended_tool_call_id", _S), ("result", _S), ("error_type", _S), ("error_message", _S),
        ("created_at", _I), ("updated_at", _I), ("state", _S),
    ),
    ("run_id",),
    True,
)  # fmt: skip

ENTRIES = TableSpec(
    "entries",
    _schema(("entry_id", _S), ("created_at", _I), ("message", _S)),
    ("entry_id",),
    False,
)

REVISIONS = TableSpec(
    "revisions",
    _schema(("revision_id", _S), ("parent_id", _S), ("entry_id", _S), ("depth", _I), ("created_at", _I)),
    ("revision_id",),
    False,
)

TURNS = TableSpec(
    "turns",
    _schema(
        ("submission_id", _S), ("session_id", _S), ("seq", _I), ("kind", _S), ("status", _S), ("run_id", _S),
        ("output_type", _S), ("role", _S), ("text", _S), ("message", _S), ("error_type", _S),
        ("error_message", _S), ("created_at", _I), ("updated_at", _I),
    ),
    ("submission_id",),
    True,
)  # fmt: skip

EVENTS = TableSpec(
    "events",
    _schema(("session_id", _S), ("seq", _I), ("submission_id", _S), ("type", _S), ("at", _I), ("data", _S)),
    ("session_id", "seq"),
    False,
)

MESSAGES = TableSpec(
    "messages",
    _schema(
        ("thread_id", _S), ("position", _I), ("revision_id", _S), ("entry_id", _S), ("created_at", _I),
        ("role", _S), ("origin_kind", _S), ("origin_id", _S), ("model", _S), ("text", _S), ("tool_names", pa.list_(_S)),
        ("tool_call_ids", pa.list_(_S)), ("tokens", _I), ("boundary", pa.bool_()),
    ),
    ("thread_id", "position"),
    True,
)  # fmt: skip

TOOL_CALLS = TableSpec(
    "tool_calls",
    _schema(
        ("tool_call_id", _S), ("thread_id", _S), ("run_id", _S), ("call_entry_id", _S), ("position", _I),
        ("tool_name", _S), ("args", _S), ("called_at", _I), ("result", _S), ("is_error", pa.bool_()),
        ("result_at", _I), ("latency_ms", _I), ("approval_decision", _S), ("approval_requested_at", _I),
        ("approval_decided_at", _I), ("approval_wait_ms", _I), ("approval_reason", _S),
        ("approval_decided_by", _S), ("args_replaced", pa.bool_()), ("child_session_id", _S),
        ("child_submission_id", _S),
    ),
    ("thread_id", "call_entry_id", "tool_call_id"),
    True,
)  # fmt: skip

BASE_TABLES: tuple[TableSpec, ...] = (SESSIONS, THREADS, RUNS, ENTRIES, REVISIONS, TURNS, EVENTS)
"""The store's own tables, in the order they are exported."""

DERIVED_TABLES: tuple[TableSpec, ...] = (MESSAGES, TOOL_CALLS)
"""Tables computed from the store's tables (one row per message per thread; one per tool call)."""

TABLES: dict[str, TableSpec] = {t.name: t for t in BASE_TABLES + DERIVED_TABLES}
