"""The ledger table (``core.budget``) of ``SqliteSessionStore`` (schema version 13): budgets and their spend.

A row holds a scope's budget as JSON and the spend counted against it in columns of its own, so a
checkpoint adds its spend with one ``UPDATE`` of those columns inside its own transaction (the
statement ``spend_statement`` prepares, which the store's commit runs after its guards passed:
a refused commit adds nothing), and setting a budget again rewrites the JSON alone, keeping the
spend. A checkpoint that spent nothing, or carries no ``SpendDelta``, runs no statement here: a
commit without a budget costs what it did before. Reads are one short statement for every scope
asked, inline on the writer connection like the store's other single-row reads.
"""

from __future__ import annotations

from collections.abc import Sequence

from repertory.core.budget import Budget, Ledger, SpendDelta
from repertory.storage.ledger_rows import ledger_row
from repertory.storage.sqlite.connection import SqliteBase, db_errors

__all__ = ["SpendStatement", "SqliteBudgetTables", "spend_statement"]

SpendStatement = tuple[str, tuple[object, ...]]
"""An ``UPDATE`` of the ledgers and its parameters, run by a commit inside its transaction."""

_ADD_SPEND = (
    "UPDATE ledgers SET cost = cost + ?, tokens = tokens + ?, model_requests = model_requests + ?, "
    "tool_calls = tool_calls + ? WHERE scope IN ({})"
)
_UPSERT = "INSERT INTO ledgers (scope, budget) VALUES (?, ?) ON CONFLICT (scope) DO UPDATE SET budget = excluded.budget"
_LOAD = "SELECT scope, budget, cost, tokens, model_requests, tool_calls FROM ledgers WHERE scope IN ({})"


def _marks(count: int) -> str:
    return ", ".join("?" * count)


def spend_statement(spend: SpendDelta | None) -> SpendStatement | None:
    """The statement adding ``spend`` to the ledgers of its scopes, or ``None`` when it adds nothing.

    Built before the write is queued, so the writer holds the lock for the statement alone. A
    scope without a ledger matches no row: only budgeted scopes count spend.
    """
    if spend is None or spend.spend.empty or not spend.scopes:
        return None
    scopes = tuple(dict.fromkeys(spend.scopes))
    s = spend.spend
    return _ADD_SPEND.format(_marks(len(scopes))), (s.cost, s.tokens, s.model_requests, s.tool_calls, *scopes)


class SqliteBudgetTables(SqliteBase):
    """Budgets per scope and the spend counted against them; plumbing comes from ``SqliteBase``."""

    async def set_budget(self, scope: str, budget: Budget | None) -> None:
        """Set or replace ``scope``'s budget, keeping its spend; ``None`` removes its ledger."""
        sql, params = (
            ("DELETE FROM ledgers WHERE scope = ?", [scope])
            if budget is None
            else (_UPSERT, [scope, budget.model_dump_json()])
        )
        await self._write("set_budget", lambda conn: conn.execute(sql, params), atomic=False)

    async def load_ledgers(self, scopes: Sequence[str]) -> dict[str, Ledger]:
        """The ledgers of those of ``scopes`` that have a budget, in one read (none for no scopes)."""
        self._check_open()
        wanted = list(dict.fromkeys(scopes))
        if not wanted:
            return {}
        with db_errors("load_ledgers"):
            rows = self._writer.execute(_LOAD.format(_marks(len(wanted))), wanted).fetchall()
        return {
            scope: ledger_row(scope, budget, cost, tokens, requests, tool_calls)
            for scope, budget, cost, tokens, requests, tool_calls in rows
        }
