"""The ledger table (budgets and the spend counted against them) of ``InMemorySessionStore``.

The conformance reference: one dict of JSON rows, created on first use. ``add_spend`` is what the
store's ``commit_session`` calls after its checks passed, so a refused commit adds nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from repertory.core.budget import Budget, Ledger, SpendDelta
from repertory.errors import StoreError

__all__ = ["MemoryBudgetTables"]


class MemoryBudgetTables:
    """Mixin: the budget half of the in-memory store."""

    _closed: bool

    def _ledger_rows(self) -> dict[str, str]:
        if self._closed:
            raise StoreError("store is closed")
        rows: dict[str, str] | None = getattr(self, "_ledgers", None)
        if rows is None:
            rows = {}
            self._ledgers = rows
        return rows

    async def set_budget(self, scope: str, budget: Budget | None) -> None:
        """Set, replace (keeping the spend) or remove ``scope``'s budget."""
        rows = self._ledger_rows()
        if budget is None:
            rows.pop(scope, None)
            return
        raw = rows.get(scope)
        ledger = Ledger(scope=scope, budget=budget) if raw is None else Ledger.model_validate_json(raw)
        rows[scope] = ledger.model_copy(update={"budget": budget}).model_dump_json()

    async def load_ledgers(self, scopes: Sequence[str]) -> dict[str, Ledger]:
        """The ledgers of ``scopes`` that exist."""
        rows = self._ledger_rows()
        return {s: Ledger.model_validate_json(rows[s]) for s in dict.fromkeys(scopes) if s in rows}

    def _planned_spend(self, spend: SpendDelta | None) -> dict[str, str]:
        """The ledger rows ``spend`` rewrites, serialised before anything is written (the commit's own checks)."""
        if spend is None or spend.spend.empty:
            return {}
        rows = self._ledger_rows()
        planned: dict[str, str] = {}
        for scope in dict.fromkeys(spend.scopes):
            raw = rows.get(scope)
            if raw is not None:
                ledger = Ledger.model_validate_json(raw)
                planned[scope] = ledger.model_copy(update={"spend": ledger.spend + spend.spend}).model_dump_json()
        return planned

    def _write_spend(self, planned: dict[str, str]) -> None:
        self._ledger_rows().update(planned)

    def _forget_ledgers(self, scopes: Sequence[str]) -> None:
        """Drop the ledgers of ``scopes`` (a deleted tree's)."""
        rows = self._ledger_rows()
        for scope in scopes:
            rows.pop(scope, None)
