"""The ledger table (``core.budget``) of ``PostgresSessionStore`` (schema version 13): budgets and their spend.

A row holds a scope's budget as JSON and the spend counted against it in columns of its own, so
setting a budget again rewrites the JSON alone, keeping the spend. A checkpoint adds its spend
through ``repertory_spend`` (``schema``) in the statement that calls the commit function, so in
its transaction and its round trip; ``lone_spend_sql`` and ``spend_arrays`` build that part of
the statement for the commit paths (``_group``, the store's own). A checkpoint that spent
nothing, or carries no ``SpendDelta``, sends the commit statement it always did.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from repertory.core.budget import Budget, Ledger, Spend, SpendDelta
from repertory.errors import StoreError
from repertory.storage.ledger_rows import ledger_row
from repertory.storage.postgres.connection import PgBase

__all__ = ["SPEND_ARRAYS", "PgBudgetTables", "SpendParams", "lone_spend_sql", "spend_arrays", "spend_params"]

SPEND_ARRAYS = "%s::integer[], %s::text[], %s::float8[], %s::bigint[], %s::bigint[], %s::bigint[]"
"""The placeholders of ``repertory_spend``'s arguments after the outcomes, as ``spend_arrays`` fills them."""

_UPSERT = (
    "INSERT INTO repertory.ledgers (scope, budget) VALUES (%s, %s) "
    "ON CONFLICT (scope) DO UPDATE SET budget = excluded.budget"
)
_LOAD = "SELECT scope, budget, cost, tokens, model_requests, tool_calls FROM repertory.ledgers WHERE scope = ANY(%s)"


class SpendParams(NamedTuple):
    """What one checkpoint adds, and to which ledgers (deduplicated scopes)."""

    scopes: list[str]
    spend: Spend


def spend_params(spend: SpendDelta | None) -> SpendParams | None:
    """``spend`` as a commit sends it, or ``None`` when it adds nothing (the commit sends no spend)."""
    if spend is None or spend.spend.empty or not spend.scopes:
        return None
    return SpendParams(list(dict.fromkeys(spend.scopes)), spend.spend)


def spend_arrays(members: Sequence[SpendParams | None]) -> list[list[Any]]:
    """The values of ``SPEND_ARRAYS`` for commits in batch order (a member without spend adds nothing)."""
    counts: list[int] = []
    scopes: list[str] = []
    cost: list[float] = []
    tokens: list[int] = []
    requests: list[int] = []
    tool_calls: list[int] = []
    for member in members:
        spent, named = (Spend(), []) if member is None else (member.spend, member.scopes)
        counts.append(len(named))
        scopes += named
        cost.append(spent.cost)
        tokens.append(spent.tokens)
        requests.append(spent.model_requests)
        tool_calls.append(spent.tool_calls)
    return [counts, scopes, cost, tokens, requests, tool_calls]


def lone_spend_sql(commit: str, ctes: Sequence[str] = ()) -> str:
    """One statement: ``commit`` (a ``SELECT`` calling ``repertory_commit``), then its spend.

    The commit is a CTE whose row the spend call reads, so it runs first (the thread row is
    locked before any ledger row, as in a batch) and a commit that fails fails the statement,
    adding nothing. ``ctes`` are the statement's other CTEs (a turn's, a session's rewrite):
    PostgreSQL allows data-modifying CTEs only at the top level, so they go beside it.
    """
    return (
        f"WITH {', '.join([*ctes, f'c AS ({commit})'])} SELECT repertory.repertory_spend(NULL, {SPEND_ARRAYS}) FROM c"
    )


class PgBudgetTables(PgBase):
    """Budgets per scope and the spend counted against them."""

    async def set_budget(self, scope: str, budget: Budget | None) -> None:
        """Set or replace ``scope``'s budget, keeping its spend; ``None`` removes its ledger."""
        async with self.connection("set_budget") as conn:
            if budget is None:
                await conn.execute("DELETE FROM repertory.ledgers WHERE scope = %s", (scope,))
            else:
                await conn.execute(_UPSERT, (scope, budget.model_dump_json()))

    async def load_ledgers(self, scopes: Sequence[str]) -> dict[str, Ledger]:
        """The ledgers of those of ``scopes`` that have a budget, in one read (none for no scopes)."""
        wanted = list(dict.fromkeys(scopes))
        if self._closed:
            raise StoreError("store is closed")
        if not wanted:
            return {}
        async with self.connection("load_ledgers") as conn:
            cur = await conn.execute(_LOAD, (wanted,))
            rows = await cur.fetchall()
        return {
            scope: ledger_row(scope, budget, cost, tokens, requests, tool_calls)
            for scope, budget, cost, tokens, requests, tool_calls in rows
        }
