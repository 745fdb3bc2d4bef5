"""The derived tables: ``messages`` (one row per message on each thread's lineage) and ``tool_calls``.

Both are computed incrementally from what changed since the last export:

1. **Lineage walk.** For every thread whose head moved, walk from the new head back to the head
   exported last time (or to the root, if the old head is not an ancestor). The walk runs in
   memory over the revisions this export just read (parent pointers resolved to row numbers by one
   DuckDB join, so the loop touches only integers), and asks the store (one recursive query) only
   where it leaves them: a fork's shared prefix, which older exports hold.
2. **Messages.** Each revision walked is a row ``(thread_id, position = depth - 1, ...)``. Messages
   are decoded by DuckDB straight from the entries part file this export just wrote (entries not in
   it are fetched by id), so no message is parsed in Python. A compaction's summary is a row like any
   other, ``boundary`` true; the messages it kept are re-added after it, so their rows move one
   position on (the key is the position, so the new rows replace the old).
3. **Tool calls.** A call is paired with the first result for it that follows it on the same
   thread. A revision belongs to the oldest thread that reached it when it was new, so a fork does
   not repeat its parent's calls; a row is written for a thread that owns the call or the result.
   Calls still waiting for a result are remembered (``open_calls``) until it arrives. The run is
   the thread's latest run created at or before the call, and the approval record comes from
   ``RunState.approvals``: both from the runs this export read, since the commit that wrote a call or
   a result also wrote its run. A delegating call's child session and turn come from
   ``RunState.delegations`` the same way (they are committed with the call).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa  # type: ignore[import-untyped]

from repertory.storage.export._readers import ExportReader, RawRow
from repertory.storage.export._schema import MESSAGES, TOOL_CALLS

__all__ = ["Derived", "derive"]

_MESSAGE_TYPE = (
    '{"role":"VARCHAR","origin":{"kind":"VARCHAR","id":"VARCHAR"},"model":"VARCHAR",'
    '"parts":[{"type":"VARCHAR","text":"VARCHAR",'
    '"tool_call_id":"VARCHAR","tool_name":"VARCHAR","args":"JSON","result":"JSON","is_error":"BOOLEAN"}],'
    '"boundary":"BOOLEAN"}'
)
_APPROVALS_TYPE = (
    '{"approvals":[{"tool_call_id":"VARCHAR","requested_at":"BIGINT","decision":"VARCHAR","decided_at":"BIGINT",'
    '"reason":"VARCHAR","args_replaced":"BOOLEAN","decided_by":"VARCHAR"}]}'
)
_DELEGATIONS_TYPE = '{"delegations":[{"tool_call_id":"VARCHAR","session_id":"VARCHAR","submission_id":"VARCHAR"}]}'
_ENTRY_SCHEMA = pa.schema([("entry_id", pa.string()), ("created_at", pa.int64()), ("message", pa.string())])
_OPEN_SCHEMA = pa.schema(
    [("thread_id", pa.string()), ("tool_call_id", pa.string()), ("call_entry_id", pa.string()),
     ("position", pa.int64()), ("tool_name", pa.string()), ("args", pa.string()), ("called_at", pa.int64()),
     ("owned", pa.bool_())]
)  # fmt: skip


@dataclass(slots=True)
class Derived:
    """What one export derived: the new rows of both tables and the state the next export starts from."""

    messages: pa.Table
    tool_calls: pa.Table
    heads: dict[str, str | None]
    open_calls: list[dict[str, Any]]


_WALK_SCHEMA = pa.schema([("rn", pa.int64()), ("k", pa.int64()), ("owned", pa.bool_())])
_EXTRA_SCHEMA = pa.schema(
    [("k", pa.int64()), ("revision_id", pa.string()), ("entry_id", pa.string()), ("depth", pa.int64())]
)
_HEADS_SCHEMA = pa.schema([("k", pa.int64()), ("thread_id", pa.string()), ("head", pa.string()), ("old", pa.string())])


def _walk(
    con: duckdb.DuckDBPyConnection, threads: Sequence[RawRow], revisions: pa.Table, heads: dict[str, str | None]
) -> list[tuple[int, str, str | None]]:
    """Walk every moved thread through this export's revisions; return where walks left them.

    Parent pointers are resolved to row numbers by one DuckDB join, so the Python loop only follows
    integers. Threads go oldest first, so a revision new in this export is owned by the thread that
    wrote it, not by a fork made from it since (a fork is always younger than its parent). Leaves
    ``walk`` (row, thread, owned) and ``heads`` (thread number, id, new head, old head) in ``con``.
    """
    order = sorted(range(len(threads)), key=lambda k: (threads[k][2], threads[k][0]))
    rows = [(k, threads[k][0], threads[k][1], heads.get(threads[k][0])) for k in order]
    con.register("revs", revisions)
    con.register("moved", pa.Table.from_pylist([dict(zip(_HEADS_SCHEMA.names, r, strict=True)) for r in rows],
                                               schema=_HEADS_SCHEMA))  # fmt: skip
    con.execute("CREATE TEMP TABLE rn AS SELECT row_number() OVER () - 1 AS rn, revision_id, parent_id, entry_id, "
                "depth FROM revs")  # fmt: skip
    parent: list[int | None] = (
        con.sql("SELECT p.rn FROM rn AS r LEFT JOIN rn AS p ON p.revision_id = r.parent_id ORDER BY r.rn")
        .to_arrow_table().column(0).to_pylist()
    )  # fmt: skip
    ends = con.sql(
        "SELECT h.k, a.rn, b.rn FROM moved AS h LEFT JOIN rn AS a ON a.revision_id = h.head "
        "LEFT JOIN rn AS b ON b.revision_id = h.old"
    ).fetchall()
    found = {k: (head_rn, old_rn) for k, head_rn, old_rn in ends}
    claimed = bytearray(len(parent))
    walk_rn: list[int] = []
    walk_k: list[int] = []
    owned: list[bool] = []
    leaving: list[tuple[int, int | None]] = []  # (thread number, last row walked) where a walk left the batch
    for k, tid, head, old in rows:
        if head is None or head == old:
            continue
        heads[tid] = head
        i, stop = found[k]
        stop = -1 if stop is None else stop
        last: int | None = None
        start = len(walk_rn)
        while i is not None and i != stop:
            walk_rn.append(i)
            owned.append(not claimed[i])
            claimed[i] = 1
            last, i = i, parent[i]
        walk_k.extend([k] * (len(walk_rn) - start))
        if i is None:
            leaving.append((k, last))
    con.register("walk", pa.Table.from_arrays(
        [pa.array(walk_rn, pa.int64()), pa.array(walk_k, pa.int64()), pa.array(owned, pa.bool_())],
        schema=_WALK_SCHEMA,
    ))  # fmt: skip
    con.execute("CREATE TEMP TABLE heads AS SELECT * FROM moved")
    # Where each walk left the batch: the head itself, or the parent of the last row walked.
    lasts = [last for _, last in leaving if last is not None]
    parent_ids = dict(con.sql("SELECT rn, parent_id FROM rn WHERE rn IN (SELECT unnest($rows))",
                              params={"rows": lasts}).fetchall()) if lasts else {}  # fmt: skip
    by_k = {k: (head, old) for k, _, head, old in rows}
    exits: list[tuple[int, str, str | None]] = []
    for k, last in leaving:
        head, old = by_k[k]
        at = head if last is None else parent_ids.get(last)
        if at is not None and at != old:
            exits.append((k, at, old))
    return exits


_DECODE_SQL = f"""
CREATE TEMP TABLE dec AS
SELECT entry_id, created_at, s.role AS role, s.origin.kind AS origin_kind, s.origin.id AS origin_id,
       s.model AS model,
       array_to_string(list_transform(list_filter(s.parts, lambda p: p.type = 'text'), lambda p: p.text), '') AS text,
       list_transform(list_filter(s.parts, lambda p: p.tool_name IS NOT NULL), lambda p: p.tool_name) AS tool_names,
       list_transform(list_filter(s.parts, lambda p: p.tool_call_id IS NOT NULL), lambda p: p.tool_call_id)
           AS tool_call_ids,
       CASE WHEN len(list_filter(s.parts, lambda p: p.tool_call_id IS NOT NULL)) > 0 THEN s.parts END AS tool_parts,
       COALESCE(s.boundary, false) AS boundary
