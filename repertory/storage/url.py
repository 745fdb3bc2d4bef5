"""``open_store(url)``: one string chooses and opens a backend.

The URL rules follow SQLAlchemy's, which most Python users already know:

- ``memory://`` -> ``InMemorySessionStore``;
- ``sqlite:///relative.db`` (three slashes, then a relative path), ``sqlite:////abs/path.db``
  (four slashes for an absolute path), ``sqlite://:memory:`` or ``:memory:`` -> ``SqliteSessionStore``;
  ``?durability=full`` chooses the durability;
- ``?group_commit=off`` (SQLite and PostgreSQL) turns group commit off: every write is then a
  transaction of its own (it is on by default; benchmarks compare the two);
- a plain path (no ``scheme://``) -> ``SqliteSessionStore`` at that path;
- ``postgresql://...`` or ``postgres://...`` -> ``PostgresSessionStore``.

Anything else raises ``StoreError`` naming the problem, before any file or connection is made.
"""

from __future__ import annotations

import os
from urllib.parse import parse_qs

from repertory.core.store import SessionStore
from repertory.errors import MissingExtra, StoreError
from repertory.storage.group_commit import parse_switch
from repertory.storage.memory.store import InMemorySessionStore
from repertory.storage.sqlite.store import Durability, SqliteSessionStore

__all__ = ["open_store", "parse_sqlite_url"]


def _sqlite_options(query: str, url: str) -> tuple[Durability, bool]:
    """The durability and the group-commit switch a SQLite URL's query asks for (defaults: normal, on)."""
    params = parse_qs(query, keep_blank_values=True)
    unknown = set(params) - {"durability", "group_commit"}
    if unknown:
        raise StoreError(f"unknown option(s) {', '.join(sorted(unknown))} in store URL {url!r}")
    group_commit = parse_switch(params.get("group_commit", ["on"])[-1], "group_commit")
    value = params.get("durability", ["normal"])[-1]
    if value == "normal":
        return "normal", group_commit
    if value == "full":
        return "full", group_commit
    raise StoreError(f"durability must be 'normal' or 'full' in store URL {url!r}, not {value!r}")


def parse_sqlite_url(url: str) -> tuple[str, Durability]:
    """Split a ``sqlite://`` URL into a filesystem path (or ``":memory:"``) and its durability."""
    path, durability, _ = _split_sqlite_url(url)
    return path, durability


def _split_sqlite_url(url: str) -> tuple[str, Durability, bool]:
    rest = url[len("sqlite://") :]
    rest, _, query = rest.partition("?")
    durability, group_commit = _sqlite_options(query, url)
    if rest in (":memory:", "/:memory:"):
        return ":memory:", durability, group_commit
    if not rest.startswith("/"):
        raise StoreError(
            f"malformed SQLite URL {url!r}: write sqlite:///relative/path.db (three slashes) "
            "or sqlite:////absolute/path.db (four slashes)"
        )
    path = rest[1:]
    if not path:
        raise StoreError(f"malformed SQLite URL {url!r}: no database path after sqlite:///")
    return path, durability, group_commit


async def open_store(url: str | os.PathLike[str]) -> SessionStore:
    """Open the store a URL or path names; raises ``StoreError`` for anything it cannot open."""
    if isinstance(url, os.PathLike):
        url = os.fspath(url)
    if not isinstance(url, str):
        raise StoreError(f"a store URL must be a string or path, not {type(url).__name__}")
    text = url.strip()
    if not text:
        raise StoreError("empty store URL")
    scheme, sep, _ = text.partition("://")
    if not sep:
        if text.startswith(("sqlite:", "postgres:", "postgresql:", "memory:")) and text != ":memory:":
            raise StoreError(f"malformed store URL {url!r}: expected scheme://...")
        return await SqliteSessionStore.open(text)
    scheme = scheme.lower()
    if scheme == "memory":
        if text[len("memory://") :]:
            raise StoreError(f"malformed store URL {url!r}: memory:// takes nothing after it")
        return InMemorySessionStore()
    if scheme == "sqlite":
        path, durability, group_commit = _split_sqlite_url(text)
        return await SqliteSessionStore.open(path, durability=durability, group_commit=group_commit)
    if scheme in ("postgresql", "postgres"):
        try:
            from repertory.storage.postgres.store import PostgresSessionStore
        except ImportError as exc:
            # A missing extra says all there is to say; a broken driver keeps its own error as the cause.
            cause = None if isinstance(exc, MissingExtra) else exc
            raise StoreError(f"the PostgreSQL store is not available: {exc}") from cause
        return await PostgresSessionStore.open(text)
    raise StoreError(
        f"unknown store scheme {scheme!r} in {url!r}: use memory://, sqlite:///path.db, a plain path, "
        "or postgresql://user@host/db"
    )
