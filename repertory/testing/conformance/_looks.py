"""``Conformance``, the base of every suite class, and ``Looks``, the suites' side of an optional probe.

A probe is optional and partial (``probe.py``), so the suites never call one directly: a count or
an "is this entry stored?" inside a larger test is left out when the probe cannot take it, and a
test that exists for a fault injection or a reopen is skipped, naming what the probe lacks.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from typing import NoReturn

import pytest

from repertory.core.store import SessionStore
from repertory.testing.conformance.probe import HistoryWrites, ProbeUnsupported, RecordTable, StoreProbe

__all__ = ["Conformance", "Looks"]


def _skip(look: str, reason: object) -> NoReturn:
    pytest.skip(f"the store's probe cannot {look}: {reason}")


class Looks:
    """What the suites ask of the fixture's probe, each look tolerant of a probe that lacks it."""

    def __init__(self, probe: StoreProbe | None) -> None:
        self.probe = probe

    async def history_rows(self) -> tuple[int, int] | None:
        """The probe's (entries, revisions) count, or ``None`` when it cannot count them."""
        if self.probe is None:
            return None
        try:
            return await self.probe.count_history_rows()
        except ProbeUnsupported:
            return None

    async def expect_history_rows(self, expected: tuple[int, int]) -> None:
        """Assert the store holds exactly these many entries and revisions (when the probe can count)."""
        rows = await self.history_rows()
        if rows is not None:
            assert rows == expected, f"history rows (entries, revisions): {rows}, expected {expected}"

    async def expect_held(self, entry_ids: Iterable[str], held: bool = True) -> None:
        """Assert each entry is stored (``held``) or that none is (when the probe can tell)."""
        if self.probe is None:
            return
        for entry_id in entry_ids:
            try:
                found = await self.probe.holds_history_entry(entry_id)
            except ProbeUnsupported:
                return
            assert found is held, f"history entry {entry_id!r} {'missing' if held else 'stored'}"

    @contextlib.asynccontextmanager
    async def history_writes(self) -> AsyncIterator[HistoryWrites | None]:
        """The probe's write counter around the block, or ``None`` when it cannot count writes."""
        if self.probe is None:
            yield None
            return
        async with contextlib.AsyncExitStack() as stack:
            try:
                writes: HistoryWrites | None = await stack.enter_async_context(self.probe.count_history_writes())
            except ProbeUnsupported:
                writes = None
            yield writes

    @staticmethod
    def expect_writes(writes: HistoryWrites | None, entries: int, revisions: int) -> None:
        """Assert a counted block attempted exactly these history writes (nothing when uncounted)."""
        if writes is not None:
            got = (writes.entries, writes.revisions)
            assert got == (entries, revisions), f"history writes (entries, revisions): {got}"

    @contextlib.asynccontextmanager
    async def commit_failure(self, run_id: str | None = None) -> AsyncIterator[type[BaseException]]:
        """``probe.fail_commits`` around the block; the test is skipped when the probe cannot."""
        async with self._required("fail a commit partway", lambda p: p.fail_commits(run_id)) as failure:
            yield failure

    @contextlib.asynccontextmanager
    async def commit_time_failure(self) -> AsyncIterator[type[BaseException]]:
        """``probe.fail_at_commit`` around the block; the test is skipped when the probe cannot."""
        async with self._required("fail a transaction at COMMIT", lambda p: p.fail_at_commit()) as failure:
            yield failure

    async def overwrite_record(self, table: RecordTable, row_id: str, raw: str) -> None:
        """``probe.overwrite_record``; the test is skipped when the probe cannot write a row by hand."""
        if self.probe is None:
            _skip("overwrite a stored record", "no probe was supplied")
        try:
            await self.probe.overwrite_record(table, row_id, raw)
        except ProbeUnsupported as exc:
            _skip("overwrite a stored record", exc)

    async def reopen(self) -> SessionStore:
        """``probe.reopen()``; the test is skipped when the probe cannot (the data dies with the store)."""
        if self.probe is None:
            _skip("reopen the store", "no probe was supplied")
        try:
            return await self.probe.reopen()
        except ProbeUnsupported as exc:
            _skip("reopen the store", exc)

    @contextlib.asynccontextmanager
    async def _required(
        self, look: str, arm: Callable[[StoreProbe], AbstractAsyncContextManager[type[BaseException]]]
    ) -> AsyncIterator[type[BaseException]]:
        if self.probe is None:
            _skip(look, "no probe was supplied")
        async with contextlib.AsyncExitStack() as stack:
            try:
                failure = await stack.enter_async_context(arm(self.probe))
            except ProbeUnsupported as exc:
                _skip(look, exc)
            yield failure


class Conformance:
    """Base of the suite classes: the fixtures a store's test class supplies or inherits.

    ``store`` is the subclass's (or a conftest's) to define: an open, empty store, closed by the
    fixture after the test; the suites close it themselves in some tests, so closing twice must be
    harmless. There is deliberately no placeholder here: one would shadow a conftest fixture and
    clash with ``pytest_asyncio.fixture`` under mypy; pytest's "fixture 'store' not found" says
    what is missing.
    ``probe`` defaults to ``None`` (public-API checks only); define it to return a ``StoreProbe``
    for the white-box checks. ``looks`` is the suites' own wrapper and is not meant to be replaced.
    Every test is ``async`` and marked ``asyncio``, so the suites run in pytest-asyncio's strict
    mode as well as in auto mode.
    """

    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def probe(self) -> StoreProbe | None:
        """No probe: the white-box checks are left out and the tests that need one skip."""
        return None

    @pytest.fixture
    def looks(self, probe: StoreProbe | None) -> Looks:
        """The suites' view of ``probe``."""
        return Looks(probe)