FROM (SELECT entry_id, created_at, json_transform(message, '{_MESSAGE_TYPE}') AS s FROM src)
"""

_MESSAGES_SQL = """
SELECT h.thread_id, w.depth - 1 AS position, w.revision_id, w.entry_id, d.created_at, d.role, d.origin_kind,
       d.origin_id, d.model, d.text, d.tool_names, d.tool_call_ids, CAST(NULL AS BIGINT) AS tokens, d.boundary,
       CAST($gen AS BIGINT) AS export_generation
FROM walked AS w JOIN heads AS h USING (k) JOIN dec AS d USING (entry_id)
"""

_PARTS_SQL = """
CREATE TEMP TABLE parts AS
SELECT h.thread_id, w.depth - 1 AS position, w.entry_id, d.created_at, w.owned, unnest(d.tool_parts) AS p
FROM walked AS w JOIN heads AS h USING (k) JOIN dec AS d USING (entry_id)
WHERE d.tool_parts IS NOT NULL
"""

_PAIRED_SQL = """
CREATE OR REPLACE TEMP TABLE paired AS
WITH calls AS (
    SELECT thread_id, p.tool_call_id AS tool_call_id, entry_id AS call_entry_id, position, p.tool_name AS tool_name,
           CAST(p.args AS VARCHAR) AS args, created_at AS called_at, owned, true AS fresh
    FROM parts WHERE p.type = 'tool-call'
    UNION ALL SELECT *, false AS fresh FROM open_prev
), results AS (
    SELECT thread_id, p.tool_call_id AS tool_call_id, position AS result_position, CAST(p.result AS VARCHAR) AS result,
           COALESCE(p.is_error, false) AS is_error, created_at AS result_at, owned AS result_owned
    FROM parts WHERE p.type = 'tool-result'
)
SELECT c.*, r.result, r.is_error, r.result_at, r.result_owned
FROM calls AS c {join} JOIN results AS r
  ON r.thread_id = c.thread_id AND r.tool_call_id = c.tool_call_id AND r.result_position > c.position
