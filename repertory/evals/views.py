"""DuckDB over the eval results: the export's views plus ``eval_runs``, ``eval_scores`` and ``compare_variants``.

    con = repertory.evals.connect("analytics/")
    con.sql("SELECT * FROM compare_variants('recorded', 'gpt-5-mini')").show()

``compare_variants(a, b)``: per case and per result name, eval ``a``'s value beside eval ``b``'s,
``delta`` = b - a, with both forks' session ids (a case missing from one side has NULLs there).
``eval_summary``: per eval and result name, the number of cases, the mean value and how many
assertions passed. The views read the files as they are when made: ``refresh_evals`` (or
``connect`` again) after another eval is written.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from repertory.analytics import connect as connect_export
from repertory.evals.tables import EVAL_RUNS, EVAL_SCORES

__all__ = ["connect", "refresh_evals"]

_DUCK = {"string": "VARCHAR", "int64": "BIGINT", "double": "DOUBLE", "bool": "BOOLEAN"}

_MACROS = """
CREATE OR REPLACE MACRO compare_variants(a, b) AS TABLE
    SELECT coalesce(x.case_name, y.case_name) AS case_name,
           coalesce(x.source_session_id, y.source_session_id) AS source_session_id,
           coalesce(x.name, y.name) AS name,
           coalesce(x.kind, y.kind) AS kind,
           x.value AS a_value, y.value AS b_value, y.value - x.value AS delta,
           x.label AS a_label, y.label AS b_label,
           x.fork_session_id AS a_session_id, y.fork_session_id AS b_session_id
    FROM (SELECT * FROM eval_scores WHERE eval = a) AS x
    FULL OUTER JOIN (SELECT * FROM eval_scores WHERE eval = b) AS y
      ON x.source_turn_id = y.source_turn_id AND x.name = y.name
    ORDER BY case_name, name;

CREATE OR REPLACE VIEW eval_summary AS
    SELECT eval, name, kind, count(*) AS cases, avg(value) AS mean,
           CAST(sum(CASE WHEN kind = 'assertion' AND value = 1 THEN 1 ELSE 0 END) AS BIGINT) AS passed
    FROM eval_scores GROUP BY eval, name, kind ORDER BY eval, name;
"""


def _view(out: Path, table: str, columns: list[tuple[str, str]]) -> str:
    files = sorted((out / table).glob("*.parquet"))
    if files:
        listed = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
        return f"SELECT * FROM read_parquet([{listed}], union_by_name = true)"
    typed = ", ".join(f"CAST(NULL AS {_DUCK[kind]}) AS {name}" for name, kind in columns)
    return f"SELECT {typed} WHERE false"


def refresh_evals(con: duckdb.DuckDBPyConnection, out_dir: str | os.PathLike[str]) -> None:
    """(Re)create the ``eval_runs`` and ``eval_scores`` views, ``eval_summary`` and ``compare_variants``."""
    out = Path(out_dir).absolute()
    for table, schema in (("eval_runs", EVAL_RUNS), ("eval_scores", EVAL_SCORES)):
        columns = [(f.name, str(f.type)) for f in schema]
        con.execute(f"CREATE OR REPLACE VIEW {table} AS {_view(out, table, columns)}")
    con.execute(_MACROS)


def connect(out_dir: str | os.PathLike[str], database: str = ":memory:") -> duckdb.DuckDBPyConnection:
    """``repertory.analytics.connect(out_dir)`` with the eval views and macros added.

    ``out_dir`` is the export's folder (``ExportError`` if it does not exist); an eval written there
    before any export is read too (the export's views are then empty).
    """
    con = connect_export(out_dir, database)
    try:
        refresh_evals(con, out_dir)
    except BaseException:
        con.close()
        raise
    return con
