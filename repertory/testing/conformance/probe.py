"""``StoreProbe``: the white-box looks a conformance suite takes under a store's public API.

Most of the contract is checked through ``SessionStore``/``TreeStore`` calls alone. A few rules
cannot be: that a fork stores its shared prefix once (rows, not messages), that a failed commit
left no history entry behind, that a commit halfway through can fail and leave nothing, that a
reopened store finds the data again. A store's test fixture supplies a probe for those; every
method is optional in the sense that it may raise ``ProbeUnsupported``, and the suite then leaves
that check out (a count inside a larger test) or skips the test that is only about it (a failure
injection, a reopen). ``probe = None`` is the same as a probe that supports nothing.

The probes for the built-in stores are in ``in_memory_probe``, ``sqlite_probe`` and
``postgres_probe`` beside this module; they are also worked examples for writing one.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Literal, Protocol

from repertory.core.store import SessionStore

__all__ = [
    "INJECTED_FAILURE",
    "RECORD_COLUMNS",
    "HistoryWrites",
    "InjectedFailure",
    "ProbeUnsupported",
    "RecordTable",
    "StoreProbe",
]

INJECTED_FAILURE = "injected failure"
"""Text the error of an injected failure must contain, so a test can tell it from a real one."""


RecordTable = Literal["sessions", "turns", "runs", "schedules", "webhooks", "decision_requests"]
"""The tables whose rows hold a record's JSON, which ``StoreProbe.overwrite_record`` can replace."""

RECORD_COLUMNS: dict[RecordTable, tuple[str, str]] = {
    "sessions": ("session_id", "record"),
    "turns": ("submission_id", "record"),
    "runs": ("run_id", "state"),
    "schedules": ("schedule_id", "record"),
    "webhooks": ("delivery_id", "record"),
    "decision_requests": ("request_id", "record"),
}
"""Each record table's key column and JSON column, the same in the SQLite and PostgreSQL schemas."""


class ProbeUnsupported(NotImplementedError):
    """Raised by a probe method for a look it cannot take at its store (the suite skips that check)."""


class InjectedFailure(RuntimeError):
    """What a probe may make a store raise when the store itself has no error to fail with.

    A database store fails an injected commit with its own ``StoreError``; a store with no
    statements to fail (the in-memory one) raises this from the probe's hook instead.
    """


@dataclass
class HistoryWrites:
    """History rows a store tried to write while a ``count_history_writes`` block was open.

    Attempts, not rows added: a write the store then ignored as a duplicate counts, which is how a
    commit that rewrote a shared prefix is told from one that skipped it. Filled in by the time
    the block exits.
    """

    entries: int = 0
    revisions: int = 0


class StoreProbe(Protocol):
    """Looks under one open store, supplied by that store's test fixture.

    Any method may raise ``ProbeUnsupported``. The fault injections are context managers: the
    failure is armed while the block is open and fully disarmed when it exits, and they yield the
    exception type the store then raises, whose text contains ``INJECTED_FAILURE``.
    """

    async def count_history_rows(self) -> tuple[int, int]:
        """How many history entries and revisions the store holds, counted in its own storage."""

    async def holds_history_entry(self, entry_id: str) -> bool:
        """Whether the store holds a history entry (a stored message) with this id."""

    def count_history_writes(self) -> AbstractAsyncContextManager[HistoryWrites]:
        """Count the history entries and revisions the store attempts to write inside the block."""

    def fail_commits(self, run_id: str | None = None) -> AbstractAsyncContextManager[type[BaseException]]:
        """Inside the block, a write of run ``run_id`` (of any run if ``None``) fails partway through.

        The failure comes after the commit's guards and, for a database, after it has started
        writing (history rows go in before the run row), so a store that is not atomic shows it.
        ``commit_session`` and ``save`` of the run both fail; other runs' writes are untouched.
        """

    def fail_at_commit(self) -> AbstractAsyncContextManager[type[BaseException]]:
        """Inside the block, every transaction that writes a run fails at ``COMMIT`` itself.

        Every statement succeeds and only the commit fails, so a store that shares one transaction
        between concurrent callers (group commit) must fail every one of them. A store without
        transactions raises ``ProbeUnsupported``.
        """

    async def overwrite_record(self, table: RecordTable, row_id: str, raw: str) -> None:
        """Replace the stored JSON of one existing row with ``raw``, bypassing every check the store makes.

        What a hand edit, a bug or an older version may have left: text nested deeper than the
        store's parser reads, a field that no longer validates, text that is no JSON at all. The
        readback suite writes such rows and checks that listings go on and the row stays deletable.
        """

    async def reopen(self) -> SessionStore:
        """A new store object over the same data, as another process would open it; the caller closes it.

        Called after the probed store was closed. A store whose data does not outlive it (in
        memory) raises ``ProbeUnsupported``, and the durability tests skip.
        """