"""

_EMIT_SQL = f"""
WITH run_info AS (
    SELECT run_id, thread_id, created_at FROM runs
), approval_info AS (
    -- One record per call: the latest request (a call id asked about twice keeps its last decision).
    SELECT thread_id, a.tool_call_id AS tool_call_id, arg_max(run_id, a.requested_at) AS run_id,
           max(a.requested_at) AS requested_at, arg_max(a.decision, a.requested_at) AS decision,
           arg_max(a.decided_at, a.requested_at) AS decided_at, arg_max(a.reason, a.requested_at) AS reason,
           arg_max(a.args_replaced, a.requested_at) AS args_replaced,
           arg_max(a.decided_by, a.requested_at) AS decided_by
    FROM (SELECT run_id, thread_id, unnest(json_transform(state, '{_APPROVALS_TYPE}').approvals) AS a FROM runs)
    GROUP BY thread_id, a.tool_call_id
), delegation_info AS (
    -- The child session and turn a delegating call ran (RunState.delegations, committed with the call).
    SELECT thread_id, d.tool_call_id AS tool_call_id, any_value(d.session_id) AS child_session_id,
           any_value(d.submission_id) AS child_submission_id
    FROM (SELECT thread_id, unnest(json_transform(state, '{_DELEGATIONS_TYPE}').delegations) AS d FROM runs)
    GROUP BY thread_id, d.tool_call_id
)
SELECT p.tool_call_id, p.thread_id, COALESCE(a.run_id, r.run_id) AS run_id, p.call_entry_id, p.position, p.tool_name,
       p.args, p.called_at, p.result, CASE WHEN p.result_at IS NULL THEN NULL ELSE p.is_error END AS is_error,
       p.result_at, p.result_at - p.called_at AS latency_ms,
       CASE WHEN a.tool_call_id IS NULL THEN NULL ELSE COALESCE(a.decision, 'pending') END AS approval_decision,
       a.requested_at AS approval_requested_at, a.decided_at AS approval_decided_at,
       a.decided_at - a.requested_at AS approval_wait_ms, a.reason AS approval_reason,
       a.decided_by AS approval_decided_by, a.args_replaced AS args_replaced, g.child_session_id, g.child_submission_id,
       CAST($gen AS BIGINT) AS export_generation
FROM paired AS p
ASOF LEFT JOIN run_info AS r ON r.thread_id = p.thread_id AND p.called_at >= r.created_at
LEFT JOIN approval_info AS a ON a.thread_id = p.thread_id AND a.tool_call_id = p.tool_call_id
LEFT JOIN delegation_info AS g ON g.thread_id = p.thread_id AND g.tool_call_id = p.tool_call_id
-- A call this thread made now, or a result it got now (for a call made now, earlier, or before a fork).
WHERE (p.fresh AND p.owned) OR (p.result_at IS NOT NULL AND (p.owned OR p.result_owned))
"""

_EMPTY_ENTRIES = "(SELECT NULL::VARCHAR AS entry_id, NULL::BIGINT AS created_at, NULL::VARCHAR AS message WHERE false)"


def _stage_walked(con: duckdb.DuckDBPyConnection, extra: pa.Table, files: list[str]) -> list[str]:
    """The walked rows with their revisions; return the entry ids this export's entries files lack."""
    con.register("extra", extra)
    con.execute(
        "CREATE TEMP TABLE walked AS SELECT w.k, r.revision_id, r.entry_id, r.depth, w.owned "
        "FROM walk AS w JOIN rn AS r USING (rn) "
        "UNION ALL SELECT k, revision_id, entry_id, depth, false FROM extra"
    )
    quoted = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
    source = f"read_parquet([{quoted}])" if files else _EMPTY_ENTRIES
    con.execute(f"CREATE TEMP VIEW fresh AS SELECT entry_id, created_at, message FROM {source}")
    missing = con.sql("SELECT DISTINCT entry_id FROM walked ANTI JOIN fresh USING (entry_id)").fetchall()
    return [r[0] for r in missing]


