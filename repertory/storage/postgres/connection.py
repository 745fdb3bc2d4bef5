"""Pool plumbing shared by the PostgreSQL store's tables: connections, error mapping, redaction.

Every error leaves here as a ``StoreError`` (or ``CommitConflict`` for a failed guard or a
duplicate key, ``StoreFull`` for a server out of disk) whose text has been through ``redact``:
the password never reaches a message.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from repertory.errors import CommitConflict, StoreError, StoreFull
from repertory.storage.group_commit import GroupCommit
from repertory.storage.history_cache import DEFAULT_HISTORY_CACHE_BYTES, HistoryCache
from repertory.storage.postgres.schema import CONFLICT_SQLSTATE, TOKEN_SQLSTATE

__all__ = ["PgBase", "error_for", "normalise_url", "redact"]

_UNIQUE_VIOLATION = "23505"
_DISK_FULL = "53100"  # class 53, insufficient resources: the server could not extend a file


def redact(text: str, secret: str | None = None) -> str:
    """Remove passwords from a text: the known ``secret`` and any ``user:password@`` in a URL."""
    if secret:
        text = text.replace(secret, "***")
    text = re.sub(r"(postgres(?:ql)?://[^:/@\s]+:)[^@\s]*@", r"\1***@", text)
    return re.sub(r"(password\s*=\s*)('[^']*'|\S+)", r"\1***", text, flags=re.IGNORECASE)


def normalise_url(url: str, connect_timeout: float) -> tuple[str, str | None]:
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise StoreError(f"not a PostgreSQL URL: {redact(url)!r}")
    password = parts.password
    query = parts.query
    if "connect_timeout=" not in query:
        query = "&".join(q for q in (query, f"connect_timeout={max(1, round(connect_timeout))}") if q)
    return urlunsplit(("postgresql", parts.netloc, parts.path, query, parts.fragment)), password


def error_for(action: str, sqlstate: str | None, message: str) -> StoreError:
    """The typed error a failed statement becomes: a guard or a duplicate key conflicts, a full disk is ``StoreFull``.

    ``message`` must already be redacted.
    """
    if sqlstate == _UNIQUE_VIOLATION:
        return CommitConflict(f"{action}: already exists ({message})")
    if sqlstate == TOKEN_SQLSTATE:
        return CommitConflict(message, token_redeemed=True)
    if sqlstate == CONFLICT_SQLSTATE:
        return CommitConflict(message)
    if sqlstate == _DISK_FULL:  # the transaction was aborted: nothing of it landed
        return StoreFull(f"postgres: {action} failed: {message}")
    return StoreError(f"postgres: {action} failed: {message}")


class PgBase:
    """The pool, the connection context that maps errors, and closing."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        url: str,
        password: str | None,
        history_cache_bytes: int = DEFAULT_HISTORY_CACHE_BYTES,
    ) -> None:
        self._pool = pool
        self.history_cache = HistoryCache(history_cache_bytes)
        self._conninfo = url  # with the password: only for reopening, never shown
        self._password = password
        self.url = redact(url, password)
        self._closed = False
        self._writers: list[GroupCommit[Any, Any]] = []  # group-commit queues that close() lets finish

    @property
    def reopen_url(self) -> str:
        """The database's URL with its password: what another process (a Ray host) opens the same store with.

        Never show it: ``url`` is the redacted one, for messages and logs.
        """
        return self._conninfo

    # -- plumbing ---------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def connection(self, action: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled connection (autocommit) for the block; what fails in it comes out as a typed error.

        Every statement of the store runs in one; readers of its tables (the exporter) take one too.
        A failure raises ``failure(action, exc)``; no connection within the pool timeout, ``StoreError``.
        """
        if self._closed:
            raise StoreError("store is closed")
        try:
            async with self._pool.connection() as conn:
                yield conn
        except PoolTimeout:
            raise StoreError(f"postgres: {action}: no connection to {self.url} within the pool timeout") from None
        except psycopg.Error as exc:
            raise self.failure(action, exc) from None

    def failure(self, action: str, exc: psycopg.Error) -> StoreError:
        """The typed error a failed statement becomes (see ``error_for``), its text without the password."""
        guard = exc.sqlstate in (CONFLICT_SQLSTATE, TOKEN_SQLSTATE)
        message = (exc.diag.message_primary if guard else None) or str(exc)
        return error_for(action, exc.sqlstate, redact(message, self._password))

    # -- lifecycle --------------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the pool; later calls raise ``StoreError``. Closing twice is harmless."""
        if self._closed:
            return
        for writer in self._writers:
            await writer.drain()  # commits queued before close() still land
        self._closed = True
        await self._pool.close()
