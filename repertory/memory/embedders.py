"""Embedders: text in, float32 vectors out, behind one small protocol. Each name says what it is.

- ``HashingEmbedder`` (the default, no dependencies beyond numpy) is *lexical*: it matches words,
  not meanings. "flight to Oslo" finds "Oslo flights", never "plane ticket to Norway".
- ``OpenAIEmbedder`` calls an OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI itself, vLLM,
  Ollama, llama.cpp's server...) through the ``openai`` SDK, imported only when one is made.
- ``SentenceTransformerEmbedder`` runs a sentence-transformers model already on disk (the
  ``local-embeddings`` extra); it never downloads anything.

An embedder's ``name`` identifies its vector space and is stored beside every vector: vectors of
different spaces are never compared, so changing the embedder never mixes incomparable scores
(older messages simply stop being semantic candidates until they are embedded again).
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import math
import os
import re
import zlib
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from repertory.errors import RepertoryError

__all__ = [
    "EmbeddingError",
    "Embedder",
    "HashingEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
]

Vectors = NDArray[np.float32]


class EmbeddingError(RepertoryError):
    """An embedder failed (an endpoint refused or returned nonsense, a model could not load)."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of one fixed-size space."""

    @property
    def name(self) -> str:
        """Identifies the vector space (model and dimensions); stored beside every vector."""

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """One row per text, in order: shape ``(len(texts), dim)``, float32, not necessarily unit length."""


# -- lexical ------------------------------------------------------------------------------------

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# A fixed stop-word list stands in for inverse document frequency: the words every message shares
# would otherwise dominate every score. English only; other languages still match on their words.
_STOP = frozenset(
    """a about after again all also am an and any are as at be been before being but by can could did do
    does doing for from had has have having he her here hers him his how i if in into is it its just me
    my no nor not of off on once only or our ours out over own please same she should so some such than
    that the their theirs them then there these they this those through to too under until up very was
    we were what when where which while who whom why will with would you your yours yourself""".split()
)
_THREADED_CHARS = 20_000  # above this much text a batch is hashed in a worker thread


