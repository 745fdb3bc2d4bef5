"""Budgets on every backend: a run's, a session tree's and an owner's, checked before each request and tool call.

A run past its budget ends ``error`` with ``BudgetExceeded`` (its attributes intact through the
store) and a ``budget.exceeded`` event, without sending the request or starting the calls; the
conversation stays one a model accepts. A tree's budget counts every spawned, delegated and
forked descendant, equals what the store holds of the tree's runs, and is overshot by at most one
request per run of the tree that was running in parallel when it was reached. It outlives the
runtime; ``on_exceed="cancel_tree"`` leaves nothing of the tree open.
"""

from __future__ import annotations

import asyncio

import pytest

from repertory.core.budget import Budget, owner_scope, tree_scope
from repertory.core.tree import SessionEvent
from repertory.errors import BudgetExceeded, RunCancelled
from repertory.runtime.agent import Agent
from repertory.runtime.tools import tool
from repertory.testing.conformance.backend.doubles import Recorder, Script, history, within
from repertory.testing.conformance.backend.runtimes import BackendSuite, RuntimeFactory
from repertory.tree.cancel import OPEN_TURNS, subtree
from repertory.tree.delegation import agent_tool
from repertory.tree.handle import SessionHandle
from repertory.tree.runtime import Runtime

__all__ = ["BudgetsConformance"]

WORKERS = 4
"""Children a tree delegates to in parallel in the overshoot test."""


async def _events(rt: Runtime, session_id: str, kind: str) -> list[SessionEvent]:
    return [e for e in await rt.store.load_events(session_id) if e.type == kind]


async def _until_settled(rt: Runtime, root: SessionHandle) -> None:
    """Wait until no turn of the tree is open (a tree cancel runs in the background)."""
    async with asyncio.timeout(20):
        while True:
            open_turns = [
                t for sid in await subtree(rt.store, root.id) for t in await rt.store.list_turns(sid, OPEN_TURNS)
            ]
            if not open_turns:
                return
            await asyncio.sleep(0.02)


def _looping(prompt: str, steps: int, *, tokens: int = 10, cost: float = 0.01) -> dict[str, list[object]]:
    """A plan for ``prompt``: ``steps`` tool steps (``note``), then a final reply; each request priced."""
    priced = {"usage": {"input_tokens": tokens, "output_tokens": tokens}, "cost": cost}
    plan: list[object] = [{"tool": "note", "args": {"text": f"{prompt}-{i}"}, **priced} for i in range(steps)]
    plan.append({"text": f"{prompt} done", **priced})
    return {prompt: plan}


