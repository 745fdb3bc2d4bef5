"""The SQLite store: the embedded default, one file in WAL mode, shared by the processes of a machine."""

from repertory.storage.sqlite.connection import db_errors
from repertory.storage.sqlite.store import Durability, SqliteSessionStore

__all__ = ["Durability", "SqliteSessionStore", "db_errors"]
