"""The in-memory store: the conformance reference, for tests and throwaway sessions."""

from repertory.storage.memory.store import InMemorySessionStore

__all__ = ["InMemorySessionStore"]
