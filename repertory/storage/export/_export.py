"""``export_parquet``: one export generation, from the store's rows to part files and watermarks.

Order of work, which is what makes a crash harmless (see ``_files``): every part file of the
generation is written and renamed into place first; then the base tables' watermarks; then
``tool_calls``'s; ``messages``'s last, because it carries the derived tables' state. A crash before a
table's watermark is replaced makes the next export redo that table's generation under the same
file name. The derived tables keep their own input positions, so when a crash leaves them behind
the base tables they read their inputs again from where they stood, not from where the base
tables got to.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict, JsonValue

from repertory.core.ids import now_ms
from repertory.core.store import SessionStore
from repertory.storage.export._derive import derive
from repertory.storage.export._files import (
    ExportError,
    ExportLock,
    PartWriter,
    Watermark,
    clean_stale,
    read_watermark,
    write_watermark,
)
from repertory.storage.export._readers import ExportReader, Page, RawRow, reader_for
from repertory.storage.export._rows import Converter, fingerprint, row_key
from repertory.storage.export._schema import BASE_TABLES, MESSAGES, TABLES, TOOL_CALLS, TableSpec

__all__ = ["ExportReport", "TableReport", "export_parquet"]


class TableReport(BaseModel):
    """What one export did to one table."""

    model_config = ConfigDict(frozen=True)
    table: str
    generation: int
    rows: int
    """Rows written by this export (0 when nothing changed)."""
    file: str | None
    """The part file written, or ``None`` when there was nothing to write."""
    total_rows: int
    """Rows written by every export so far (a row of a mutable table counts once per version)."""


class ExportReport(BaseModel):
    """The result of ``export_parquet``: per-table counts, timing, and where the files are."""

    model_config = ConfigDict(frozen=True)
    out_dir: str
    source: str
    backend: str
    generation: int
    tables: dict[str, TableReport]
    rows: int
    elapsed_s: float

    @property
    def rows_per_s(self) -> float:
        """Rows written per second of wall time."""
        return self.rows / self.elapsed_s if self.elapsed_s > 0 else 0.0


@dataclass(slots=True)
class _Written:
    spec: TableSpec
    generation: int
    position: JsonValue
    seen: dict[str, str]
    rows: int
    file: Path | None
    start: JsonValue
    kept: list[Any] = field(default_factory=list)


def _keep(spec: TableSpec, page: Page, seen_before: dict[str, str], seen_now: dict[str, str]) -> list[RawRow]:
    """Drop rows read again that did not change; remember fingerprints of rows the next scan re-reads."""
    if not seen_before:  # nothing can be a re-read: keep every row, only note the ones read again next time
        if page.revisit is not None:
            for row, again in zip(page.rows, page.revisit, strict=True):
                if again:
                    seen_now[row_key(spec.name, row)] = fingerprint(row) if spec.mutable else ""
        return page.rows
    out: list[RawRow] = []
    for i, row in enumerate(page.rows):
        revisit = page.revisit is not None and page.revisit[i]
        key = row_key(spec.name, row)
        if not revisit and key not in seen_before:
            out.append(row)
            continue
        digest = fingerprint(row) if spec.mutable else ""
        if revisit:
            seen_now[key] = digest
        if seen_before.get(key) != digest:
            out.append(row)
    return out


async def _export_table(reader: ExportReader, out: Path, spec: TableSpec, mark: Watermark | None) -> _Written:
    """Write the rows of one base table that changed since ``mark`` as this generation's part file.

    Keeps what the derived tables need from it (threads as raw rows; revisions and runs as Arrow).
    """
    generation = 1 if mark is None else mark.generation + 1
    start = None if mark is None else mark.position
    scan = await reader.scan(spec.name, start)
    seen_before = {} if mark is None else mark.seen
    seen_now: dict[str, str] = {}
    kept: list[Any] = []
    convert = Converter(spec.name)
    pages = scan.pages

    def write(rows: list[RawRow]) -> pa.Table:
        table = convert(rows, generation)
        writer.write(table)
        return table

    # The next page is fetched while this one is converted and written (both leave the event loop).
    ahead: asyncio.Future[Page] | None = asyncio.ensure_future(anext(pages))
    try:
        with PartWriter(out, spec.name, generation, spec.schema) as writer:
            while ahead is not None:
                try:
                    page = await ahead
                except StopAsyncIteration:
                    ahead = None
                    break
                ahead = asyncio.ensure_future(anext(pages))
                rows = _keep(spec, page, seen_before, seen_now)
                if not rows:
                    continue
                table = await asyncio.to_thread(write, rows)
                if spec.name == "threads":
                    kept.extend(rows)
                elif spec.name in ("revisions", "runs"):
                    kept.append(table)
            path = await asyncio.to_thread(writer.commit)
    finally:
        if ahead is not None:
            ahead.cancel()
            with contextlib.suppress(BaseException):
                await ahead
        await pages.aclose()  # type: ignore[attr-defined]
        convert.close()
    return _Written(spec, generation, scan.position, seen_now, writer.rows, path, start, kept)


async def _scan_all(reader: ExportReader, table: str, position: JsonValue) -> tuple[JsonValue, list[Any]]:
    """Every row since ``position``, unfiltered (the derived tables' own catch-up read)."""
    scan = await reader.scan(table, position)
    rows: list[Any] = []
    async for page in scan.pages:
        rows.extend(page.rows)
    return scan.position, rows


def _table(spec: TableSpec, parts: list[pa.Table]) -> pa.Table:
    return pa.concat_tables(parts) if parts else spec.schema.empty_table()


async def _derived_input(
    reader: ExportReader, written: _Written, state: dict[str, Any]
) -> tuple[JsonValue, list[Any] | pa.Table]:
    """What changed in a base table since the derived tables last read it, and the position after.

    Normally the derived tables consumed exactly the base table's previous generation, and reuse what
    it just read. After a crash between the two watermarks they stand a generation further back (the
    base table's fingerprints have moved on too), so they read on their own from their own position.
    """
    name = written.spec.name
    key = f"{name}_position"
    if state.get(f"{name}_generation", 0) == written.generation - 1 and state.get(key) == written.start:
        kept = written.kept
    else:
        position, rows = await _scan_all(reader, name, state.get(key))
        written = _Written(written.spec, 0, position, {}, 0, None, None)
        if name == "threads" or not rows:
            kept = rows
        else:
            convert = Converter(name)
            try:
                kept = [await asyncio.to_thread(convert, rows, 0)]
            finally:
                convert.close()
    if name == "threads":
        return written.position, kept
    return written.position, _table(written.spec, kept)


async def _derive_tables(
    reader: ExportReader, out: Path, written: dict[str, _Written], marks: dict[str, Watermark | None]
) -> tuple[dict[str, JsonValue], list[_Written]]:
    """Compute and write this generation of ``messages`` and ``tool_calls``; return their next state."""
    derived_mark = marks[MESSAGES.name]
    state: dict[str, Any] = {} if derived_mark is None else dict(derived_mark.state)
    positions: dict[str, JsonValue] = {}
    inputs: dict[str, Any] = {}
    for name in ("threads", "revisions", "runs"):
        positions[f"{name}_position"], inputs[name] = await _derived_input(reader, written[name], state)
        positions[f"{name}_generation"] = written[name].generation
    generation = 1 if derived_mark is None else derived_mark.generation + 1
    entries_file = written["entries"].file
    result = await derive(
        reader, inputs["threads"], inputs["revisions"], inputs["runs"], [entries_file] if entries_file else [],
        dict(state.get("heads") or {}), list(state.get("open_calls") or []), generation,
    )  # fmt: skip
    done: list[_Written] = []
    for spec, table in ((MESSAGES, result.messages), (TOOL_CALLS, result.tool_calls)):
        mark = marks[spec.name]
        gen = 1 if mark is None else mark.generation + 1
        with PartWriter(out, spec.name, gen, spec.schema) as writer:
            await asyncio.to_thread(writer.write, table)
            path = await asyncio.to_thread(writer.commit)
        done.append(_Written(spec, gen, None, {}, writer.rows, path, None))
    state_after: dict[str, JsonValue] = {
        **positions,
        "heads": result.heads,  # type: ignore[dict-item]
        "open_calls": result.open_calls,  # type: ignore[dict-item]
    }
    return state_after, done


async def export_parquet(store: SessionStore, out_dir: str | os.PathLike[str]) -> ExportReport:
    """Export every table of ``store`` to Parquet under ``out_dir``, incrementally; return what was written.

    The first export writes everything; each later one writes only what changed since (a new
    generation of part files). A resume token is never written. Raises ``ExportError`` when
    ``out_dir`` holds another store's export or another export is running into it, and
    ``StoreError`` when the store cannot be read.
    """
    started = time.perf_counter()
    out = Path(out_dir).absolute()
    if out.exists() and not out.is_dir():
        raise ExportError(f"export target {out} exists and is not a directory")
    reader = reader_for(store)
    with ExportLock(out):
        marks = {name: read_watermark(out, name) for name in TABLES}
        for name, mark in marks.items():
            if mark is not None and mark.source != reader.source:
                raise ExportError(
                    f"{out} holds an export of {mark.source}, not of {reader.source}; export into another directory"
                )
            clean_stale(out, name, 0 if mark is None else mark.generation)
        async with reader:
            written = {spec.name: await _export_table(reader, out, spec, marks[spec.name]) for spec in BASE_TABLES}
            derived_state, derived_written = await _derive_tables(reader, out, written, marks)
        for w in derived_written:
            written[w.spec.name] = w
        at = now_ms()
        reports: dict[str, TableReport] = {}
        # Watermarks only now, every data file being in place; messages last (it holds the derived state).
        for name in [s.name for s in BASE_TABLES] + [TOOL_CALLS.name, MESSAGES.name]:
            w, mark = written[name], marks[name]
            total = (0 if mark is None else mark.rows) + w.rows
            new = Watermark(
                table=name, source=reader.source, generation=w.generation, position=w.position, seen=w.seen,
                state=derived_state if name == MESSAGES.name else {}, rows=total, exported_at=at,
            )  # fmt: skip
            await asyncio.to_thread(write_watermark, out, new)
            reports[name] = TableReport(
                table=name, generation=w.generation, rows=w.rows, file=None if w.file is None else str(w.file),
                total_rows=total,
            )  # fmt: skip
    return ExportReport(
        out_dir=str(out), source=reader.source, backend=reader.backend,
        generation=max(r.generation for r in reports.values()), tables=reports,
        rows=sum(r.rows for r in reports.values()), elapsed_s=time.perf_counter() - started,
    )  # fmt: skip
