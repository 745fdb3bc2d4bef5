"""The in-memory store: the conformance reference, for tests and throwaway sessions."""

from repertory.storage.memory.store import InMemorySessionStore, MemorySnapshot

__all__ = ["InMemorySessionStore", "MemorySnapshot"]
