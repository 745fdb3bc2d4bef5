"""The store a command works on: opened only where it already is.

Every command but ``serve``, ``ui`` and ``demo`` reads or acts on what a store holds, so a
mistyped SQLite path must not quietly create an empty database and print an empty table with exit
0: it is one ``error:`` line naming the path. Servers create their store on first start, as before.
"""

from __future__ import annotations

from pathlib import Path

from repertory.core.store import SessionStore
from repertory.errors import RepertoryError
from repertory.storage.url import open_store, parse_sqlite_url

__all__ = ["open_existing_store", "sqlite_file"]


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite store URL or plain path names; ``None`` for in-memory and other stores."""
    text = url.strip()
    scheme, sep, _ = text.partition("://")
    if not sep:
        # "sqlite:/x" and friends are malformed URLs, which open_store names as such.
        malformed = text.startswith(("sqlite:", "postgres:", "postgresql:", "memory:"))
        return None if malformed or text in ("", ":memory:") else Path(text)
    if scheme.lower() != "sqlite":
        return None
    path, _ = parse_sqlite_url(text)
    return None if path == ":memory:" else Path(path)


async def open_existing_store(url: str) -> SessionStore:
    """``open_store(url)``, but a SQLite file that does not exist is a ``RepertoryError``, not a new database."""
    path = sqlite_file(url)
    if path is not None and not path.is_file():
        raise RepertoryError(f"no store at {path} (--store {url}): check the path; this command never creates one")
    return await open_store(url)
