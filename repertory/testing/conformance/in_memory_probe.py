"""``InMemoryProbe``: the ``StoreProbe`` of ``InMemorySessionStore``, through its two public seams.

``row_ids`` answers the counts and lookups; ``write_hook`` sees every run and history write before
it happens, which is enough to count attempted writes and to fail a run's write. The store has no
transactions (nothing to fail at ``COMMIT``) and no data that outlives it (nothing to reopen).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from repertory.storage.memory.store import InMemorySessionStore, WriteHook, WrittenTable
from repertory.testing.conformance.probe import (
    INJECTED_FAILURE,
    HistoryWrites,
    InjectedFailure,
    ProbeUnsupported,
    RecordTable,
)

__all__ = ["InMemoryProbe"]


class InMemoryProbe:
    """Looks under one ``InMemorySessionStore``."""

    def __init__(self, store: InMemorySessionStore) -> None:
        self.store = store

    async def count_history_rows(self) -> tuple[int, int]:
        """Entries and revisions held."""
        return len(self.store.row_ids("history_entries")), len(self.store.row_ids("history_revisions"))

    async def holds_history_entry(self, entry_id: str) -> bool:
        """Whether the entry is held."""
        return entry_id in self.store.row_ids("history_entries")

    @contextlib.asynccontextmanager
    async def count_history_writes(self) -> AsyncIterator[HistoryWrites]:
        """Count history rows offered to the store inside the block (held ones included)."""
        writes = HistoryWrites()

        def count(table: WrittenTable, key: str) -> None:
            if table == "history_entries":
                writes.entries += 1
            elif table == "history_revisions":
                writes.revisions += 1

        async with self._hooked(count):
            yield writes

    @contextlib.asynccontextmanager
    async def fail_commits(self, run_id: str | None = None) -> AsyncIterator[type[BaseException]]:
        """Fail the write of run ``run_id`` (any run if ``None``): it is a commit's first, so nothing lands."""

        def fail(table: WrittenTable, key: str) -> None:
            if table == "runs" and (run_id is None or key == run_id):
                raise InjectedFailure(INJECTED_FAILURE)

        async with self._hooked(fail):
            yield InjectedFailure

    def fail_at_commit(self) -> contextlib.AbstractAsyncContextManager[type[BaseException]]:
        """Unsupported: the in-memory store has no transactions to fail at commit."""
        raise ProbeUnsupported("the in-memory store has no transactions to fail at commit")

    async def overwrite_record(self, table: RecordTable, row_id: str, raw: str) -> None:
        """Through ``InMemorySessionStore.replace_record``."""
        self.store.replace_record(table, row_id, raw)

    async def reopen(self) -> InMemorySessionStore:
        """Unsupported: the in-memory store's data dies with it."""
        raise ProbeUnsupported("the in-memory store's data does not outlive the store object")

    @contextlib.asynccontextmanager
    async def _hooked(self, hook: WriteHook) -> AsyncIterator[None]:
        # Chained after any hook already installed, and the previous one restored whatever happens.
        previous = self.store.write_hook

        def both(table: WrittenTable, key: str) -> None:
            if previous is not None:
                previous(table, key)
            hook(table, key)

        self.store.write_hook = both
        try:
            yield
        finally:
            self.store.write_hook = previous
