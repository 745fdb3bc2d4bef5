"""Budgets: spend caps on a run, a session tree or an owner, and the spend they are checked against.

A ``Budget`` caps four measures of ``Spend``: cost, tokens, model requests and tool calls. The
engine checks before every model request and every batch of tool calls; a measure that has reached
its cap stops the run (``Budget.crossed``). Nothing is reserved ahead: a request is sent when the
spend committed so far is under every cap, and its own usage is known only once it answered. So a
run overshoots by at most its last request, and a tree by at most what its runs had in flight in
parallel when the cap was reached (the docs' budgets page states and measures that bound).

A budget of a tree or an owner lives in the store with the spend counted against it (a
``Ledger`` row per scope, ``tree:<root id>`` or ``owner:<owner>``): every checkpoint adds what its
run spent since the previous one in the same transaction, so what is checked is what the store
holds, across crashes and processes. A run's own budget (``Agent(budget=...)``) is checked against
the run's committed usage, which its checkpoint already holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from repertory.core.state import ErrorInfo, RunState
from repertory.core.tree import SessionRecord
from repertory.core.trusted import trusted

__all__ = [
    "Budget",
    "BudgetLimit",
    "BudgetStore",
    "Crossing",
    "Ledger",
    "OnExceed",
    "Spend",
    "SpendDelta",
    "budget_scopes",
    "cancels_tree",
    "owner_scope",
    "parse_owner_budget",
    "run_spend",
    "tree_scope",
]

BudgetLimit = Literal["max_cost", "max_tokens", "max_model_requests", "max_tool_calls"]
"""The name of one cap of a ``Budget`` (what ``BudgetExceeded.limit`` says)."""

OnExceed = Literal["error", "cancel_tree"]
"""What a crossed budget does besides ending the run ``error``: nothing more, or cancel the whole tree."""


class Spend(BaseModel):
    """What was spent, in the four measures a ``Budget`` caps; ``a + b`` adds them."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    cost: float = 0.0
    tokens: int = 0
    model_requests: int = 0
    tool_calls: int = 0

    def __add__(self, other: Spend) -> Spend:
        if not isinstance(other, Spend):
            return NotImplemented
        # Sums of two valid records (a few per step of a budgeted run): built without validating again.
        return trusted(
            Spend,
            cost=self.cost + other.cost,
            tokens=self.tokens + other.tokens,
            model_requests=self.model_requests + other.model_requests,
            tool_calls=self.tool_calls + other.tool_calls,
        )

    def __sub__(self, other: Spend) -> Spend:
        if not isinstance(other, Spend):
            return NotImplemented
        return trusted(
            Spend,
            cost=self.cost - other.cost,
            tokens=self.tokens - other.tokens,
            model_requests=self.model_requests - other.model_requests,
            tool_calls=self.tool_calls - other.tool_calls,
        )

    @property
    def empty(self) -> bool:
        """Nothing spent (a checkpoint that adds nothing to a ledger writes nothing to it)."""
        return not (self.cost or self.tokens or self.model_requests or self.tool_calls)


def run_spend(run: RunState) -> Spend:
    """What one run has spent, as its checkpoint holds it."""
    return trusted(
        Spend,
        cost=run.cost or 0.0,
        tokens=run.usage.total_tokens,
        model_requests=run.usage.requests,
        tool_calls=run.tool_calls,
    )


class Crossing(NamedTuple):
    """A cap that ``Spend`` has reached: which one, what it allows, and what was used."""

    limit: BudgetLimit
    allowed: float
    used: float


_MEASURES: tuple[tuple[BudgetLimit, str], ...] = (
    ("max_cost", "cost"),
    ("max_tokens", "tokens"),
    ("max_model_requests", "model_requests"),
    ("max_tool_calls", "tool_calls"),
)


