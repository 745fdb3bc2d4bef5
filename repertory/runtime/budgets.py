"""``BudgetGate``: the budgets one drive checks before each model request and each batch of tool calls.

Two kinds (``repertory.core.budget``): the run's own (``Agent(budget=...)``), checked against the
run's committed usage, which the drive holds in memory; and the stored ledgers of the drive's
scopes (its session tree's, its owner's), read from the store at every check, since runs in other
sessions and processes spend against them too. What a drive spent since its last checkpoint is
added to those ledgers by that checkpoint's own transaction (``delta``/``landed``), so the ledger
is what the store holds: a crash loses a step's spend together with the step.

The scopes a drive is given are those that had a ledger when its session was activated (its
host reads them once then, ``LocalHost``; the local backend refreshes live sessions when a budget
is set through the runtime): a drive without any checks nothing in the store and adds nothing to
its commits, so budgets cost only those who set one, and a turn reads nothing it did not before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from repertory.core.budget import Budget, BudgetStore, Crossing, Ledger, Spend, SpendDelta, run_spend
from repertory.core.state import RunState
from repertory.core.store import SessionStore

__all__ = ["RUN_SCOPE", "BudgetGate", "Verdict"]

RUN_SCOPE = "run"
"""The scope ``BudgetExceeded.scope`` names for the run's own budget."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a check found: the budget crossed (if any) and the budgets a warning is due for."""

    crossed: tuple[str, Budget, Crossing] | None = None
    warnings: tuple[tuple[str, Budget, Crossing], ...] = ()


class BudgetGate:
    """The budgets of one drive and the spend it has committed so far (built by its session)."""

    def __init__(self, store: SessionStore, run_budget: Budget | None, scopes: Sequence[str]) -> None:
        self._store = store if isinstance(store, BudgetStore) else None
        self._run_budget = run_budget
        # The scopes with a ledger (their budgets are read at each check, their spend added by each commit).
        self._ledgered: tuple[str, ...] = tuple(scopes) if self._store is not None else ()
        self._committed = Spend()
        self._warned: set[str] = set()
        # The ledgers read by the last request's check, until a commit lands: what the check of that
        # request's tool calls reads instead of the store (see ``check``).
        self._read: dict[str, Ledger] | None = None

    @property
    def active(self) -> bool:
        """Whether anything is checked at all."""
        return self._run_budget is not None or bool(self._ledgered)

    def open(self, run: RunState) -> None:
        """Take the run's committed spend as the base of what the next commits add."""
        self._committed = run_spend(run)

    async def check(self, run: RunState, *, tool_calls: int = 0) -> Verdict:
        """Whether a model request (``tool_calls=0``) or that many tool calls may start now.

        A request's check reads the ledgers from the store; the check of the tool calls its reply
        asks for reads what that check read, plus this drive's spend since (one read per step, not
        two): what other runs committed while the model answered is then counted from the next
        request on, so a tree's tool calls overshoot by at most one step's calls per run running
        in parallel, as its requests do by one request each.
        """
        spent = run_spend(run)
        warnings: list[tuple[str, Budget, Crossing]] = []
        if self._run_budget is not None:
            crossed = self._run_budget.crossed(spent, tool_calls=tool_calls)
            if crossed is not None:
                return Verdict((RUN_SCOPE, self._run_budget, crossed))
            self._nearing(RUN_SCOPE, self._run_budget, spent, warnings)
        if self._ledgered and self._store is not None:
            pending = spent - self._committed  # this drive's, not yet in the ledger
            read = self._read if tool_calls and self._read is not None else None
            if read is None:
                read = await self._store.load_ledgers(self._ledgered)
            self._read = None if tool_calls else read
            for scope, ledger in read.items():
                used = ledger.spend + pending
                crossed = ledger.budget.crossed(used, tool_calls=tool_calls)
                if crossed is not None:
                    return Verdict((scope, ledger.budget, crossed), tuple(warnings))
                self._nearing(scope, ledger.budget, used, warnings)
        return Verdict(None, tuple(warnings))

    def _nearing(self, scope: str, budget: Budget, used: Spend, into: list[tuple[str, Budget, Crossing]]) -> None:
        if scope in self._warned:
            return
        near = budget.nearing(used)
        if near is not None:
            self._warned.add(scope)
            into.append((scope, budget, near))

    def delta(self, run: RunState) -> SpendDelta | None:
        """What the next commit adds to the ledgers (``None``: nothing to add)."""
        if not self._ledgered:
            return None
        spent = run_spend(run) - self._committed
        return None if spent.empty else SpendDelta(self._ledgered, spent)

    def landed(self, delta: SpendDelta) -> None:
        """The commit that carried ``delta`` landed: its spend is in the ledgers now."""
        self._committed = self._committed + delta.spend
        self._read = None  # read before this spend landed: the next check reads again
