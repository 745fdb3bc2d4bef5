"""The memory tables (``MemoryStore``) of ``InMemorySessionStore``: per-resource lists, nothing shared.

Each resource has its own list of rows, its own seq counter and its own working-memory document, so
no read can reach another resource's data by construction. Rows are immutable tuples and every read
builds fresh records, so a caller can never change what the store holds. The tables are created on
first use, which keeps the store's constructor untouched.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import JsonValue

from repertory.core.store import MemoryRecord, MemoryVectors, WorkingMemory
from repertory.errors import StoreError

__all__ = ["MemoryMemTables"]

# (seq, thread_id, role, text, created_at, embedder, embedding)
_Row = tuple[int, str, str, str, int, str | None, bytes | None]


@dataclass
class _Resource:
    rows: list[_Row] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    last_seq: int = 0
    working: tuple[str, int] | None = None  # (document JSON, updated_at)


def _record(row: _Row) -> MemoryRecord:
    return MemoryRecord(seq=row[0], thread_id=row[1], role=row[2], text=row[3], created_at=row[4])


class MemoryMemTables:
    """Mixin: the memory half of the in-memory store."""

    _closed: bool

    def _memory_resource(self, resource: str) -> _Resource:
        if self._closed:
            raise StoreError("store is closed")
        tables: dict[str, _Resource] | None = getattr(self, "_memory_tables", None)
        if tables is None:
            tables = {}
            self._memory_tables = tables
        found = tables.get(resource)
        if found is None:
            found = tables[resource] = _Resource()
        return found

    def _forget_threads(self, thread_ids: set[str]) -> int:
        """Drop every resource's records of these threads (``delete_sessions``); returns how many went."""
        tables: dict[str, _Resource] = getattr(self, "_memory_tables", None) or {}
        dropped = 0
        for res in tables.values():
            kept = [row for row in res.rows if row[1] not in thread_ids]
            dropped += len(res.rows) - len(kept)
            if len(kept) != len(res.rows):
                res.rows, res.seqs = kept, [row[0] for row in kept]
        return dropped

    async def append_memory(self, resource: str, records: Sequence[MemoryRecord]) -> list[int]:
        """Append with the resource's next seqs (validated before the first write)."""
        res = self._memory_resource(resource)
        rows: list[_Row] = []
        for i, r in enumerate(records, start=res.last_seq + 1):
            rows.append((i, r.thread_id, r.role, r.text, r.created_at, r.embedder, r.embedding))
        res.rows.extend(rows)
        res.seqs.extend(row[0] for row in rows)
        res.last_seq += len(rows)
        return [row[0] for row in rows]

    async def recent_memory(
        self, resource: str, *, limit: int, exclude_thread: str | None = None
    ) -> list[MemoryRecord]:
        """The last ``limit`` records of other threads, oldest first."""
        res = self._memory_resource(resource)
        found: list[_Row] = []
        for row in reversed(res.rows):
            if len(found) >= limit:
                break
            if row[1] != exclude_thread:
                found.append(row)
        return [_record(row) for row in reversed(found)]

    async def load_memory(self, resource: str, seqs: Sequence[int]) -> list[MemoryRecord]:
        """Records by seq, in seq order."""
        res = self._memory_resource(resource)
        out: list[MemoryRecord] = []
        for seq in sorted(set(seqs)):
            i = bisect.bisect_left(res.seqs, seq)
            if i < len(res.seqs) and res.seqs[i] == seq:
                out.append(_record(res.rows[i]))
        return out

    async def memory_vectors(self, resource: str, *, embedder: str, after_seq: int = 0) -> MemoryVectors:
        """Embeddings by ``embedder`` after ``after_seq``."""
        res = self._memory_resource(resource)
        start = bisect.bisect_right(res.seqs, after_seq)
        out = MemoryVectors([], [], [])
        for row in res.rows[start:]:
            if row[5] == embedder and row[6] is not None:
                out.seqs.append(row[0])
                out.thread_ids.append(row[1])
                out.embeddings.append(row[6])
        return out

    async def load_working_memory(self, resource: str) -> WorkingMemory | None:
        """A fresh copy of the document."""
        working = self._memory_resource(resource).working
        if working is None:
            return None
        return WorkingMemory(document=json.loads(working[0]), updated_at=working[1])

    async def save_working_memory(self, resource: str, document: JsonValue, updated_at: int) -> None:
        """Replace the document (kept as JSON text, as the database stores keep it)."""
        res = self._memory_resource(resource)
        res.working = (json.dumps(document, ensure_ascii=False), updated_at)

    async def forget_memory(self, resource: str) -> None:
        """Drop the rows and the document; the seq counter stays."""
        res = self._memory_resource(resource)
        res.rows, res.seqs, res.working = [], [], None
