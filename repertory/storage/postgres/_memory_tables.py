"""The memory tables (``MemoryStore``) of ``PostgresSessionStore`` (schema version 3).

An append is one statement, so one round trip: it bumps the resource's row in
``memory_resources`` and inserts the rows numbered from it. The bump takes that row's lock until
the statement commits, so two writers of one resource are numbered in commit order and a reader
that has seen up to seq n misses nothing after it (a sequence would not guarantee that: numbers
are taken before commit). Texts are ``text`` and documents are JSON in ``text`` (not ``jsonb``,
which refuses the NUL character).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import JsonValue

from repertory.core.store import MemoryRecord, MemoryVectors, WorkingMemory
from repertory.storage.postgres.connection import PgBase

__all__ = ["PgMemoryTables"]

_APPEND = """
WITH bump AS (
    INSERT INTO repertory.memory_resources AS m (resource, last_seq) VALUES (%(resource)s, %(n)s)
    ON CONFLICT (resource) DO UPDATE SET last_seq = m.last_seq + excluded.last_seq
    RETURNING last_seq
)
INSERT INTO repertory.memory_messages (resource, seq, thread_id, role, text, created_at, embedder, embedding)
SELECT %(resource)s, bump.last_seq - %(n)s + u.ord, u.thread_id, u.role, u.text, u.created_at, u.embedder,
       u.embedding
FROM bump, unnest(%(threads)s::text[], %(roles)s::text[], %(texts)s::text[], %(created)s::bigint[],
                  %(embedders)s::text[], %(embeddings)s::bytea[])
     WITH ORDINALITY AS u(thread_id, role, text, created_at, embedder, embedding, ord)
RETURNING seq
"""

_TEXT_COLUMNS = "seq, thread_id, role, text, created_at"


def _record(row: Sequence[Any]) -> MemoryRecord:
    return MemoryRecord(seq=row[0], thread_id=row[1], role=row[2], text=row[3], created_at=row[4])


class PgMemoryTables(PgBase):
    """Memory rows, the per-resource counter and working memory."""

    async def append_memory(self, resource: str, records: Sequence[MemoryRecord]) -> list[int]:
        """Bump the counter and insert the rows in one statement."""
        if not records:
            async with self.connection("append_memory"):
                return []
        params = {
            "resource": resource,
            "n": len(records),
            "threads": [r.thread_id for r in records],
            "roles": [r.role for r in records],
            "texts": [r.text for r in records],
            "created": [r.created_at for r in records],
            "embedders": [r.embedder for r in records],
            "embeddings": [r.embedding for r in records],
        }
        async with self.connection("append_memory") as conn:
            cur = await conn.execute(_APPEND, params)
            rows = await cur.fetchall()
        return sorted(int(r[0]) for r in rows)

    async def recent_memory(
        self, resource: str, *, limit: int, exclude_thread: str | None = None
    ) -> list[MemoryRecord]:
        """The last ``limit`` records of other threads, oldest first."""
        async with self.connection("recent_memory") as conn:
            cur = await conn.execute(
                f"SELECT {_TEXT_COLUMNS} FROM repertory.memory_messages WHERE resource = %s "
                "AND thread_id IS DISTINCT FROM %s ORDER BY seq DESC LIMIT %s",
                (resource, exclude_thread, limit),
            )
            rows = await cur.fetchall()
        return [_record(r) for r in reversed(rows)]

    async def load_memory(self, resource: str, seqs: Sequence[int]) -> list[MemoryRecord]:
        """Records by seq, in seq order."""
        wanted = sorted(set(seqs))
        async with self.connection("load_memory") as conn:
            if not wanted:
                return []
            cur = await conn.execute(
                f"SELECT {_TEXT_COLUMNS} FROM repertory.memory_messages WHERE resource = %s "
                "AND seq = ANY(%s::bigint[]) ORDER BY seq",
                (resource, wanted),
            )
            rows = await cur.fetchall()
        return [_record(r) for r in rows]

    async def memory_vectors(self, resource: str, *, embedder: str, after_seq: int = 0) -> MemoryVectors:
        """Embeddings by ``embedder`` after ``after_seq``."""
        async with self.connection("memory_vectors") as conn:
            cur = await conn.execute(
                "SELECT seq, thread_id, embedding FROM repertory.memory_messages WHERE resource = %s "
                "AND seq > %s AND embedder = %s AND embedding IS NOT NULL ORDER BY seq",
                (resource, after_seq, embedder),
            )
            rows = await cur.fetchall()
        return MemoryVectors([r[0] for r in rows], [r[1] for r in rows], [bytes(r[2]) for r in rows])

    async def load_working_memory(self, resource: str) -> WorkingMemory | None:
        """The document, or ``None``."""
        async with self.connection("load_working_memory") as conn:
            cur = await conn.execute(
                "SELECT doc, updated_at FROM repertory.working_memory WHERE resource = %s", (resource,)
            )
            row = await cur.fetchone()
        return None if row is None else WorkingMemory(document=json.loads(row[0]), updated_at=row[1])

    async def save_working_memory(self, resource: str, document: JsonValue, updated_at: int) -> None:
        """Replace the document."""
        doc = json.dumps(document, ensure_ascii=False)
        async with self.connection("save_working_memory") as conn:
            await conn.execute(
                "INSERT INTO repertory.working_memory (resource, doc, updated_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (resource) DO UPDATE SET doc = excluded.doc, updated_at = excluded.updated_at",
                (resource, doc, updated_at),
            )

    async def forget_memory(self, resource: str) -> None:
        """Delete the rows and the document in one transaction."""
        async with self.connection("forget_memory") as conn, conn.transaction():
            await conn.execute("DELETE FROM repertory.memory_messages WHERE resource = %s", (resource,))
            await conn.execute("DELETE FROM repertory.working_memory WHERE resource = %s", (resource,))
