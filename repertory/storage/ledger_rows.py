"""A stored ledger row back as a ``Ledger``: what the SQLite and PostgreSQL stores' reads share.

A budgeted run reads its ledgers before every model request, so the row is read back without the
work a record read usually does: the budget's JSON rarely changes, and a ``Budget`` is frozen, so
each distinct text is validated once and the record shared; the spend columns are the database's
own numbers, taken as they are.
"""

from __future__ import annotations

import functools

from repertory.core.budget import Budget, Ledger, Spend
from repertory.core.trusted import trusted
from repertory.storage.readback import read_record

__all__ = ["ledger_row"]


@functools.lru_cache(maxsize=1024)
def _budget(raw: str, scope: str) -> Budget:
    # A row that cannot be read raises RecordUnreadable, which is not cached: it is raised each time.
    return read_record(Budget, raw, what="ledger", row_id=scope)


def ledger_row(scope: str, budget: str, cost: float, tokens: int, requests: int, tool_calls: int) -> Ledger:
    """The ledger of one row: ``scope``, the budget's JSON and the four spend columns."""
    spend = trusted(
        Spend, cost=float(cost), tokens=int(tokens), model_requests=int(requests), tool_calls=int(tool_calls)
    )
    return trusted(Ledger, scope=scope, budget=_budget(budget, scope), spend=spend)
