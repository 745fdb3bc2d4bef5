"""``EventsConformance`` (``repertory.testing.conformance.backend.events``) on the built-in backends."""

from __future__ import annotations

import pytest

from repertory.testing.conformance.backend import EventsConformance
from tests.tree.backends import LocalMemory, LocalPostgres, LocalSqlite, RaySqlite


class TestLocalMemory(LocalMemory, EventsConformance):
    """EventsConformance on ``LocalMemory``."""


class TestLocalSqlite(LocalSqlite, EventsConformance):
    """EventsConformance on ``LocalSqlite``."""


class TestLocalPostgres(LocalPostgres, EventsConformance):
    """EventsConformance on ``LocalPostgres``."""


@pytest.mark.slow  # a Ray instance costs seconds: make test-all runs it (backends.py)
class TestRaySqlite(RaySqlite, EventsConformance):
    """EventsConformance on ``RaySqlite``."""
