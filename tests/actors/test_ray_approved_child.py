"""A delegated child's approved run on Ray always goes on: after its host's store fails, and after its host dies.

The chaos soak's lost turn (issue 26, Ray + SQLite, seed 9): an orchestrator delegated to a worker,
the worker's ``charge`` was approved from another process, and the worker's next commit met
"database is locked". The decision's drive raised, the worker's turn and run stayed ``running``
in a live host (only a restarted host re-drives open turns), and the orchestrator's turn waiting on
the worker never ended. Here the approved tool itself, running in the worker's host, makes that
host's store fail its next commit once: the failure lands exactly where the soak's did.

The second test pins the other way that window can close: the worker's host killed while the
approved tool runs, after the redemption committed the turn back to ``running``. The restarted
host finds the turn open and drives it on.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, cast

import pytest
import ray
from ray.exceptions import ActorUnavailableError, RayActorError

from repertory import Agent, SessionHandle, StoreError, ToolContext, agent_tool, tool
from repertory.actors import shared_host_index
from repertory.core.messages import ModelMessage
from repertory.testing import ScriptedModel


def _orchestrator(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
    if messages[-1].role == "user":
        return {"tool": "worker", "args": {"task": "pay invoice 7"}}
    return {"text": f"planned: {messages[-1].tool_results[0].result}"}


def _worker(messages: list[ModelMessage], tools: Any) -> dict[str, Any]:
    if messages[-1].role == "user":
        return {"tool": "charge", "args": {"amount": 7}}
    return {"text": f"paid: {messages[-1].tool_results[0].result}"}


def _agents(charge: Any) -> dict[str, Agent]:
    return {
        "orchestrator": Agent(name="orchestrator", model=ScriptedModel(_orchestrator), tools=[agent_tool("worker")]),
        "worker": Agent(name="worker", model=ScriptedModel(_worker), tools=[charge]),
    }


async def _pending(root: SessionHandle) -> list[Any]:
    deadline = time.monotonic() + 60
    while not (pending := await root.pending_approvals(tree=True)):
        assert time.monotonic() < deadline, "no approval surfaced at the root"
        await asyncio.sleep(0.05)  # the child waiting is spawned by the model: there is no stream to await
    return pending


async def _wait_for(predicate: Any, within: float = 60.0) -> None:
    # Polling: the condition lives in a file a host process writes; there is nothing to await.
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


async def _check_ended(rt: Any, root: SessionHandle, plan_run_id: str) -> None:
    """The orchestrator's run and its one worker's turn and run all ended ``done``."""
    [child] = await root.children()
    [turn] = await rt.store.list_turns(child.id)
    run = await rt.store.load_run(turn.run_id)
    assert (turn.status, run.status) == ("done", "done")
    plan = await rt.store.load_run(plan_run_id)
    assert plan is not None and plan.status == "done"


async def test_an_approved_childs_next_commit_failing_on_its_hosts_store_still_ends_the_tree(
    ray_runtime: Any, tmp_path: Path
) -> None:
    log = tmp_path / "charge.log"

    @tool(requires_approval=True)
    def charge(ctx: ToolContext, amount: int) -> str:
        """Charge a card; then its host's store fails the next commit, as a locked SQLite did in the soak."""
        with open(log, "a") as fh:
            fh.write(f"charged {amount}\n")
        store: Any = cast(Any, ctx.services).store  # the host's own store (its TreeServices')
        commit = store.commit_session

        async def locked(**kwargs: Any) -> None:
            store.commit_session = commit  # once: the store is back for the next attempt
            raise StoreError("sqlite: commit_session failed: database is locked")

        store.commit_session = locked
        return f"charged {amount}"

    rt = await ray_runtime(_agents(charge), hosts=2)
    root = await rt.create_session(agent="orchestrator")
    plan = await root.send("plan project 7")
    [pending] = await _pending(root)

    # The decision landed, its drive did not: the worker's run is driven on, and the approver hears how it ended.
    approved = await asyncio.wait_for(root.approve(pending.token), 120)
    result = await asyncio.wait_for(plan.result(), 120)

    assert approved.status == "done" and "outcome unknown" in (approved.text or "")
    assert result.status == "done"
    assert result.text is not None and "outcome unknown" in result.text  # driven on: never charged twice
    assert log.read_text() == "charged 7\n"
    await _check_ended(rt, root, result.run_id)


async def test_an_approved_childs_host_killed_while_its_tool_runs_drives_it_on_after_the_restart(
    ray_runtime: Any, tmp_path: Path
) -> None:
    log = tmp_path / "charge.log"

    @tool(requires_approval=True)
    def charge(amount: int) -> str:
        """Charge a card (the host is killed while it runs)."""
        with open(log, "a") as fh:
            fh.write(f"charged {amount}\n")
        time.sleep(60)
        return f"charged {amount}"

    rt = await ray_runtime(_agents(charge), hosts=2)
    root = await rt.create_session(agent="orchestrator")
    plan = await root.send("plan project 7")
    [pending] = await _pending(root)
    child_host = rt.host.hosts[shared_host_index(pending.session_id, 2)]
    deciding = asyncio.ensure_future(root.approve(pending.token))
    await _wait_for(lambda: log.exists() and "charged" in log.read_text())  # redeemed, the tool running
    ray.kill(child_host, no_restart=False)

    with pytest.raises((RayActorError, ActorUnavailableError)):  # its host died under the decision
        await deciding
    result = await asyncio.wait_for(plan.result(), 120)

    assert result.status == "done"
    assert result.text is not None and "outcome unknown" in result.text
    assert log.read_text() == "charged 7\n"
    await _check_ended(rt, root, result.run_id)
