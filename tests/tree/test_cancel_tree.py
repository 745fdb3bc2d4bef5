"""``CancelTreeConformance`` (``repertory.testing.conformance.backend.cancel_tree``) on the built-in backends."""

from __future__ import annotations

from repertory.testing.conformance.backend import CancelTreeConformance
from tests.tree.backends import LocalMemory, LocalPostgres, LocalSqlite, RaySqlite


class TestLocalMemory(LocalMemory, CancelTreeConformance):
    """CancelTreeConformance on ``LocalMemory``."""


class TestLocalSqlite(LocalSqlite, CancelTreeConformance):
    """CancelTreeConformance on ``LocalSqlite``."""


class TestLocalPostgres(LocalPostgres, CancelTreeConformance):
    """CancelTreeConformance on ``LocalPostgres``."""


class TestRaySqlite(RaySqlite, CancelTreeConformance):
    """CancelTreeConformance on ``RaySqlite``."""
