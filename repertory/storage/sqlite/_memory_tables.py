"""The memory tables (``MemoryStore``) of ``SqliteSessionStore`` (schema version 3).

``memory_resources`` holds each resource's seq counter: appending bumps it in the same
``BEGIN IMMEDIATE`` transaction as the insert, so seqs are gap-free and in commit order even when
several processes share the file, and a reader that has seen up to seq n misses nothing after it.
The counter survives ``forget_memory`` so seqs never repeat. Short writes go through the store's
writer (group commit) and short reads run inline, like the rest of the store; reading every
embedding of a resource (up to 100,000 rows of a few KB) grows with the data, so it runs on a
reader connection off the event loop.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from pydantic import JsonValue

from repertory.core.store import MemoryRecord, MemoryVectors, WorkingMemory
from repertory.storage.sqlite.connection import SqliteBase, db_errors

__all__ = ["SqliteMemoryTables"]

_BUMP = """
INSERT INTO memory_resources (resource, last_seq) VALUES (?, ?)
ON CONFLICT (resource) DO UPDATE SET last_seq = last_seq + excluded.last_seq
RETURNING last_seq
"""

_INSERT = """
INSERT INTO memory_messages (resource, seq, thread_id, role, text, created_at, embedder, embedding)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
"""

_TEXT_COLUMNS = "seq, thread_id, role, text, created_at"


def _record(row: Sequence[object]) -> MemoryRecord:
    return MemoryRecord(seq=row[0], thread_id=row[1], role=row[2], text=row[3], created_at=row[4])


class SqliteMemoryTables(SqliteBase):
    """Memory rows, the per-resource counter and working memory; plumbing comes from ``SqliteBase``."""

    async def append_memory(self, resource: str, records: Sequence[MemoryRecord]) -> list[int]:
        """Bump the counter and insert the rows in one transaction."""
        if not records:
            self._check_open()
            return []

        def write(conn: sqlite3.Connection) -> list[int]:
            last = int(conn.execute(_BUMP, (resource, len(records))).fetchone()[0])
            first = last - len(records) + 1
            conn.executemany(
                _INSERT,
                [
                    (resource, first + i, r.thread_id, r.role, r.text, r.created_at, r.embedder, r.embedding)
                    for i, r in enumerate(records)
                ],
            )
            return list(range(first, last + 1))

        return await self._write("append_memory", write)

    async def recent_memory(
        self, resource: str, *, limit: int, exclude_thread: str | None = None
    ) -> list[MemoryRecord]:
        """The last ``limit`` records of other threads, oldest first (walks the primary key backwards)."""
        self._check_open()
        with db_errors("recent_memory"):
            rows = self._writer.execute(
                f"SELECT {_TEXT_COLUMNS} FROM memory_messages WHERE resource = ? AND thread_id IS NOT ? "
                "ORDER BY seq DESC LIMIT ?",
                (resource, exclude_thread, limit),
            ).fetchall()
        return [_record(r) for r in reversed(rows)]

    async def load_memory(self, resource: str, seqs: Sequence[int]) -> list[MemoryRecord]:
        """Records by seq, in seq order."""
        self._check_open()
        wanted = sorted(set(seqs))
        if not wanted:
            return []
        with db_errors("load_memory"):
            rows = self._writer.execute(
                f"SELECT {_TEXT_COLUMNS} FROM memory_messages WHERE resource = ? "
                "AND seq IN (SELECT value FROM json_each(?)) ORDER BY seq",
                (resource, json.dumps(wanted)),
            ).fetchall()
        return [_record(r) for r in rows]

    async def memory_vectors(self, resource: str, *, embedder: str, after_seq: int = 0) -> MemoryVectors:
        """Embeddings by ``embedder`` after ``after_seq``, read off the event loop."""

        def query(conn: sqlite3.Connection) -> list[tuple[int, str, bytes]]:
            return conn.execute(
                "SELECT seq, thread_id, embedding FROM memory_messages WHERE resource = ? AND seq > ? "
                "AND embedder = ? AND embedding IS NOT NULL ORDER BY seq",
                (resource, after_seq, embedder),
            ).fetchall()

        rows = await self.read("memory_vectors", query)
        return MemoryVectors([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])

    async def load_working_memory(self, resource: str) -> WorkingMemory | None:
        """The document, or ``None``."""
        self._check_open()
        with db_errors("load_working_memory"):
            row = self._writer.execute(
                "SELECT doc, updated_at FROM working_memory WHERE resource = ?", (resource,)
            ).fetchone()
        return None if row is None else WorkingMemory(document=json.loads(row[0]), updated_at=row[1])

    async def save_working_memory(self, resource: str, document: JsonValue, updated_at: int) -> None:
        """Replace the document."""
        doc = json.dumps(document, ensure_ascii=False)
        await self._write(
            "save_working_memory",
            lambda conn: conn.execute(
                "INSERT INTO working_memory (resource, doc, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT (resource) DO UPDATE SET doc = excluded.doc, updated_at = excluded.updated_at",
                (resource, doc, updated_at),
            ),
            atomic=False,
        )

    async def forget_memory(self, resource: str) -> None:
        """Delete the rows and the document in one transaction."""

        def write(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM memory_messages WHERE resource = ?", (resource,))
            conn.execute("DELETE FROM working_memory WHERE resource = ?", (resource,))

        await self._write("forget_memory", write)
