"""DuckDB over the Parquet export: ``connect(out_dir)`` gives a connection with a view per table.

    con = repertory.analytics.connect("analytics/")
    con.sql("SELECT * FROM tree_usage('01J...')").show()

Views: ``sessions``, ``threads``, ``runs``, ``turns``, ``entries``, ``revisions``, ``events``,
``messages`` and ``tool_calls``. A view reads only the part files of complete export generations
(a crashed export's leftovers are invisible), and the views of tables whose rows change
(sessions, threads, runs, turns, messages, tool_calls) keep one row per key: its latest version.
``messages`` also drops positions past a thread's current head, should a head ever move sideways.

Table macros:

- ``thread_messages(thread_id)``: the thread's messages, oldest first (what ``load_history`` returns);
- ``session_tree(root_id)``: the session and every descendant, with ``depth`` (spawn and fork edges
  from the root) and ``fork_depth`` (fork edges only), walking ``sessions.parent_id``;
- ``tree_usage(root_id)``: tokens (cache reads and writes too), requests and cost summed over every
  run of that tree.

The views list files when they are created: after another export, call ``refresh(con, out_dir)``
(or ``connect`` again) to see it.
"""

from __future__ import annotations

import os
from pathlib import Path

from repertory._extras import require

require("repertory.analytics", "analytics")

import duckdb  # noqa: E402
import pyarrow as pa  # type: ignore[import-untyped]  # noqa: E402

from repertory.storage.export import TABLES, ExportError, TableSpec, committed_parts  # noqa: E402

__all__ = ["connect", "refresh"]

_DUCK_TYPES = {
    pa.string(): "VARCHAR",
    pa.int64(): "BIGINT",
    pa.float64(): "DOUBLE",
    pa.bool_(): "BOOLEAN",
    pa.list_(pa.string()): "VARCHAR[]",
}

_MACROS = """
CREATE OR REPLACE MACRO thread_messages(tid) AS TABLE
    SELECT * FROM messages WHERE thread_id = tid ORDER BY position;

CREATE OR REPLACE MACRO session_tree(root) AS TABLE
    WITH RECURSIVE tree(session_id, depth, fork_depth) AS (
        SELECT session_id, CAST(0 AS BIGINT), CAST(0 AS BIGINT) FROM sessions WHERE session_id = root
        UNION ALL
        SELECT s.session_id, t.depth + 1, t.fork_depth + CASE WHEN s.lineage_kind = 'forked' THEN 1 ELSE 0 END
        FROM sessions AS s JOIN tree AS t ON s.parent_id = t.session_id
    )
    SELECT s.session_id, s.parent_id, s.root_id, s.lineage_kind, s.agent, s.title, s.model, s.cwd,
           s.created_at, s.updated_at, t.depth, t.fork_depth
    FROM tree AS t JOIN sessions AS s USING (session_id)
    ORDER BY t.depth, s.created_at, s.session_id;

CREATE OR REPLACE MACRO tree_usage(root) AS TABLE
    SELECT count(DISTINCT t.session_id) AS sessions,
           count(r.run_id) AS runs,
           CAST(COALESCE(sum(r.input_tokens), 0) AS BIGINT) AS input_tokens,
           CAST(COALESCE(sum(r.output_tokens), 0) AS BIGINT) AS output_tokens,
           CAST(COALESCE(sum(r.total_tokens), 0) AS BIGINT) AS total_tokens,
           CAST(COALESCE(sum(r.requests), 0) AS BIGINT) AS requests,
           CAST(COALESCE(sum(r.cache_read_tokens), 0) AS BIGINT) AS cache_read_tokens,
           CAST(COALESCE(sum(r.cache_write_tokens), 0) AS BIGINT) AS cache_write_tokens,
           sum(r.cost) AS cost
    FROM session_tree(root) AS t LEFT JOIN runs AS r ON r.thread_id = t.session_id;
"""


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _source(out: Path, spec: TableSpec) -> str:
    files = committed_parts(out, spec.name)
    if files:
        return f"read_parquet([{', '.join(_quote(str(f)) for f in files)}], union_by_name = true)"
    columns = ", ".join(f"CAST(NULL AS {_DUCK_TYPES[f.type]}) AS {f.name}" for f in spec.schema)
    return f"(SELECT {columns} WHERE false)"


def _view(out: Path, spec: TableSpec) -> str:
    source = _source(out, spec)
    if not spec.mutable:
        return f"SELECT * FROM {source}"
    latest = (
        f"SELECT * FROM {source} QUALIFY row_number() OVER "
        f"(PARTITION BY {', '.join(spec.key)} ORDER BY export_generation DESC) = 1"
    )
    if spec.name == "messages":
        return (
            f"SELECT m.* FROM ({latest}) AS m JOIN threads AS t ON t.thread_id = m.thread_id AND m.position < t.depth"
        )
    return latest


def refresh(con: duckdb.DuckDBPyConnection, out_dir: str | os.PathLike[str]) -> None:
    """(Re)create the views and macros over the export in ``out_dir`` as it is now."""
    out = Path(out_dir).absolute()
    if not out.is_dir():
        raise ExportError(f"no export at {out}: run `repertory export --store URL --out {out}` first")
    for spec in TABLES.values():  # threads before messages: the messages view joins it
        con.execute(f"CREATE OR REPLACE VIEW {spec.name} AS {_view(out, spec)}")
    con.execute(_MACROS)


def connect(out_dir: str | os.PathLike[str], database: str = ":memory:") -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with a view per exported table and the ``thread_messages``,
    ``session_tree`` and ``tree_usage`` table macros.

    ``database`` is where DuckDB keeps anything you create yourself (in memory by default); the
    views always read the Parquet files in ``out_dir``. Raises ``ExportError`` when ``out_dir`` is
    not an export.
    """
    con = duckdb.connect(database)
    try:
        refresh(con, out_dir)
    except BaseException:
        con.close()
        raise
    return con
