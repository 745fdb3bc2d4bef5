"""The export workload: build the fleet, export it three times, query the export with DuckDB."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.export.fleet import build, grow
from benchmarks.export.report import ExportFigures, ExportReport, Fleet, TreeUsage
from benchmarks.harness.report import Clock, Mode, finish
from repertory.analytics import connect
from repertory.storage.export import ExportReport as ParquetExport
from repertory.storage.export import export_parquet
from repertory.storage.sqlite.store import SqliteSessionStore

__all__ = ["measure"]


async def _export(db: Path, out: Path) -> ParquetExport:
    store = await SqliteSessionStore.open(db)
    try:
        return await export_parquet(store, out)
    finally:
        await store.close()


def _count(row: tuple[Any, ...] | None) -> int:
    return 0 if row is None else int(row[0])


def _figures(export: ParquetExport, entries_added: int | None = None) -> ExportFigures:
    entries = export.tables["entries"].rows
    return ExportFigures(
        elapsed_s=round(export.elapsed_s, 3),
        rows=export.rows,
        rows_per_s=round(export.rows_per_s),
        entries=entries,
        entries_per_s=round(entries / export.elapsed_s) if export.elapsed_s else None,
        per_table={k: v.rows for k, v in export.tables.items()},
        entries_added=entries_added,
    )


def measure(entries: int, mode: Mode, keep: Path | None = None) -> ExportReport:
    """Build a store of ``entries`` history entries, export it three times, query it; the report."""
    clock = Clock.start("export", mode)
    work = keep or Path(tempfile.mkdtemp(prefix="repertory-export-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    db, out = work / "fleet.db", work / "export"
    for stale in (db, out):
        shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(missing_ok=True)
    try:
        roots, build_s = build(db, entries)
        print(f"built {entries:,} entries in {build_s:.1f}s ({db.stat().st_size / 1e6:.0f} MB)", flush=True)
        first = asyncio.run(_export(db, out))
        added = grow(db, 0.01)
        second = asyncio.run(_export(db, out))
        third = asyncio.run(_export(db, out))
        t = time.perf_counter()
        con = connect(out)
        connect_s = time.perf_counter() - t
        root = roots[len(roots) // 2]
        t = time.perf_counter()
        usage = con.execute("SELECT * FROM tree_usage(?)", [root]).fetchall()
        cold_s = time.perf_counter() - t
        t = time.perf_counter()
        con.execute("SELECT * FROM tree_usage(?)", [root]).fetchall()
        warm_s = time.perf_counter() - t
        t = time.perf_counter()
        msgs = con.execute("SELECT count(*) FROM thread_messages(?)", [root]).fetchone()
        thread_messages_s = time.perf_counter() - t
        counts = {name: _count(con.execute(f"SELECT count(*) FROM {name}").fetchone()) for name in first.tables}
        out_bytes = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
    report = ExportReport(
        **clock.frame(),
        store=Fleet(entries=entries, trees=len(roots), build_s=round(build_s, 1)),
        first_export=_figures(first),
        incremental_export=_figures(second, added),
        unchanged_export=_figures(third),
        tree_usage=TreeUsage(
            connect_s=round(connect_s, 3),
            cold_s=round(cold_s, 3),
            warm_s=round(warm_s, 3),
            result=[list(r) for r in usage],
        ),
        thread_messages_s=round(thread_messages_s, 3),
        thread_messages_rows=msgs[0] if msgs else 0,
        view_rows=counts,
        export_bytes=out_bytes,
    )
    return finish(report, clock)
