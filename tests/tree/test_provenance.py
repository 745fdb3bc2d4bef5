"""``ProvenanceConformance`` (``repertory.testing.conformance.backend.provenance``) on the built-in backends."""

from __future__ import annotations

import pytest

from repertory.testing.conformance.backend import ProvenanceConformance
from tests.tree.backends import LocalMemory, LocalPostgres, LocalSqlite, RaySqlite


class TestLocalMemory(LocalMemory, ProvenanceConformance):
    """ProvenanceConformance on ``LocalMemory``."""


class TestLocalSqlite(LocalSqlite, ProvenanceConformance):
    """ProvenanceConformance on ``LocalSqlite``."""


class TestLocalPostgres(LocalPostgres, ProvenanceConformance):
    """ProvenanceConformance on ``LocalPostgres``."""


@pytest.mark.slow  # a Ray instance costs seconds: make test-all runs it (backends.py)
class TestRaySqlite(RaySqlite, ProvenanceConformance):
    """ProvenanceConformance on ``RaySqlite``."""
