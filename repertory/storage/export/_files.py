"""The export directory on disk: part files, watermark files, the lock, and crash-safe writes.

Layout: ``<out>/<table>/part-00000001.parquet`` holds what generation 1 exported of ``<table>``,
and ``<out>/<table>/_watermark.json`` says which generation is the table's latest complete one and
where its next export starts. A generation is written in this order:

1. each data file goes to a hidden temporary name, is synced, then renamed to its final name;
2. only then the table's watermark file is replaced (temporary file, sync, ``os.replace``).

A crash anywhere leaves the old watermark in place, so the next export starts from the same point
and writes the same generation number again: a part file left behind by the crash has exactly the
name the re-run writes, and is replaced rather than duplicated. Readers list only the part files
up to the watermark's generation, so a half-written generation is never read. Names starting with
``.`` or ``_`` are skipped by pyarrow's and DuckDB's directory readers.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from types import TracebackType
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from repertory.errors import RepertoryError

__all__ = [
    "ExportError",
    "ExportLock",
    "PartWriter",
    "Watermark",
    "clean_stale",
    "committed_parts",
    "part_path",
    "read_watermark",
    "write_watermark",
]

FORMAT = 1
WATERMARK = "_watermark.json"
_PART = re.compile(r"^part-(\d{8})\.parquet$")
# zstd at its default level: files a third the size of snappy's for JSON-heavy columns, at a
# write cost that stays well below the cost of reading the rows out of the store.
_COMPRESSION = "zstd"


class ExportError(RepertoryError):
    """The export directory cannot be used: another store's export, a newer format, or locked."""


class Watermark(BaseModel):
    """Where a table's export stands: its last complete generation and where the next one starts.

    ``position`` is the backend's own marker (a rowid, a transaction id, a clock value); ``seen``
    holds fingerprints of the rows the next scan will read again (rows written so close to the
    export that a later commit could still land behind them), so re-read rows that did not change
    are not written twice. ``state`` is the derived tables' bookkeeping.
    """

    model_config = ConfigDict(extra="forbid")
    format: int = FORMAT
    table: str
    source: str
    generation: int = 0
    position: JsonValue = None
    seen: dict[str, str] = Field(default_factory=dict)
    state: dict[str, JsonValue] = Field(default_factory=dict)
    rows: int = 0
    exported_at: int = 0


def part_path(out: Path, table: str, generation: int) -> Path:
    """The deterministic file name of ``table``'s data for one generation."""
    return out / table / f"part-{generation:08d}.parquet"


def _generation_of(path: Path) -> int | None:
    match = _PART.match(path.name)
    return None if match is None else int(match.group(1))


def read_watermark(out: Path, table: str) -> Watermark | None:
    """The table's watermark, or ``None`` before its first complete export."""
    path = out / table / WATERMARK
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ExportError(f"cannot read {path}: {exc.strerror}") from None
    try:
        mark = Watermark.model_validate_json(raw)
    except ValidationError as exc:
        raise ExportError(f"{path} is not a repertory export watermark: {exc.errors()[0]['msg']}") from None
    if mark.format > FORMAT:
        raise ExportError(f"{path} was written by a newer repertory (format {mark.format}); upgrade repertory")
    return mark


def _sync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # not every filesystem lets a directory be opened and synced
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_watermark(out: Path, mark: Watermark) -> None:
    """Replace the table's watermark atomically: a crash leaves the old one or the new one, whole."""
    folder = out / mark.table
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{WATERMARK}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(mark.model_dump_json())
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, folder / WATERMARK)
    _sync_dir(folder)


def committed_parts(out: Path, table: str, generation: int | None = None) -> list[Path]:
    """The table's part files up to its committed generation (or ``generation``), oldest first."""
    if generation is None:
        mark = read_watermark(out, table)
        generation = 0 if mark is None else mark.generation
    folder = out / table
    if not folder.is_dir():
        return []
    found = [(g, p) for p in folder.iterdir() if (g := _generation_of(p)) is not None and g <= generation]
    return [p for _, p in sorted(found)]


def clean_stale(out: Path, table: str, generation: int) -> None:
    """Remove what a crashed export left: part files past ``generation`` and temporary files."""
    folder = out / table
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        gen = _generation_of(path)
        if (gen is not None and gen > generation) or (path.name.startswith(".") and path.name.endswith(".tmp")):
            path.unlink(missing_ok=True)


class PartWriter:
    """Stream record batches into one generation's part file: hidden while written, renamed when whole.

    Nothing is created for a generation that exported no rows. ``commit()`` syncs and renames;
    leaving the ``with`` block without committing removes the temporary file.
    """

    def __init__(self, out: Path, table: str, generation: int, schema: pa.Schema) -> None:
        self.final = part_path(out, table, generation)
        self.tmp = self.final.with_name(f".{self.final.name}.tmp")
        self.schema = schema
        self.rows = 0
        self._writer: pq.ParquetWriter | None = None

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Append rows (in the table's schema)."""
        if batch.num_rows == 0:
            return
        if self._writer is None:
            self.final.parent.mkdir(parents=True, exist_ok=True)
            self._writer = pq.ParquetWriter(self.tmp, self.schema, compression=_COMPRESSION)
        if isinstance(batch, pa.Table):
            self._writer.write_table(batch)
        else:
            self._writer.write_batch(batch)
        self.rows += batch.num_rows

    def commit(self) -> Path | None:
        """Close, sync and rename the file into place; ``None`` when there were no rows."""
        if self._writer is None:
            return None
        self._writer.close()
        self._writer = None
        fd = os.open(self.tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(self.tmp, self.final)
        _sync_dir(self.final.parent)
        return self.final

    def __enter__(self) -> PartWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            self.tmp.unlink(missing_ok=True)


class ExportLock:
    """One export at a time per directory (an advisory ``flock``; released when the process dies)."""

    def __init__(self, out: Path) -> None:
        self.path = out / ".export.lock"
        self._fh: Any = None

    def __enter__(self) -> ExportLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a+")  # held until __exit__
        try:
            import fcntl
        except ImportError:  # pragma: no cover - no advisory locks on this platform
            return self
        try:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._fh.close()
            self._fh = None
            raise ExportError(f"another export into {self.path.parent} is running") from None
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
