"""A store written outside repertory, tested the way its author would: the shipped suites and a fixture.

``test_third_party.py`` copies this file into an empty folder and runs pytest there (strict
asyncio mode, warnings as errors), so nothing from this repository's ``tests/`` (conftest,
backends, probes) is in reach: only ``repertory`` and ``repertory.testing.conformance``.

``WrappedStore`` delegates every call to an ``InMemorySessionStore`` it owns but is not one, so
nothing can recognise it by class. The protocols' members are defined on the class (generated from
``protocol_members``), not reached through ``__getattr__`` alone: from Python 3.12 on ``isinstance``
does not consult ``__getattr__``, and a wrapper relying on it is no ``TreeStore`` there.
``TestWithoutProbe`` gives a ``store`` fixture alone; ``TestWithOwnProbe`` adds the probe such an
author would write: counts through the inner store's public ``row_ids``, commit failures through
the wrapper's own switch, the rest unsupported.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import Any

import pytest
import pytest_asyncio

from repertory.core.budget import SpendDelta
from repertory.core.history import MessageHistory
from repertory.core.protocols import protocol_members
from repertory.core.state import RunState, ThreadState
from repertory.core.store import MemoryStore, TreeStore
from repertory.core.tree import SessionEvent, SessionRecord, TurnRecord
from repertory.errors import StoreError
from repertory.storage import InMemorySessionStore
from repertory.testing.conformance import (
    INJECTED_FAILURE,
    DeletionConformance,
    GroupCommitConformance,
    HistoryWrites,
    MemoryConformance,
    ProbeUnsupported,
    StoreConformance,
    TreeConformance,
)


class WrappedStore:
    """Every ``SessionStore``/``TreeStore``/``MemoryStore`` call goes to an inner in-memory store."""

    def __init__(self) -> None:
        self.inner = InMemorySessionStore()
        self.failing: set[str | None] = set()  # run ids whose writes fail; None: every run

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _check_failure(self, run_id: str) -> None:
        if None in self.failing or run_id in self.failing:
            raise StoreError(f"wrapped store: {INJECTED_FAILURE} writing run {run_id!r}")

    async def commit_session(
        self,
        *,
        run: RunState,
        thread: ThreadState,
        history: MessageHistory,
        base_revision_id: str | None = None,
        redeem_token: str | None = None,
        events: Sequence[SessionEvent] = (),
        turn: TurnRecord | None = None,
        session: SessionRecord | None = None,
        spend: SpendDelta | None = None,
    ) -> None:
        self._check_failure(run.run_id)
        await self.inner.commit_session(
            run=run,
            thread=thread,
            history=history,
            base_revision_id=base_revision_id,
            redeem_token=redeem_token,
            events=events,
            turn=turn,
            session=session,
            spend=spend,
        )

    async def save(self, run: RunState) -> None:
        self._check_failure(run.run_id)
        await self.inner.save(run)

    async def __aenter__(self) -> WrappedStore:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.inner.close()


def _delegate(name: str) -> Any:
    async def call(self: WrappedStore, *args: Any, **kwargs: Any) -> Any:
        return await getattr(self.inner, name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    return call


for _name in {*protocol_members(TreeStore), *protocol_members(MemoryStore)} - set(vars(WrappedStore)):
    setattr(WrappedStore, _name, _delegate(_name))


class WrappedProbe:
    """A partial ``StoreProbe``: what the wrapper's author can see, and ``ProbeUnsupported`` for the rest."""

    def __init__(self, store: WrappedStore) -> None:
        self.store = store

    async def count_history_rows(self) -> tuple[int, int]:
        return len(self.store.inner.row_ids("history_entries")), len(self.store.inner.row_ids("history_revisions"))

    async def holds_history_entry(self, entry_id: str) -> bool:
        return entry_id in self.store.inner.row_ids("history_entries")

    def count_history_writes(self) -> contextlib.AbstractAsyncContextManager[HistoryWrites]:
        raise ProbeUnsupported("the wrapper does not see individual writes")

    @contextlib.asynccontextmanager
    async def fail_commits(self, run_id: str | None = None) -> AsyncIterator[type[BaseException]]:
        self.store.failing.add(run_id)
        try:
            yield StoreError
        finally:
            self.store.failing.discard(run_id)

    def fail_at_commit(self) -> contextlib.AbstractAsyncContextManager[type[BaseException]]:
        raise ProbeUnsupported("the wrapper has no transactions")

    async def reopen(self) -> WrappedStore:
        raise ProbeUnsupported("the wrapper keeps its data in memory")


class TestWithoutProbe(
    StoreConformance, TreeConformance, DeletionConformance, GroupCommitConformance, MemoryConformance
):
    """The whole contract from a ``store`` fixture alone."""

    @pytest_asyncio.fixture
    async def store(self) -> AsyncIterator[WrappedStore]:
        async with WrappedStore() as store:
            yield store


class TestWithOwnProbe(
    StoreConformance, TreeConformance, DeletionConformance, GroupCommitConformance, MemoryConformance
):
    """The whole contract with the author's partial probe."""

    @pytest_asyncio.fixture
    async def store(self) -> AsyncIterator[WrappedStore]:
        async with WrappedStore() as store:
            yield store

    @pytest.fixture
    def probe(self, store: WrappedStore) -> WrappedProbe:
        return WrappedProbe(store)
