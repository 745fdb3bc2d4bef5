"""Incremental Parquet export of a store: every table, plus ``messages`` and ``tool_calls``.

    report = await export_parquet(store, "analytics/")      # first run: everything
    report = await export_parquet(store, "analytics/")      # later runs: only what changed

Each table gets a folder of part files, one per export generation, and a watermark file saying
where the next export starts. Re-running after a crash neither duplicates nor loses rows; a resume
token is never exported. ``repertory.analytics.connect(out_dir)`` opens the folder in DuckDB with a
view per table that keeps the latest version of each row. Column types are documented in
``docs/guides/analytics.md`` and only ever grow.

Readers per backend (``_sqlite_reader``, ``_pg_reader``, ``_memory_reader``) are registered with
``reader_for`` on import; another store class can register its own. Needs the ``analytics`` extra
(pyarrow, duckdb); the PostgreSQL reader is registered only where the ``postgres`` extra is
installed, since without it there is no PostgreSQL store to export.
"""

from repertory._extras import installed, require

require("repertory.storage.export", "analytics")

from repertory.storage.export import _memory_reader, _sqlite_reader  # noqa: E402, F401 (registration)
from repertory.storage.export._export import ExportReport, TableReport, export_parquet  # noqa: E402
from repertory.storage.export._files import ExportError, committed_parts, read_watermark  # noqa: E402
from repertory.storage.export._readers import ExportReader, reader_for  # noqa: E402
from repertory.storage.export._schema import BASE_TABLES, DERIVED_TABLES, TABLES, TableSpec  # noqa: E402

if installed("postgres"):
    from repertory.storage.export import _pg_reader  # noqa: F401 (registration)

__all__ = [
    "BASE_TABLES",
    "DERIVED_TABLES",
    "TABLES",
    "ExportError",
    "ExportReader",
    "ExportReport",
    "TableReport",
    "TableSpec",
    "committed_parts",
    "export_parquet",
    "read_watermark",
    "reader_for",
]
