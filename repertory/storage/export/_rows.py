"""Canonical raw rows (as every reader yields them) to Arrow batches in the exported schemas.

This is also where the one rule that must never break is enforced: a resume token never leaves
the store. Readers never select the ``token`` column, and a run's state loses
``suspended_on.token`` here, before anything else sees it.

Plain columns go straight into Arrow arrays. Records kept as JSON (sessions, runs, turns) are
decoded by DuckDB's ``json_transform``, several times faster than ``json.loads`` row by row, and
tolerant: a field a newer repertory added is ignored, a missing one is null, so an export never
fails on a record's shape.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import duckdb
import pyarrow as pa  # type: ignore[import-untyped]

from repertory.storage.export._readers import RawRow
from repertory.storage.export._schema import TABLES

__all__ = ["Converter", "fingerprint", "row_key", "strip_tokens"]

_TEXT = "array_to_string(list_transform(list_filter({parts}, lambda p: p.type = 'text'), lambda p: p.text), '')"

_RECORD_SQL = {
    "sessions": """
        SELECT k, s.lineage.parent_id, s.root_id, s.lineage.kind, s.lineage.forked_at_revision_id, s.agent, s.title,
               s.model, s.cwd, s.created_at, s.updated_at, j, CAST($gen AS BIGINT)
        FROM (SELECT k, j, json_transform(j, '{"lineage":{"kind":"VARCHAR","parent_id":"VARCHAR",
              "forked_at_revision_id":"VARCHAR"},"root_id":"VARCHAR","agent":"VARCHAR","title":"VARCHAR",
              "model":"VARCHAR","cwd":"VARCHAR","created_at":"BIGINT","updated_at":"BIGINT"}') AS s FROM raw)
    """,
    "runs": """
        SELECT k, s.thread_id, s.status, s.agent, s.step_index, s.usage.input_tokens, s.usage.output_tokens,
               s.usage.total_tokens, s.usage.requests, s.usage.cache_read_tokens, s.usage.cache_write_tokens,
               s.cost, s.history_revision_id, s.suspended_on.kind, s.suspended_on.reason, s.suspended_on.tool_call_id,
               CAST(s.result AS VARCHAR), s.error.type, s.error.message, s.created_at, s.updated_at, j,
               CAST($gen AS BIGINT)
        FROM (SELECT k, j, json_transform(j, '{"thread_id":"VARCHAR","status":"VARCHAR","agent":"VARCHAR",
              "step_index":"BIGINT","usage":{"input_tokens":"BIGINT","output_tokens":"BIGINT",
              "total_tokens":"BIGINT","requests":"BIGINT","cache_read_tokens":"BIGINT",
              "cache_write_tokens":"BIGINT"},"cost":"DOUBLE","history_revision_id":"VARCHAR",
              "suspended_on":{"kind":"VARCHAR","reason":"VARCHAR","tool_call_id":"VARCHAR"},"result":"JSON",
              "error":{"type":"VARCHAR","message":"VARCHAR"},"created_at":"BIGINT","updated_at":"BIGINT"}') AS s
              FROM raw)
    """,
    "turns": f"""
        SELECT k, s.session_id, s.seq, s.kind, s.status, s.run_id, s.output_type, s.message.role,
               {_TEXT.format(parts="s.message.parts")}, CAST(json_extract(j, '$.message') AS VARCHAR),
               s.error.type, s.error.message, s.created_at, s.updated_at, CAST($gen AS BIGINT)
        FROM (SELECT k, j, json_transform(j, '{{"session_id":"VARCHAR","seq":"BIGINT","kind":"VARCHAR",
              "status":"VARCHAR","run_id":"VARCHAR","output_type":"VARCHAR","message":{{"role":"VARCHAR",
              "parts":[{{"type":"VARCHAR","text":"VARCHAR"}}]}},"error":{{"type":"VARCHAR","message":"VARCHAR"}},
              "created_at":"BIGINT","updated_at":"BIGINT"}}') AS s FROM raw)
    """,
}
_RAW_SCHEMA = pa.schema([("k", pa.string()), ("j", pa.string())])


def row_key(table: str, row: RawRow) -> str:
    """The identity of a raw row (events: session and seq; every other table: its first column)."""
    return f"{row[0]}\x1f{row[1]}" if table == "events" else str(row[0])


def fingerprint(row: RawRow) -> str:
    """A short digest of a raw row's content: equal digests mean the row did not change."""
    return hashlib.blake2b(repr(row).encode(), digest_size=8).hexdigest()


def strip_tokens(state: dict[str, Any]) -> dict[str, Any]:
    """A run state without its resume token (the only place a token lives in a record)."""
    suspended = state.get("suspended_on")
    if isinstance(suspended, dict) and "token" in suspended:
        state["suspended_on"] = {k: v for k, v in suspended.items() if k != "token"}
    return state


def _tokenless(raw: str) -> str:
    """A run's state JSON with ``suspended_on.token`` removed (parsed only when a token may be in it)."""
    if '"token"' not in raw:
        return raw
    return json.dumps(strip_tokens(json.loads(raw)), separators=(",", ":"), ensure_ascii=False)


class Converter:
    """Turns raw rows of one table into record batches; holds a DuckDB connection for JSON records."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.schema = TABLES[table].schema
        self._con: duckdb.DuckDBPyConnection | None = None

    def close(self) -> None:
        """Release the DuckDB connection, if one was opened."""
        if self._con is not None:
            self._con.close()
            self._con = None

    def __call__(self, rows: Sequence[RawRow], generation: int) -> pa.Table:
        """Raw rows as a table in the exported schema, stamped with ``generation``."""
        if self.table not in _RECORD_SQL:
            n = len(self.schema) - 1
            columns = list(zip(*rows, strict=True)) if rows else [()] * n
            arrays = [pa.array(col, type=f.type) for col, f in zip(columns, self.schema, strict=False)]
            arrays.append(pa.array([generation] * len(rows), type=pa.int64()))
            return pa.Table.from_arrays(arrays, schema=self.schema)
        keys = [r[0] for r in rows]
        docs = [_tokenless(r[1]) for r in rows] if self.table == "runs" else [r[1] for r in rows]
        raw = pa.Table.from_arrays([pa.array(keys, pa.string()), pa.array(docs, pa.string())], schema=_RAW_SCHEMA)
        if self._con is None:
            self._con = duckdb.connect()
        self._con.register("raw", raw)
        try:
            out = self._con.sql(_RECORD_SQL[self.table], params={"gen": generation}).to_arrow_table()
        finally:
            self._con.unregister("raw")
        return out.rename_columns(self.schema.names).cast(self.schema)