def _stage_messages(
    con: duckdb.DuckDBPyConnection, fetched: pa.Table, open_calls: list[dict[str, Any]], generation: int
) -> pa.Table:
    """Decode every entry once, give each walked row its message, and pair tool calls with results."""
    con.register("fetched", fetched)
    con.execute("CREATE TEMP VIEW src AS SELECT * FROM fresh UNION ALL SELECT * FROM fetched")
    con.execute(_DECODE_SQL)
    messages = con.sql(_MESSAGES_SQL, params={"gen": generation}).to_arrow_table()
    con.register("open_prev", pa.Table.from_pylist(open_calls, schema=_OPEN_SCHEMA))
    con.execute(_PARTS_SQL)
    con.execute(_PAIRED_SQL.format(join="LEFT"))
    calls = con.sql(
        "SELECT (SELECT count(*) FROM paired), "
        "(SELECT count(*) FROM parts WHERE p.type = 'tool-call') + (SELECT count(*) FROM open_prev)"
    )
    paired, expected = calls.fetchall()[0]
    if paired != expected:
        # A call id used twice on one thread matched more than one result: take the first after each call.
        con.execute(_PAIRED_SQL.format(join="ASOF LEFT"))
    return messages


def _stage_calls(
    con: duckdb.DuckDBPyConnection, runs: pa.Table, generation: int
) -> tuple[pa.Table, list[dict[str, Any]]]:
    """Attach runs and approvals to the paired calls; return the rows and the calls still open."""
    con.register("runs", runs)
    rows = con.sql(_EMIT_SQL, params={"gen": generation}).to_arrow_table()
    names = ", ".join(_OPEN_SCHEMA.names)
    still_open = con.sql(f"SELECT {names} FROM paired WHERE result_at IS NULL").to_arrow_table()
    return rows, still_open.to_pylist()


async def derive(
    reader: ExportReader,
    threads: Sequence[RawRow],
    revisions: pa.Table,
    runs: pa.Table,
    entry_files: Sequence[Path],
    heads: dict[str, str | None],
    open_calls: list[dict[str, Any]],
    generation: int,
) -> Derived:
    """New ``messages`` and ``tool_calls`` rows since the last export, and the state after them.

    ``threads``, ``revisions`` and ``runs`` are what changed since the derived tables' last export;
    ``heads`` (thread -> head exported) is updated in place. The heavy steps run on a worker thread
    (DuckDB releases the GIL); reads go to the store between them.
    """
    con = duckdb.connect()
    try:
        con.execute("SET preserve_insertion_order = false")
        exits = await asyncio.to_thread(_walk, con, threads, revisions, heads)
        extra: list[dict[str, Any]] = []
        for k, at, stop in exits:
            # Older revisions than this export read (a fork's shared prefix): one recursive query.
            for rev in await reader.lineage(at, stop):
                extra.append({"k": k, "revision_id": rev[0], "entry_id": rev[2], "depth": rev[3]})
        extra_table = pa.Table.from_pylist(extra, schema=_EXTRA_SCHEMA)
        missing = await asyncio.to_thread(_stage_walked, con, extra_table, [str(p) for p in entry_files])
        fetched = await reader.entries(missing) if missing else []
        fetched_table = pa.Table.from_pylist(
            [dict(zip(_ENTRY_SCHEMA.names, e, strict=True)) for e in fetched], schema=_ENTRY_SCHEMA
        )
        messages = await asyncio.to_thread(_stage_messages, con, fetched_table, open_calls, generation)
        tool_calls, still_open = await asyncio.to_thread(_stage_calls, con, runs, generation)
    finally:
        con.close()
    return Derived(
        messages=messages.cast(MESSAGES.schema),
        tool_calls=tool_calls.cast(TOOL_CALLS.schema),
        heads=heads,
        open_calls=still_open,
    )
