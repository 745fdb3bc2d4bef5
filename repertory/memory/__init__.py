"""Long-term memory for sessions: ``StoreMemory`` and the embedders it searches with.

``StoreMemory`` implements the engine's ``Memory`` protocol over the tables every built-in store
keeps (``MemoryStore``), scoped to one resource (a user, a tenant): prior messages of its other
threads, semantic hits and a working-memory document the agent maintains with a built-in tool.
"""

from repertory._extras import require

require("repertory.memory", "memory")

from repertory.memory.embedders import (  # noqa: E402
    Embedder,
    EmbeddingError,
    HashingEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
)
from repertory.memory.store_memory import StoreMemory  # noqa: E402

__all__ = [
    "Embedder",
    "EmbeddingError",
    "HashingEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "StoreMemory",
]
