"""The store conformance suites: the ``SessionStore``, ``TreeStore`` and ``MemoryStore`` contracts as test classes.

A store (built in or your own) passes the contract when these classes pass against it. Each is a
plain pytest class to subclass; the subclass supplies the store with a fixture and every test runs::

    import pytest
    from repertory.testing.conformance import GroupCommitConformance, StoreConformance, TreeConformance

    class TestMyStore(StoreConformance, TreeConformance, GroupCommitConformance):
        @pytest.fixture
        async def store(self):
            async with await MyStore.open(...) as store:  # open and empty, one per test
                yield store

        @pytest.fixture
        def probe(self, store):  # optional: the white-box checks
            return MyStoreProbe(store)

- ``StoreConformance``: runs, thread heads and the history graph (``SessionStore``).
- ``GroupCommitConformance``: concurrent commits each keep their own guards and errors.
- ``TreeConformance``: sessions, turns and the event log (``TreeStore``).
- ``DeletionConformance``: deleting sessions (history another lineage reaches stays) and amending them.
- ``HeadConformance``: ``TreeStore.move_head``, the head moves no run makes (forks, rewinds).
- ``MemoryConformance``: the long-term memory tables (``MemoryStore``).
- ``TimeConformance``: timers, schedules and webhook deliveries (``TimeStore``).
- ``BudgetConformance``: budgets per scope and the spend checkpoints add to them (``BudgetStore``).
- ``InboxConformance``: cross-process decision requests and host beats (``DecisionInbox``).
- ``ReadbackConformance``: a row that cannot be read back as written (too deep, a field broken,
  no JSON) never fails a listing and stays deletable (needs a probe that writes rows by hand).

The ``store`` fixture yields an open, empty store per test and closes it afterwards; some tests
close it themselves, so closing twice must be harmless (it is part of the contract). The tests are
``async def`` and marked ``asyncio`` (pytest-asyncio): in strict mode, declare an async
``store`` fixture with ``@pytest_asyncio.fixture`` instead of ``@pytest.fixture``.

The ``probe`` fixture is optional (default ``None``). A ``StoreProbe`` (``probe.py``) takes the
looks no store method gives: history row counts, whether an entry is stored, counted writes,
injected failures, a reopen. Without one, or where it raises ``ProbeUnsupported``, the counts and
lookups inside larger tests are left out and the tests that exist for a failure injection or a
reopen are skipped, with the reason. The built-in stores' probes (``InMemoryProbe``,
``SqliteProbe``, ``PostgresProbe``) are in this package and show how to write one.

The backend suite (``backend/``) is the ``SessionBackend`` contract the same way:
``BackendConformance`` (every class of ``repertory.testing.conformance.backend`` at once), to
subclass with a ``make_runtime`` fixture that yields an entered ``RuntimeFactory`` of the backend
(see that package).

This package imports pytest (a development dependency, not a dependency of ``repertory``): import
it only from test code. ``records`` has the builders the suites use, for a store's own tests.
"""

from repertory.testing.conformance.backend import BackendConformance, RuntimeFactory
from repertory.testing.conformance.budget import BudgetConformance
from repertory.testing.conformance.deletion import DeletionConformance
from repertory.testing.conformance.group_commit import GroupCommitConformance
from repertory.testing.conformance.heads import HeadConformance
from repertory.testing.conformance.inbox import InboxConformance
from repertory.testing.conformance.memory import MemoryConformance
from repertory.testing.conformance.probe import (
    INJECTED_FAILURE,
    HistoryWrites,
    InjectedFailure,
    ProbeUnsupported,
    StoreProbe,
)
from repertory.testing.conformance.readback import ReadbackConformance
from repertory.testing.conformance.store import StoreConformance
from repertory.testing.conformance.time import TimeConformance
from repertory.testing.conformance.tree import TreeConformance

__all__ = [
    "INJECTED_FAILURE",
    "BackendConformance",
    "BudgetConformance",
    "DeletionConformance",
    "GroupCommitConformance",
    "HeadConformance",
    "HistoryWrites",
    "InboxConformance",
    "InjectedFailure",
    "MemoryConformance",
    "ProbeUnsupported",
    "ReadbackConformance",
    "RuntimeFactory",
    "StoreConformance",
    "StoreProbe",
    "TimeConformance",
    "TreeConformance",
]