class Budget(BaseModel):
    """Caps on what a run, a session tree or an owner may spend; ``None`` leaves a measure uncapped.

    ``max_cost`` is in the currency of the models' price tables (a model without one spends no
    cost); ``max_tokens`` counts input and output tokens; ``max_model_requests`` every request to a
    model (compaction's summaries too); ``max_tool_calls`` every tool call started. ``warn_at`` is
    the fraction of a cap at which a ``budget.warning`` event is written once per run (``None``: no
    warning). ``on_exceed="cancel_tree"`` cancels the whole session tree once a run of it crossed
    the budget; the default ends only that run.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    max_cost: float | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, ge=0)
    max_model_requests: int | None = Field(default=None, ge=0)
    max_tool_calls: int | None = Field(default=None, ge=0)
    warn_at: float | None = Field(default=0.8, gt=0, lt=1)
    on_exceed: OnExceed = "error"

    @model_validator(mode="after")
    def _caps_something(self) -> Budget:
        if all(getattr(self, limit) is None for limit, _ in _MEASURES):
            raise ValueError("a Budget caps at least one of max_cost, max_tokens, max_model_requests, max_tool_calls")
        return self

    def crossed(self, spend: Spend, *, tool_calls: int = 0) -> Crossing | None:
        """The first cap ``spend`` has reached, or ``None`` when another request may start.

        ``tool_calls`` are the calls about to start: they are refused together when starting them
        would go past ``max_tool_calls`` (a batch is all or nothing, so the cap is never passed), or
        when cost or tokens are spent; a spent ``max_model_requests`` stops the next request only.
        """
        for limit, measure in _MEASURES:
            allowed = getattr(self, limit)
            if allowed is None:
                continue
            used = getattr(spend, measure)
            if measure == "tool_calls":  # a spent tool-call cap stops calls, not the request for a final answer
                if tool_calls and used + tool_calls > allowed:
                    return Crossing(limit, allowed, used)
            elif measure == "model_requests" and tool_calls:
                continue  # the last request allowed may have its calls run: they send no request
            elif used >= allowed:
                return Crossing(limit, allowed, used)
        return None

    def nearing(self, spend: Spend) -> Crossing | None:
        """The first cap ``spend`` has used ``warn_at`` of (or more), or ``None``."""
        if self.warn_at is None:
            return None
        for limit, measure in _MEASURES:
            allowed = getattr(self, limit)
            if allowed is None or not allowed:
                continue
            used = getattr(spend, measure)
            if used >= allowed * self.warn_at:
                return Crossing(limit, allowed, used)
        return None


def tree_scope(root_id: str) -> str:
    """The ledger scope of the session tree rooted at ``root_id``."""
    return f"tree:{root_id}"


def owner_scope(owner: str) -> str:
    """The ledger scope of everything ``owner``'s sessions spend."""
    return f"owner:{owner}"


def budget_scopes(session: SessionRecord) -> tuple[str, ...]:
    """The ledger scopes a session's runs spend against: its tree's, and its owner's when it has one."""
    root = tree_scope(session.root_id)
    return (root,) if session.owner is None else (root, owner_scope(session.owner))


def parse_owner_budget(spec: str) -> tuple[str, Budget | None]:
    """``OWNER=max_cost=5,max_tokens=200000`` (any ``Budget`` fields) as ``(owner, budget)``; ``OWNER=none`` removes.

    What ``repertory serve --budget`` takes. Every mistake (no owner, an unknown field, a value
    that is not a number, a budget that caps nothing) is a ``ValueError`` that says which.
    """
    owner, sep, rest = spec.partition("=")
    owner, rest = owner.strip(), rest.strip()
    if not sep or not owner or not rest:
        raise ValueError(f"{spec!r}: expected OWNER=max_cost=5,max_tokens=200000 (or OWNER=none)")
    if rest.lower() == "none":
        return owner, None
    fields: dict[str, str] = {}
    for item in rest.split(","):
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key or not value:
            raise ValueError(f"{spec!r}: {item.strip()!r} is not FIELD=VALUE")
        if key not in Budget.model_fields:
            raise ValueError(f"{spec!r}: unknown field {key!r} (known: {', '.join(Budget.model_fields)})")
        fields[key] = value
    try:
        return owner, Budget.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ValueError(f"{spec!r}: {'.'.join(map(str, first['loc'])) or 'budget'}: {first['msg']}") from None


def cancels_tree(error: ErrorInfo | None) -> bool:
    """Whether a run that failed with ``error`` crossed a budget whose ``on_exceed`` is ``"cancel_tree"``."""
    return error is not None and error.type == "BudgetExceeded" and error.details.get("on_exceed") == "cancel_tree"


class Ledger(BaseModel):
    """A stored budget and the spend counted against it since it was set (one per scope)."""

    model_config = ConfigDict(extra="forbid")
    scope: str
    budget: Budget
    spend: Spend = Field(default_factory=Spend)


@dataclass(frozen=True, slots=True)
class SpendDelta:
    """What a checkpoint adds to the ledgers of ``scopes``, in the same transaction as the run row."""

    scopes: tuple[str, ...]
    spend: Spend


@runtime_checkable
class BudgetStore(Protocol):
    """The ledger table every built-in store keeps: a budget per scope and the spend counted against it.

    ``repertory.testing.conformance.BudgetConformance`` is the contract. The spend grows only
    through ``commit_session(spend=...)``, in the transaction of the checkpoint that spent it.
    """

    async def set_budget(self, scope: str, budget: Budget | None) -> None:
        """Set ``scope``'s budget (``None``: remove its ledger); a budget set again keeps the spend counted so far."""

    async def load_ledgers(self, scopes: Sequence[str]) -> dict[str, Ledger]:
        """The ledgers of those of ``scopes`` that have a budget, by scope (one read for them all)."""
