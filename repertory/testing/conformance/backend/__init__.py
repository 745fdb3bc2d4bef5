"""The backend conformance suite: the ``SessionBackend`` contract, through ``Runtime`` and its handles.

A backend (built in or your own, registered with ``repertory.tree.register_backend`` or declared in
the entry-point group ``repertory.backends``) passes the contract when these classes pass against
it. Each is a plain pytest class to subclass; the subclass supplies a ``make_runtime`` fixture that
yields an entered ``RuntimeFactory`` of the backend, one per test, and every test runs::

    import pytest
    from repertory.testing.conformance import BackendConformance, RuntimeFactory

    class TestMyBackend(BackendConformance):
        @pytest.fixture
        async def make_runtime(self, tmp_path):
            async with RuntimeFactory("mine", f"sqlite:///{tmp_path / 'suite.db'}") as factory:
                yield factory

``BackendConformance`` is every class below at once; a backend's own tests may take them one by one
(the built-in backends do, to run the costly ones of the Ray backend apart). A factory given a
store URL is durable and the restart tests run; given a store object they skip, saying so. The
doubles (``doubles.py``: ``Script``, ``Gate``, ``Recorder``) keep their state on a ``Board``
(``board.py``): a backend that runs models and tools in other processes gives the factory a board
those processes reach (``RuntimeFactory(board=...)``), and the doubles take it along when pickled.

This package imports pytest (a development dependency): import it only from test code. It imports
no backend: the suite reaches a backend by name only, through ``Runtime.start``.
"""

from repertory.testing.conformance.backend.approvals import ApprovalsConformance
from repertory.testing.conformance.backend.board import Board, LocalBoard, active_board, use_board
from repertory.testing.conformance.backend.budgets import BudgetsConformance
from repertory.testing.conformance.backend.bulk import BulkConformance
from repertory.testing.conformance.backend.cancel_tree import CancelTreeConformance
from repertory.testing.conformance.backend.context import ContextConformance
from repertory.testing.conformance.backend.create import CreateConformance
from repertory.testing.conformance.backend.delegation import DelegationConformance
from repertory.testing.conformance.backend.delete import DeleteConformance
from repertory.testing.conformance.backend.events import EventsConformance
from repertory.testing.conformance.backend.load import LoadConformance
from repertory.testing.conformance.backend.metadata import MetadataConformance
from repertory.testing.conformance.backend.passivation import PassivationConformance
from repertory.testing.conformance.backend.provenance import ProvenanceConformance
from repertory.testing.conformance.backend.restart import RestartConformance
from repertory.testing.conformance.backend.run import RunConformance
from repertory.testing.conformance.backend.runtimes import BackendSuite, RuntimeFactory
from repertory.testing.conformance.backend.session_tree import SessionTreeConformance
from repertory.testing.conformance.backend.turns import TurnsConformance
from repertory.testing.conformance.backend.usage import UsageConformance

__all__ = [
    "ApprovalsConformance",
    "BackendConformance",
    "BackendSuite",
    "Board",
    "BudgetsConformance",
    "BulkConformance",
    "CancelTreeConformance",
    "ContextConformance",
    "CreateConformance",
    "DelegationConformance",
    "DeleteConformance",
    "EventsConformance",
    "LoadConformance",
    "LocalBoard",
    "MetadataConformance",
    "PassivationConformance",
    "ProvenanceConformance",
    "RestartConformance",
    "RunConformance",
    "RuntimeFactory",
    "SessionTreeConformance",
    "TurnsConformance",
    "UsageConformance",
    "active_board",
    "use_board",
]


class BackendConformance(
    ApprovalsConformance,
    BudgetsConformance,
    BulkConformance,
    CancelTreeConformance,
    ContextConformance,
    CreateConformance,
    DelegationConformance,
    DeleteConformance,
    EventsConformance,
    LoadConformance,
    MetadataConformance,
    PassivationConformance,
    ProvenanceConformance,
    RestartConformance,
    RunConformance,
    SessionTreeConformance,
    TurnsConformance,
    UsageConformance,
):
    """The whole backend contract: subclass with a ``make_runtime`` fixture yielding a ``RuntimeFactory``."""
