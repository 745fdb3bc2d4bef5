"""What the exporter needs from a store, and how each backend's reader is found.

A reader is read-only and knows its store's insides (it is the one place outside a store's own
modules allowed to touch them). It opens one consistent snapshot where the backend has one (a
SQLite read transaction, a PostgreSQL ``REPEATABLE READ`` transaction, a copy of the in-memory
dicts) and answers from it:

- ``scan(table, position)``: the rows of a table written since ``position`` (a marker the reader
  chose at the previous scan), in pages, and the new position. Every row comes in the table's
  *canonical raw* shape, the same on every backend (see ``RAW_SHAPES``), so converting rows to
  Arrow is written once.
- ``lineage``, ``entries``: the point reads the derived tables need.

A position is exact where the backend has an exact change marker (SQLite rowids, PostgreSQL
transaction ids, in-memory insertion order). Where it only has a clock (SQLite's mutable rows),
a scan reads a little behind its position and flags the rows it will read again (``revisit``);
the exporter remembers their fingerprints, so a row read twice is written once.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

from pydantic import JsonValue

from repertory.storage.export._files import ExportError

__all__ = ["RAW_SHAPES", "ExportReader", "Page", "RevisionRow", "TableScan", "reader_for"]

RawRow = tuple[Any, ...]
RevisionRow = tuple[str, str | None, str, int, int]
"""``(revision_id, parent_id, entry_id, depth, created_at)``."""

RAW_SHAPES: dict[str, tuple[str, ...]] = {
    "sessions": ("session_id", "record_json"),
    "threads": ("thread_id", "head", "created_at", "updated_at", "head_depth"),
    "runs": ("run_id", "state_json"),
    "entries": ("entry_id", "created_at", "message_json"),
    "revisions": ("revision_id", "parent_id", "entry_id", "depth", "created_at"),
    "turns": ("submission_id", "record_json"),
    "events": ("session_id", "seq", "submission_id", "type", "at", "data_json"),
}
"""The canonical raw row of each base table, as every reader yields it (never a token column)."""


@dataclass(slots=True)
class Page:
    """Rows of one table; ``revisit[i]`` says the next scan will read row ``i`` again (``None``: none)."""

    rows: list[RawRow]
    revisit: list[bool] | None = None


@dataclass(slots=True)
class TableScan:
    """A table's rows since a position: the new position (fixed when the scan starts) and the pages."""

    position: JsonValue
    pages: AsyncIterator[Page]


class ExportReader(Protocol):
    """A read-only view of one store for the exporter; ``async with`` opens and closes its snapshot."""

    backend: str
    source: str
    """Identifies the store (a path, a redacted URL); an export directory serves one source only."""

    async def __aenter__(self) -> ExportReader:
        """Open what the reader needs (connections)."""

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Release it."""

    async def scan(self, table: str, position: JsonValue) -> TableScan:
        """Rows of ``table`` changed since ``position`` (``None``: all), and the position to resume from."""

    async def lineage(self, revision_id: str, stop: str | None) -> list[RevisionRow]:
        """Revisions from ``revision_id`` back towards the root, newest first, ending before ``stop``."""

    async def entries(self, entry_ids: Sequence[str]) -> list[tuple[str, int, str]]:
        """``(entry_id, created_at, message_json)`` of the given entries (unknown ids are skipped)."""


@functools.singledispatch
def reader_for(store: object) -> ExportReader:
    """The export reader of a store; each backend module registers its store class."""
    raise ExportError(f"{type(store).__name__} cannot be exported: no export reader is registered for it")
