"""``BudgetConformance``: the ``BudgetStore`` contract (budgets and the spend counted against them).

A budget is set per scope and kept with its spend; setting it again keeps the spend; the spend
grows only by what ``commit_session(spend=...)`` carries, for the scopes that have a ledger, in
the checkpoint's transaction (a refused commit adds nothing); concurrent commits each add theirs;
deleting a tree's root drops its ledger.
"""

from __future__ import annotations

import asyncio

from repertory.core.budget import Budget, BudgetStore, Ledger, Spend, SpendDelta, owner_scope, tree_scope
from repertory.core.history import MessageHistory
from repertory.core.messages import ModelMessage
from repertory.core.protocols import protocol_gap
from repertory.core.store import TreeStore
from repertory.errors import CommitConflict
from repertory.testing.conformance._looks import Conformance
from repertory.testing.conformance.records import history_of, pointers
from repertory.testing.conformance.tree_records import session_record

__all__ = ["BudgetConformance"]

_SPEND = Spend(cost=0.25, tokens=120, model_requests=1, tool_calls=2)


async def _commit_step(store: TreeStore, thread_id: str, run_id: str, spend: SpendDelta | None) -> MessageHistory:
    """A run's first checkpoint on a fresh thread, carrying ``spend``; the history it committed."""
    history = history_of(f"hello from {run_id}")
    run, thread = pointers(history, thread_id=thread_id, run_id=run_id)
    await store.commit_session(run=run, thread=thread, history=history, spend=spend)
    return history


class BudgetConformance(Conformance):
    """Subclass with a ``store`` fixture (an open, empty store that is a ``TreeStore`` and a ``BudgetStore``)."""

    async def test_every_store_is_a_budget_store(self, store: TreeStore) -> None:
        assert isinstance(store, BudgetStore), protocol_gap(store, BudgetStore)

    async def test_a_budget_is_kept_with_no_spend_and_set_again_keeps_its_spend(self, store: TreeStore) -> None:
        assert isinstance(store, BudgetStore)
        scope = tree_scope("root")
        assert await store.load_ledgers([scope]) == {}
        await store.set_budget(scope, Budget(max_cost=1.0))
        assert await store.load_ledgers([scope, "owner:nobody"]) == {
            scope: Ledger(scope=scope, budget=Budget(max_cost=1.0))
        }
        await store.create_session(session_record("root"))
        await _commit_step(store, "root", "r1", SpendDelta((scope,), _SPEND))
        await store.set_budget(scope, Budget(max_tokens=500, on_exceed="cancel_tree"))
        ledger = (await store.load_ledgers([scope]))[scope]
        assert ledger.budget == Budget(max_tokens=500, on_exceed="cancel_tree")
        assert ledger.spend == _SPEND
        await store.set_budget(scope, None)
        assert await store.load_ledgers([scope]) == {}

    async def test_a_commit_adds_its_spend_to_every_ledger_it_names_that_exists(self, store: TreeStore) -> None:
        assert isinstance(store, BudgetStore)
        tree, owner = tree_scope("root"), owner_scope("alice")
        await store.set_budget(tree, Budget(max_model_requests=10))
        await store.set_budget(owner, Budget(max_cost=5.0))
        await store.create_session(session_record("root"))
        history = await _commit_step(store, "root", "r1", SpendDelta((tree, owner, owner_scope("unbudgeted")), _SPEND))
        base = history.revision_id
        history.append(ModelMessage.assistant("and again"))
        run, thread = pointers(history, thread_id="root", run_id="r1", step_index=1)
        await store.commit_session(
            run=run, thread=thread, history=history, base_revision_id=base, spend=SpendDelta((tree,), _SPEND)
        )
        ledgers = await store.load_ledgers([tree, owner, owner_scope("unbudgeted")])
        assert set(ledgers) == {tree, owner}
        assert ledgers[tree].spend == _SPEND + _SPEND
        assert ledgers[owner].spend == _SPEND
        # A commit without spend, or with nothing spent, changes no ledger.
        await _commit_step(store, "other", "r2", None)
        await _commit_step(store, "third", "r3", SpendDelta((tree,), Spend()))
        assert (await store.load_ledgers([tree]))[tree].spend == _SPEND + _SPEND

    async def test_a_refused_commit_adds_nothing(self, store: TreeStore) -> None:
        assert isinstance(store, BudgetStore)
        scope = tree_scope("root")
        await store.set_budget(scope, Budget(max_cost=1.0))
        await store.create_session(session_record("root"))
        await _commit_step(store, "root", "r1", SpendDelta((scope,), _SPEND))
        try:  # the thread has a head now: a commit that says it has none is refused whole
            await _commit_step(store, "root", "r2", SpendDelta((scope,), _SPEND))
        except CommitConflict:
            pass
        else:
            raise AssertionError("a commit over a moved head was accepted")
        assert (await store.load_ledgers([scope]))[scope].spend == _SPEND

    async def test_concurrent_commits_each_add_their_spend(self, store: TreeStore) -> None:
        assert isinstance(store, BudgetStore)
        scope = tree_scope("root")
        await store.set_budget(scope, Budget(max_tool_calls=1_000))
        one = Spend(cost=0.5, tokens=10, model_requests=1, tool_calls=1)
        await asyncio.gather(*(_commit_step(store, f"t{i}", f"r{i}", SpendDelta((scope,), one)) for i in range(20)))
        spent = (await store.load_ledgers([scope]))[scope].spend
        assert (spent.tokens, spent.model_requests, spent.tool_calls) == (200, 20, 20)
        assert abs(spent.cost - 10.0) < 1e-9

    async def test_deleting_the_root_drops_its_tree_ledger_and_no_other(self, store: TreeStore) -> None:
        assert isinstance(store, BudgetStore)
        await store.create_session(session_record("root"))
        await store.create_session(session_record("kept"))
        await store.set_budget(tree_scope("root"), Budget(max_cost=1.0))
        await store.set_budget(tree_scope("kept"), Budget(max_cost=1.0))
        await store.set_budget(owner_scope("alice"), Budget(max_cost=1.0))
        await store.delete_sessions(["root"])
        left = await store.load_ledgers([tree_scope("root"), tree_scope("kept"), owner_scope("alice")])
        assert set(left) == {tree_scope("kept"), owner_scope("alice")}
