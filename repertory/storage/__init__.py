"""Stores: where runs, thread heads and the history graph live (``SessionStore`` and its backends)."""

from repertory.core.store import SessionStore, TreeStore
from repertory.storage.memory.store import InMemorySessionStore
from repertory.storage.sqlite.store import SqliteSessionStore
from repertory.storage.url import open_store

__all__ = ["InMemorySessionStore", "SessionStore", "SqliteSessionStore", "TreeStore", "open_store"]
