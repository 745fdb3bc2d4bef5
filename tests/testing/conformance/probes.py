"""The built-in stores' probes for tests outside the conformance suites (history row and write counts).

``probe_for`` picks the shipped probe of a built-in store; the suites themselves never call it
(their fixtures hand the probe over), it is for tests that hold a store some other way (a
``Runtime``'s, a property test's).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from repertory.core.store import SessionStore
from repertory.storage import InMemorySessionStore, SqliteSessionStore
from repertory.storage.postgres.store import PostgresSessionStore
from repertory.testing.conformance import HistoryWrites, StoreProbe
from repertory.testing.conformance.in_memory_probe import InMemoryProbe
from repertory.testing.conformance.postgres_probe import PostgresProbe
from repertory.testing.conformance.sqlite_probe import SqliteProbe

__all__ = ["history_row_counts", "history_writes", "probe_for"]


def probe_for(store: SessionStore) -> StoreProbe:
    """The shipped probe of a built-in store."""
    if isinstance(store, InMemorySessionStore):
        return InMemoryProbe(store)
    if isinstance(store, SqliteSessionStore):
        return SqliteProbe(store)
    if isinstance(store, PostgresSessionStore):
        return PostgresProbe(store)
    raise TypeError(f"no built-in probe for {type(store).__name__}")


async def history_row_counts(store: SessionStore) -> tuple[int, int]:
    """How many history entries and revisions the store holds, counted in its own storage."""
    return await probe_for(store).count_history_rows()


@contextlib.asynccontextmanager
async def history_writes(store: SessionStore) -> AsyncIterator[HistoryWrites]:
    """Count the history writes the store attempts while the block is open."""
    async with probe_for(store).count_history_writes() as writes:
        yield writes