class BudgetsConformance(BackendSuite):
    """``Agent(budget=...)``, ``create_session(budget=...)`` and owner budgets, on every backend."""

    async def test_a_run_budget_stops_the_run_before_the_request_past_it(self, make_runtime: RuntimeFactory) -> None:
        noted = Recorder()

        @tool
        def note(text: str) -> str:
            """Write a note."""
            noted.append(text)
            return "noted"

        script = Script(_looping("go", 5))  # type: ignore[arg-type]
        rt = await make_runtime(script.agent(tools=[note], budget=Budget(max_model_requests=2)))
        h = await rt.create_session(agent="assistant")
        turn = await h.send("go")
        with pytest.raises(BudgetExceeded) as caught:
            await within(turn.result())
        err = caught.value
        assert (err.limit, err.allowed, err.used, err.scope) == ("max_model_requests", 2, 2, "run")
        assert script.count("go") == 2, script.log
        assert noted.items() == ["go-0", "go-1"], noted.items()
        [exceeded] = await _events(rt, h.id, "budget.exceeded")
        assert {k: exceeded.data[k] for k in ("scope", "limit", "allowed", "used")} == {
            "scope": "run",
            "limit": "max_model_requests",
            "allowed": 2,
            "used": 2,
        }
        # The budget is per run: the next turn has its own, and the conversation is intact.
        assert (await within(h.run("after"))).text == "re: after"

    async def test_a_batch_of_tool_calls_past_the_cap_is_refused_whole_and_answered(
        self, make_runtime: RuntimeFactory
    ) -> None:
        noted = Recorder()

        @tool
        def note(text: str) -> str:
            """Write a note."""
            noted.append(text)
            return "noted"

        pair = [{"tool": "note", "args": {"text": t}} for t in ("a", "b")]
        script = Script({"go": [{"tools": pair}]})
        rt = await make_runtime(script.agent(tools=[note], budget=Budget(max_tool_calls=1)))
        h = await rt.create_session(agent="assistant")
        with pytest.raises(BudgetExceeded) as caught:
            await within((await h.send("go")).result())
        assert (caught.value.limit, caught.value.used) == ("max_tool_calls", 0)
        assert noted.items() == []
        results = [p for m in await history(rt, h) for p in m.tool_results]
        assert [r.is_error for r in results] == [True, True]
        assert all("not run" in str(r.result) for r in results)
        assert (await within(h.run("after"))).text == "re: after"

    async def test_a_warning_is_written_once_at_the_fraction(self, make_runtime: RuntimeFactory) -> None:
        @tool
        def note(text: str) -> str:
            """Write a note."""
            return "noted"

        script = Script(_looping("go", 4))  # type: ignore[arg-type]
        budget = Budget(max_model_requests=5, warn_at=0.5)
        rt = await make_runtime(script.agent(tools=[note], budget=budget))
        h = await rt.create_session(agent="assistant")
        assert (await within(h.run("go"))).text == "go done"
        [warning] = await _events(rt, h.id, "budget.warning")
        assert (warning.data["limit"], warning.data["used"], warning.data["allowed"]) == ("max_model_requests", 3, 5)
        assert await _events(rt, h.id, "budget.exceeded") == []

    async def test_a_tree_budget_counts_parallel_delegations_and_its_overshoot_is_bounded(
        self, make_runtime: RuntimeFactory
    ) -> None:
        @tool
        def note(text: str) -> str:
            """Write a note."""
            return "noted"

        boss = Script({"go": [{"tools": [{"tool": "worker", "args": {"task": f"w{i}"}} for i in range(WORKERS)]}]})
        plans: dict[str, list[object]] = {}
        for i in range(WORKERS):
            plans |= _looping(f"w{i}", 6)
        worker = Script(plans)  # type: ignore[arg-type]
        agents = {
            "boss": boss.agent("boss", tools=[agent_tool("worker")]),
            "worker": Agent(name="worker", model=worker.model(delay=0.005), tools=[note]),
        }
        rt = await make_runtime(agents)
        cap = 9
        root = await rt.create_session(agent="boss", budget=Budget(max_model_requests=cap))
        with pytest.raises(BudgetExceeded) as caught:
            await within((await root.send("go")).result(), 30)
        assert (caught.value.scope, caught.value.limit) == (tree_scope(root.id), "max_model_requests")
        ledger = await root.budget()
        assert ledger is not None and ledger.budget == Budget(max_model_requests=cap)
        stored = await root.usage(tree=True)
        sent = len(boss.log) + len(worker.log)
        # The ledger is what the store holds of the tree's runs, and every request sent was counted.
        assert ledger.spend.model_requests == stored.requests == sent
        assert ledger.spend.tokens == stored.total_tokens
        assert abs(ledger.spend.cost - 0.01 * len(worker.log)) < 1e-9
        # Reached, and overshot by at most one request per run running in parallel (the workers).
        overshoot = ledger.spend.model_requests - cap
        assert 0 <= overshoot <= WORKERS, f"{overshoot} requests past the cap with {WORKERS} parallel runs"

    async def test_cancel_tree_on_exceed_leaves_nothing_of_the_tree_open(self, make_runtime: RuntimeFactory) -> None:
        launched = Recorder()

        @tool
        def note(text: str) -> str:
            """Write a note."""
            return "noted"

        @tool(requires_approval=True)
        def launch(target: str) -> str:
            """Launch something (needs approval)."""
            launched.append(target)
            return "launched"

        boss = Script({"go": [{"tools": [{"tool": "worker", "args": {"task": t}} for t in ("ask", "spend")]}]})
        worker = Script({"ask": [{"tool": "launch", "args": {"target": "moon"}}], **_looping("spend", 5)})  # type: ignore[dict-item]
        held = worker.hold("spend", step=1)
        agents = {
            "boss": boss.agent("boss", tools=[agent_tool("worker")]),
            "worker": worker.agent("worker", tools=[note, launch]),
        }
        rt = await make_runtime(agents)
        # The boss's request, the asker's, and the spender's first two: its third is past the cap.
        budget = Budget(max_model_requests=4, on_exceed="cancel_tree")
        root = await rt.create_session(agent="boss", budget=budget)
        turn = await root.send("go")
        await held.reached()
        async with asyncio.timeout(10):
            while True:  # the asker is a child the model spawned: no stream of its own to await
                if await root.pending_approvals(tree=True):
                    break
                await asyncio.sleep(0.02)
        held.release()  # the spender's second request goes out; its third would pass the cap
        with pytest.raises((BudgetExceeded, RunCancelled)):
            await within(turn.result(), 20)
        await _until_settled(rt, root)
        assert await root.pending_approvals(tree=True) == []
        assert launched.items() == []
        statuses = {}
        for sid in await subtree(rt.store, root.id):
            record = await rt.store.load_session(sid)
            assert record is not None
            statuses[record.title or record.agent] = [t.status for t in await rt.store.list_turns(sid)]
        assert statuses["ask"] == ["cancelled"], statuses
        assert statuses["spend"] == ["error"], statuses
        assert statuses["boss"][0] in ("error", "cancelled"), statuses
        assert len(worker.log) + len(boss.log) == 4  # nothing was sent past the cap

    async def test_forks_count_against_the_tree_and_the_spend_outlives_the_runtime(
        self, make_runtime: RuntimeFactory
    ) -> None:
        make_runtime.require_durable()
        script = Script()
        rt = await make_runtime(script.agent())
        root = await rt.create_session(agent="assistant", budget=Budget(max_model_requests=3))
        await within(root.run("one"))
        fork = await root.fork()
        await within(fork.run("two"))
        await rt.close()

        again = await make_runtime(script.agent())
        root = await again.session(root.id)
        ledger = await root.budget()
        assert ledger is not None and ledger.spend.model_requests == 2
        await within(root.run("three"))
        with pytest.raises(BudgetExceeded) as caught:
            await within(root.run("four"))
        assert (caught.value.scope, caught.value.used) == (tree_scope(root.id), 3)
        assert script.prompts() == ["one", "two", "three"]

    async def test_a_fork_with_a_tree_of_its_own_spends_against_its_own_budget(
        self, make_runtime: RuntimeFactory
    ) -> None:
        script = Script()
        rt = await make_runtime(script.agent())
        root = await rt.create_session(agent="assistant", budget=Budget(max_model_requests=1))
        await within(root.run("one"))
        apart = await root.fork(own_tree=True, budget=Budget(max_model_requests=2))
        assert (apart.record.root_id, apart.lineage.kind, apart.lineage.parent_id) == (apart.id, "forked", None)
        assert await root.children() == []  # not the root's child: a walk or a cancel of its tree misses it
        await within(apart.run("two"))
        await within(apart.run("three"))
        with pytest.raises(BudgetExceeded) as caught:
            await within(apart.run("four"))
        assert caught.value.scope == tree_scope(apart.id)
        ledger = await root.budget()
        assert ledger is not None and ledger.spend.model_requests == 1
        with pytest.raises(ValueError, match="own_tree"):
            await root.fork(budget=Budget(max_model_requests=5))

    async def test_an_owner_budget_caps_every_session_of_that_owner_only(self, make_runtime: RuntimeFactory) -> None:
        script = Script()
        rt = await make_runtime(script.agent())
        await rt.set_budget(owner_scope("alice"), Budget(max_model_requests=2))
        first = await rt.create_session(agent="assistant", owner="alice")
        second = await rt.create_session(agent="assistant", owner="alice")
        other = await rt.create_session(agent="assistant", owner="bob")
        await within(first.run("a1"))
        await within(second.run("a2"))
        with pytest.raises(BudgetExceeded) as caught:
            await within(second.run("a3"))
        assert caught.value.scope == owner_scope("alice")
        for n in range(3):
            await within(other.run(f"b{n}"))
        assert script.prompts() == ["a1", "a2", "b0", "b1", "b2"]
