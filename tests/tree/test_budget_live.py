"""A budget set through the local runtime on sessions already live applies from their next turn.

A host learns which budgets a session spends against when it activates the session (one read, none
per turn); ``Runtime.set_budget`` tells the local host, so a live session needs no reactivation.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from repertory import Budget, BudgetExceeded, Runtime
from repertory.core.budget import owner_scope, tree_scope
from repertory.testing.conformance.backend.doubles import Script, within


async def test_a_budget_set_on_a_live_tree_and_owner_applies_from_the_next_turn(tmp_path: Path) -> None:
    script = Script()
    async with await Runtime.start(
        store=f"sqlite:///{tmp_path / 'runs.db'}", agents={"assistant": script.agent()}
    ) as rt:
        root = await rt.create_session(agent="assistant", owner="carol")
        child = await root.spawn(title="child")
        await within(root.run("one"))
        await within(child.run("two"))  # both live now, with no budget to check

        await rt.set_budget(tree_scope(root.id), Budget(max_model_requests=1))
        await within(child.run("three"))  # a ledger counts from when it is set: this is its first request
        with pytest.raises(BudgetExceeded) as caught:
            await within(root.run("four"))
        assert (caught.value.scope, caught.value.used) == (tree_scope(root.id), 1)

        await rt.set_budget(tree_scope(root.id), None)
        await rt.set_budget(owner_scope("carol"), Budget(max_model_requests=1))
        await within(root.run("five"))
        with pytest.raises(BudgetExceeded) as caught:
            await within(child.run("six"))
        assert caught.value.scope == owner_scope("carol")
    assert script.prompts() == ["one", "two", "three", "five"]
