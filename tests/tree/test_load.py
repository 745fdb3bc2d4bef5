"""``LoadConformance`` (``repertory.testing.conformance.backend.load``) on the built-in backends on SQLite.

It checks correctness under concurrency, not a store: one store is enough.
"""

from __future__ import annotations

import pytest

from repertory.testing.conformance.backend import LoadConformance
from tests.tree.backends import LocalSqlite, RaySqlite


class TestLocalSqlite(LocalSqlite, LoadConformance):
    """LoadConformance on ``LocalSqlite``."""


@pytest.mark.slow  # a Ray instance costs seconds: make test-all runs it (backends.py)
class TestRaySqlite(RaySqlite, LoadConformance):
    """LoadConformance on ``RaySqlite``."""