def _stem(word: str) -> str:
    """A deliberately light suffix strip, so "flights" meets "flight" (not a real stemmer)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


@lru_cache(maxsize=65536)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    """Where a feature lands and with which sign: crc32, stable across processes (unlike ``hash``)."""
    h = zlib.crc32(feature.encode("utf-8"))
    return h % dim, (1.0 if (h >> 31) & 1 else -1.0)


class HashingEmbedder:
    """Lexical vectors by feature hashing: honest about matching words, not meanings.

    Each text becomes word unigrams (lower-cased, lightly stemmed, stop words dropped) and, at half
    weight, the bigrams of neighbouring kept words; each feature's weight is ``1 + log(count)``
    (sublinear term frequency) and is added, with a sign from the hash, to one of ``dim`` buckets.
    There is no corpus-wide IDF (vectors must not change as the corpus grows); the stop-word list
    plays its part. Cosine similarity then measures shared vocabulary. Deterministic, no model, no
    network, a few microseconds a word.

    ``dim`` is 512 by default: at 384, short texts collided in a bucket often enough to score
    unrelated messages near 0.2; 512 keeps that noise under the default ``min_score`` of 0.25 for
    2 KB of vector a message (on disk and in the search cache).
    """

    def __init__(self, dim: int = 512, *, bigrams: bool = True) -> None:
        if dim < 16:
            raise ValueError(f"dim must be at least 16, got {dim}")
        self.dim = dim
        self.bigrams = bigrams

    @property
    def name(self) -> str:
        """``hashing-lexical-v1-<dim>[-uni]``: the version changes if tokenising ever does."""
        return f"hashing-lexical-v1-{self.dim}" + ("" if self.bigrams else "-uni")

    def features(self, text: str) -> Counter[str]:
        """The weighted features of one text (exposed so a surprising score can be explained)."""
        words = [_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOP]
        counts: Counter[str] = Counter(words)
        if self.bigrams:
            for a, b in itertools.pairwise(words):
                counts[f"{a} {b}"] += 1
        return counts

    def _embed_sync(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            vec = out[row]
            for feature, count in self.features(text).items():
                index, sign = _bucket(feature, self.dim)
                weight = 1.0 + math.log(count)
                vec[index] += sign * (weight if " " not in feature else 0.5 * weight)
        return out

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """Hash the texts; a large batch leaves the event loop for a worker thread."""
        if sum(len(t) for t in texts) > _THREADED_CHARS:
            return await asyncio.to_thread(self._embed_sync, list(texts))
        return self._embed_sync(texts)

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self.dim}, bigrams={self.bigrams})"


# -- OpenAI-compatible endpoint -----------------------------------------------------------------


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint, over HTTP.

    ``base_url`` points at any compatible server (default: the SDK's, i.e. OpenAI, or
    ``OPENAI_BASE_URL``); ``api_key`` defaults to ``OPENAI_API_KEY``, and a local server that needs
    none takes any string. ``dimensions`` asks models that support it for shorter vectors. Texts
    go in batches of at most ``batch_size`` per request. Failures raise ``EmbeddingError``.
    """

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        batch_size: int = 256,
        timeout: float = 30.0,
        max_retries: int = 2,
        client: Any = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model
        self.dimensions = dimensions
        self.batch_size = batch_size
        self._owns_client = client is None
        if client is None:
            try:
                openai = importlib.import_module("openai")
            except ImportError as exc:
                raise EmbeddingError("OpenAIEmbedder needs the 'openai' package: pip install openai") from exc
            client = openai.AsyncOpenAI(
                base_url=base_url,
                api_key=api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "unset"),
                timeout=timeout,
                max_retries=max_retries,
            )
        self._client = client

    @property
    def name(self) -> str:
        """``openai:<model>[:<dimensions>]``."""
        return f"openai:{self.model}" + (f":{self.dimensions}" if self.dimensions else "")

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """One request per batch; rows come back in input order whatever order the server used."""
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            rows.extend(await self._request(list(texts[start : start + self.batch_size])))
        if not rows:
            return np.zeros((0, self.dimensions or 0), dtype=np.float32)
        try:
            return np.asarray(rows, dtype=np.float32)
        except ValueError as exc:
            raise EmbeddingError(f"{self.name}: the server returned vectors of different lengths") from exc

    async def _request(self, batch: list[str]) -> list[list[float]]:
        extra: dict[str, Any] = {} if self.dimensions is None else {"dimensions": self.dimensions}
        # An empty string is refused by some servers; a space embeds as "nothing said" everywhere.
        inputs = [t if t.strip() else " " for t in batch]
        try:
            response = await self._client.embeddings.create(
                model=self.model, input=inputs, encoding_format="float", **extra
            )
        except Exception as exc:
            raise EmbeddingError(f"{self.name}: the embeddings request failed: {exc}") from exc
        data = sorted(response.data, key=lambda d: d.index)
        if len(data) != len(batch):
            raise EmbeddingError(f"{self.name}: asked for {len(batch)} embeddings, got {len(data)}")
        return [list(d.embedding) for d in data]

    async def close(self) -> None:
        """Close the HTTP client this embedder made (a client passed in is the caller's to close)."""
        if self._owns_client:
            await self._client.close()

    def __repr__(self) -> str:
        return f"OpenAIEmbedder({self.model!r})"


# -- local sentence-transformers model ----------------------------------------------------------


class SentenceTransformerEmbedder:
    """A sentence-transformers model loaded from a folder on disk (extra ``local-embeddings``).

    Nothing is downloaded: the folder must hold a saved model (``model.save(path)`` or a copy of a
    Hugging Face snapshot), and it is opened with ``local_files_only``. The model loads on first
    use, in a worker thread, as does every encoding, so the event loop never waits on the CPU.
    """

    def __init__(self, path: str | os.PathLike[str], *, device: str | None = None, batch_size: int = 32) -> None:
        self.path = os.fspath(path)
        if not os.path.isdir(self.path):
            raise EmbeddingError(f"no sentence-transformers model folder at {self.path!r}")
        self.device = device
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = asyncio.Lock()

    @property
    def name(self) -> str:
        """``sentence-transformers:<folder name>``."""
        return f"sentence-transformers:{os.path.basename(os.path.normpath(self.path))}"

    def _load(self) -> Any:
        try:
            module = importlib.import_module("sentence_transformers")
        except ImportError as exc:
            raise EmbeddingError(
                "SentenceTransformerEmbedder needs the 'local-embeddings' extra: "
                "pip install 'repertory[local-embeddings]'"
            ) from exc
        try:
            return module.SentenceTransformer(self.path, device=self.device, local_files_only=True)
        except Exception as exc:
            raise EmbeddingError(f"cannot load the sentence-transformers model at {self.path!r}: {exc}") from exc

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """Encode in a worker thread (loading the model first if this is the first call)."""
        async with self._lock:
            if self._model is None:
                self._model = await asyncio.to_thread(self._load)
        model = self._model

        def encode() -> Vectors:
            out = model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False)
            return np.asarray(out, dtype=np.float32).reshape(len(texts), -1)

        return await asyncio.to_thread(encode)

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.path!r})"
