"""Stores: where runs, thread heads and the history graph live (``SessionStore`` and its backends)."""

from repertory.storage.base import SessionStore, TreeStore
from repertory.storage.memory import InMemorySessionStore
from repertory.storage.sqlite import SqliteSessionStore
from repertory.storage.url import open_store

__all__ = ["InMemorySessionStore", "SessionStore", "SqliteSessionStore", "TreeStore", "open_store"]
