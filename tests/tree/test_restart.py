"""``RestartConformance`` (``repertory.testing.conformance.backend.restart``) on the durable built-in backends.

Only those: a restart is a second runtime finding the first one's data again.
"""

from __future__ import annotations

from repertory.testing.conformance.backend import RestartConformance
from tests.tree.backends import LocalPostgres, LocalSqlite, RaySqlite


class TestLocalSqlite(LocalSqlite, RestartConformance):
    """RestartConformance on ``LocalSqlite``."""


class TestLocalPostgres(LocalPostgres, RestartConformance):
    """RestartConformance on ``LocalPostgres``."""


class TestRaySqlite(RaySqlite, RestartConformance):
    """RestartConformance on ``RaySqlite``."""
