"""``StoreMemory``: long-term memory of one resource, kept in the session store's own database.

A resource is whoever the memory belongs to (a user, a tenant). Every session given the same
``StoreMemory`` (or another one with the same ``resource`` on the same database) remembers what
earlier sessions of that resource said; no other resource ever sees it. Three things are recalled
at the start of each run (``Memory.recall``) and folded into the model request as one marked system
message (``fold_context``), never into the thread's history:

- prior messages: the last ``last_messages`` messages of the resource's *other* threads (the
  current thread's history is already in the request);
- semantic hits: the ``semantic_top_k`` past messages of other threads most similar to the run's
  input (cosine of embeddings, at least ``min_score``), exact search over all of them;
- working memory: one JSON document per resource that the agent rewrites with the built-in tool
  ``update_working_memory`` (validated by ``working_memory_schema`` when given).

Appending is off the hot path of a step: ``append`` only queues the committed messages; one
background task per ``StoreMemory`` embeds them in batches and writes each batch in one
transaction. ``recall`` (and ``flush``) wait for the queue first, so a new run sees everything
earlier runs in this process said. A process that dies before its queue drains loses those memory
rows (the thread's history itself is durable and unaffected).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Self

import numpy as np
from pydantic import BaseModel, JsonValue

from repertory.core.ids import now_ms
from repertory.core.memory import RecalledContext
from repertory.core.messages import ModelMessage, Role, TextPart
from repertory.core.protocols import protocol_gap
from repertory.core.store import MemoryRecord, MemoryStore
from repertory.errors import ToolError
from repertory.memory._index import Hit, ResourceIndex, normalise
from repertory.memory._working import document_json, working_memory_tool
from repertory.memory.embedders import Embedder, HashingEmbedder
from repertory.runtime.tools import Tool

__all__ = ["StoreMemory"]

log = logging.getLogger("repertory.memory")

_EMBED_CHARS = 8_000  # texts are embedded from their first 8,000 characters (endpoints cap input tokens)
_MAX_PENDING = 50_000  # queued messages kept while the store refuses them; older ones are dropped


class StoreMemory:
    """Long-term memory of ``resource`` in ``store`` (any built-in store: memory, SQLite, PostgreSQL).

    ``embedder`` defaults to ``HashingEmbedder()``, which is lexical (shared words, not meanings);
    pass ``OpenAIEmbedder`` or ``SentenceTransformerEmbedder`` for semantic similarity, and pick
    ``min_score`` for that embedder's scale. ``roles`` are the messages worth remembering (tool
    calls and results are not, nor anything the runtime itself injected). Recalled texts are cut
    to ``max_recall_chars`` each; a working-memory document may hold ``max_working_memory_chars``
    characters of JSON. Reuse one ``StoreMemory`` per resource: it caches the resource's vectors.
    """

    def __init__(
        self,
        store: Any,
        *,
        resource: str,
        last_messages: int = 10,
        semantic_top_k: int = 3,
        min_score: float = 0.25,
        embedder: Embedder | None = None,
        working_memory: bool = True,
        working_memory_schema: type[BaseModel] | None = None,
        roles: Sequence[Role] = ("user", "assistant"),
        batch_size: int = 64,
        max_recall_chars: int = 2_000,
        max_working_memory_chars: int = 16_000,
    ) -> None:
        if not isinstance(store, MemoryStore):
            raise TypeError(
                f"{protocol_gap(store, MemoryStore)} (StoreMemory keeps its records in the store's memory tables)"
            )
        if not isinstance(resource, str) or not resource or "\x00" in resource:
            raise ValueError(f"resource must be a non-empty string without NUL, got {resource!r}")
        for label, value in (("last_messages", last_messages), ("semantic_top_k", semantic_top_k)):
            if value < 0:
                raise ValueError(f"{label} must be >= 0, got {value}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.store: MemoryStore = store
        self.resource = resource
        self.last_messages = last_messages
        self.semantic_top_k = semantic_top_k
        self.min_score = min_score
        self.embedder: Embedder = embedder if embedder is not None else HashingEmbedder()
        self.working_memory_schema = working_memory_schema
        self.roles = frozenset(roles)
        self.batch_size = batch_size
        self.max_recall_chars = max_recall_chars
        self.max_working_memory_chars = max_working_memory_chars
        self.last_error: Exception | None = None
        """The last embedding failure (its messages were stored without vectors), for inspection."""
        self.tools: tuple[Tool, ...] = (working_memory_tool(self),) if working_memory else ()
        """Tools this memory adds to every run it serves (see ``Memory``): ``update_working_memory``."""
        self._working = working_memory
        self._index = ResourceIndex(store, resource, self.embedder.name)
        self._pending: list[MemoryRecord] = []
        self._task: asyncio.Task[None] | None = None
        self._error: BaseException | None = None

    # -- the Memory protocol ----------------------------------------------------------------------

    async def recall(self, *, thread_id: str, query: list[ModelMessage]) -> RecalledContext:
        """Prior messages of other threads, semantic hits for ``query`` and the working memory.

        Waits for the append queue first (so this process's earlier runs are seen) and raises the
        ``StoreError`` of a batch that still cannot be stored; an embedder failure only costs the
        semantic hits.
        """
        await self.flush()
        prior: list[MemoryRecord] = []
        if self.last_messages:
            prior = await self.store.recent_memory(self.resource, limit=self.last_messages, exclude_thread=thread_id)
        text = "\n".join(m.text for m in query if m.text.strip())
        semantic: list[MemoryRecord] = []
        if self.semantic_top_k and text.strip():
            hits = await self._search(text, self.semantic_top_k, thread_id, {r.seq for r in prior})
            semantic = [record for record, _ in hits]
        document = await self.working_memory() if self._working else None
        return RecalledContext(
            messages=[self._message(r) for r in prior],
            semantic=[self._message(r) for r in semantic],
            working_memory=document,
        )

    async def append(self, *, thread_id: str, messages: list[ModelMessage]) -> None:
        """Queue what is worth remembering; a background task embeds and stores it in batches."""
        now = now_ms()
        for m in messages:
            if m.role not in self.roles or (m.origin is not None and m.origin.kind == "system"):
                continue
            text = m.text.replace("\x00", "\ufffd")  # PostgreSQL's text cannot hold NUL
            if text.strip():
                self._pending.append(MemoryRecord(thread_id=thread_id, role=m.role, text=text, created_at=now))
        if len(self._pending) > _MAX_PENDING:  # the store has been failing for a long while
            dropped = len(self._pending) - _MAX_PENDING
            del self._pending[:dropped]
            log.warning("memory of %r: dropped the %d oldest unstored messages", self.resource, dropped)
        if self._pending and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._drain(), name=f"memory:{self.resource}")

    # -- queue ------------------------------------------------------------------------------------

    async def flush(self) -> None:
        """Wait until every queued message is stored; raises the store error that stopped a batch.

        Messages whose batch failed to store stay queued: a later flush (or recall) tries them again.
        """
        while True:
            if self._task is None or self._task.done():
                if not self._pending:
                    return
                self._task = asyncio.get_running_loop().create_task(self._drain(), name=f"memory:{self.resource}")
            await asyncio.shield(self._task)
            if self._error is not None:
                error, self._error = self._error, None
                raise error

    async def _drain(self) -> None:
        self._error = None  # only the failure of the latest drain is reported
        while self._pending:
            # Taken off the queue while in flight, so appends (and the cap) only touch what waits.
            batch = self._pending[: self.batch_size]
            del self._pending[: len(batch)]
            try:
                records = await self._embed_batch(batch)
                await self.store.append_memory(self.resource, records)
            except BaseException as exc:
                self._pending[:0] = batch  # first in line for the next try
                if not isinstance(exc, Exception):
                    raise
                self._error = exc
                log.warning("memory of %r: storing %d messages failed: %s", self.resource, len(batch), exc)
                return

    async def _embed_batch(self, batch: list[MemoryRecord]) -> list[MemoryRecord]:
        try:
            vectors = normalise(await self.embedder.embed([r.text[:_EMBED_CHARS] for r in batch]))
            if vectors.shape[0] != len(batch):
                raise ValueError(f"{len(batch)} texts gave {vectors.shape[0]} vectors")
        except Exception as exc:  # remembered without vectors: recallable as prior messages, not by search
            self.last_error = exc
            log.warning("memory of %r: embedding %d messages failed: %s", self.resource, len(batch), exc)
            return batch
        name = self.embedder.name
        return [r.model_copy(update={"embedder": name, "embedding": vectors[i].tobytes()}) for i, r in enumerate(batch)]

    # -- search -----------------------------------------------------------------------------------

    @property
    def index(self) -> ResourceIndex:
        """The resource's vectors as this memory searches them (for measuring the search alone)."""
        return self._index

    async def load_index(self) -> int:
        """Bring the cached vectors up to date with the store now; returns how many it holds."""
        await self._index.refresh()
        return self._index.size

    async def search(
        self, text: str, k: int | None = None, *, exclude_thread: str | None = None
    ) -> list[tuple[MemoryRecord, float]]:
        """The resource's messages most similar to ``text`` with their cosine scores, best first."""
        await self.flush()
        return await self._search(text, self.semantic_top_k if k is None else k, exclude_thread, set())

    async def _search(
        self, text: str, k: int, exclude_thread: str | None, exclude_seqs: set[int]
    ) -> list[tuple[MemoryRecord, float]]:
        try:
            query = normalise(np.atleast_2d(await self.embedder.embed([text[:_EMBED_CHARS]])))[0]
        except Exception as exc:  # a run must not fail because an embeddings endpoint is down
            self.last_error = exc
            log.warning("memory of %r: embedding the query failed, no semantic recall: %s", self.resource, exc)
            return []
        await self._index.refresh()
        hits: list[Hit] = await self._index.search(
            query, k, self.min_score, exclude_thread=exclude_thread, exclude_seqs=exclude_seqs
        )
        if not hits:
            return []
        by_seq = {r.seq: r for r in await self.store.load_memory(self.resource, [h.seq for h in hits])}
        # A hit whose row was forgotten meanwhile is simply gone.
        return [(by_seq[h.seq], h.score) for h in hits if h.seq in by_seq]

    # -- working memory ---------------------------------------------------------------------------

    async def working_memory(self) -> JsonValue | None:
        """The resource's working-memory document, or ``None`` before the first write."""
        stored = await self.store.load_working_memory(self.resource)
        return None if stored is None else stored.document

    async def set_working_memory(self, document: Any) -> JsonValue:
        """Validate (against the schema, if any) and replace the document; returns it as stored.

        Raises ``ToolError`` (which the tool turns into an error result the model reads) when the
        document does not validate or is too large.
        """
        try:
            data = document_json(self.working_memory_schema, document)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise ToolError(f"the working memory document is not valid: {exc}") from None
        size = len(json.dumps(data, ensure_ascii=False))
        if size > self.max_working_memory_chars:
            raise ToolError(
                f"the working memory document is {size} characters of JSON; the limit is "
                f"{self.max_working_memory_chars}: keep only what matters"
            )
        await self.store.save_working_memory(self.resource, data, now_ms())
        return data

    async def forget(self) -> None:
        """Delete everything remembered about the resource: messages (queued ones too) and working memory."""
        await self.flush()
        await self.store.forget_memory(self.resource)
        self._index = ResourceIndex(self.store, self.resource, self.embedder.name)

    # -- plumbing ---------------------------------------------------------------------------------

    def _message(self, record: MemoryRecord) -> ModelMessage:
        text = record.text
        if len(text) > self.max_recall_chars:
            text = text[: self.max_recall_chars] + " [...]"
        return ModelMessage(role=record.role, parts=[TextPart(text=text)])

    async def close(self) -> None:
        """Store what is still queued (the store itself stays open: it is the caller's)."""
        await self.flush()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"StoreMemory(resource={self.resource!r}, embedder={self.embedder!r})"
