"""The exact vector index of one resource: every embedding in one float32 matrix, searched with numpy.

Exact rather than approximate: at 100,000 messages a matrix-vector product is a few milliseconds
(benchmarks/memory.py), so there is no recall to trade away. The matrix is loaded once and then
refreshed incrementally: the store numbers a resource's records in commit order (``seq``), so
"everything after the last seq I hold" is complete. Rows are unit length, so a dot product is the
cosine. Capacity doubles as rows arrive, so appends are amortised O(1).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from repertory.core.store import MemoryStore

__all__ = ["Hit", "ResourceIndex", "normalise"]

_THREADED_ROWS = 20_000  # above this many rows a search leaves the event loop (numpy frees the GIL)


def normalise(vectors: NDArray[np.float32]) -> NDArray[np.float32]:
    """Rows scaled to unit length; all-zero rows (nothing to match) stay zero."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: NDArray[np.float32] = (vectors / norms).astype(np.float32, copy=False)
    return out


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: the record's seq and its cosine similarity to the query."""

    seq: int
    score: float


class ResourceIndex:
    """Embeddings of one resource by one embedder, with their seqs and threads."""

    def __init__(self, store: MemoryStore, resource: str, embedder: str) -> None:
        self.store = store
        self.resource = resource
        self.embedder = embedder
        self.last_seq = 0
        self.size = 0
        self._matrix: NDArray[np.float32] | None = None
        self._seqs = np.zeros(0, dtype=np.int64)
        self._threads = np.zeros(0, dtype=np.int32)
        self._thread_codes: dict[str, int] = {}
        self._lock = asyncio.Lock()

    async def refresh(self) -> None:
        """Add what the store holds after ``last_seq``: one indexed range read, usually empty."""
        async with self._lock:
            found = await self.store.memory_vectors(self.resource, embedder=self.embedder, after_seq=self.last_seq)
            if found.seqs:
                self.add(found.seqs, found.thread_ids, b"".join(found.embeddings))

    def add(self, seqs: list[int], thread_ids: list[str], blob: bytes) -> None:
        """Append rows (seqs ascending, after ``last_seq``) given as one buffer of float32 vectors."""
        n = len(seqs)
        flat = np.frombuffer(blob, dtype=np.float32)
        if flat.size % n:
            raise ValueError(f"{flat.size} floats do not split into {n} vectors")
        rows = flat.reshape(n, flat.size // n)
        if self._matrix is None:
            self._matrix = np.empty((max(n, 1024), rows.shape[1]), dtype=np.float32)
            self._seqs = np.empty(self._matrix.shape[0], dtype=np.int64)
            self._threads = np.empty(self._matrix.shape[0], dtype=np.int32)
        elif rows.shape[1] != self._matrix.shape[1]:
            raise ValueError(f"vectors of {rows.shape[1]} dimensions in an index of {self._matrix.shape[1]}")
        end = self.size + n
        if end > self._matrix.shape[0]:
            capacity = max(end, 2 * self._matrix.shape[0])
            self._matrix = _grow(self._matrix, capacity)
            self._seqs = _grow(self._seqs, capacity)
            self._threads = _grow(self._threads, capacity)
        self._matrix[self.size : end] = rows
        self._seqs[self.size : end] = seqs
        codes = self._thread_codes
        self._threads[self.size : end] = [codes.setdefault(t, len(codes)) for t in thread_ids]
        self.size = end
        self.last_seq = seqs[-1]

    async def search(
        self,
        query: NDArray[np.float32],
        k: int,
        min_score: float,
        *,
        exclude_thread: str | None = None,
        exclude_seqs: Collection[int] = (),
    ) -> list[Hit]:
        """The ``k`` best rows with cosine >= ``min_score``, best first; ``query`` must be unit length."""
        if k <= 0 or self.size == 0 or self._matrix is None:
            return []
        if query.shape != (self._matrix.shape[1],):
            raise ValueError(f"a query of shape {query.shape} against vectors of {self._matrix.shape[1]} dimensions")
        # Views of the first ``size`` rows: a refresh running meanwhile writes only past them, or
        # into a grown copy, so the search sees one consistent snapshot without a lock.
        n = self.size
        snapshot = _Snapshot(self._matrix[:n], self._seqs[:n], self._threads[:n])
        code = None if exclude_thread is None else self._thread_codes.get(exclude_thread)
        if n > _THREADED_ROWS:
            return await asyncio.to_thread(_search, snapshot, query, k, min_score, code, exclude_seqs)
        return _search(snapshot, query, k, min_score, code, exclude_seqs)


@dataclass(frozen=True, slots=True)
class _Snapshot:
    matrix: NDArray[np.float32]
    seqs: NDArray[np.int64]
    threads: NDArray[np.int32]


def _search(
    snap: _Snapshot,
    query: NDArray[np.float32],
    k: int,
    min_score: float,
    exclude_code: int | None,
    exclude_seqs: Collection[int],
) -> list[Hit]:
    n = snap.seqs.shape[0]
    # einsum, not ``@``: BLAS's sgemv spreads a product this small over threads, and on a busy
    # machine waiting for them cost 5-8 ms at 10,000 rows; einsum's single-threaded SIMD loop takes
    # 0.8 ms there and about half BLAS's time at 100,000 rows (measured, benchmarks/memory.py).
    scores = np.einsum("ij,j->i", snap.matrix, query)
    if exclude_code is not None:
        scores[snap.threads == exclude_code] = -np.inf
    if exclude_seqs:
        wanted = np.fromiter(exclude_seqs, dtype=np.int64)
        at = np.searchsorted(snap.seqs, wanted)
        at = at[at < n]
        scores[at[np.isin(snap.seqs[at], wanted)]] = -np.inf
    k = min(k, n)
    top = np.argpartition(scores, n - k)[n - k :] if k < n else np.arange(n)
    top = top[np.argsort(-scores[top], kind="stable")]
    return [Hit(int(snap.seqs[i]), min(float(scores[i]), 1.0)) for i in top if scores[i] >= min_score]


_A = TypeVar("_A", bound=np.generic)


def _grow(array: NDArray[_A], capacity: int) -> NDArray[_A]:
    grown = np.empty((capacity, *array.shape[1:]), dtype=array.dtype)
    grown[: array.shape[0]] = array
    return grown
