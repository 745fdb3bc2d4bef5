"""The demo's fleet: orchestrators whose models delegate to workers, reviewers deciding at the root.

Everything a session tree is for happens here at once. No driver code spawns a child: each
orchestrator's model calls its ``worker`` and ``analyst`` tools three times in one step, so the runtime spawns the
three worker sessions and runs them in parallel (a model-built tree). Workers' writes wait for an
approval, which a reviewer task finds at the orchestrator (``pending_approvals(tree=True)``) and
decides there. One orchestrator gets a follow-up while its turn runs, one is forked, and (on Ray)
a host is killed in the middle: its turns are re-driven and every delegation finds the child it
had spawned, never a second. Beside the fleet, one more orchestrator runs on a tree budget too
small for its plan, with ``on_exceed="cancel_tree"``: the request past the cap is never sent and
the whole tree is cancelled. ``run_fleet`` returns what happened, measured from the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from repertory.core.budget import Budget
from repertory.demo.agents import REMOTE_TOOL
from repertory.errors import BudgetExceeded, InvalidResumeToken, RepertoryError, RunCancelled
from repertory.tree.cancel import OPEN_TURNS, subtree
from repertory.tree.handle import SessionHandle, TurnHandle
from repertory.tree.runtime import Runtime

__all__ = ["FleetStats", "run_fleet"]


@dataclass
class FleetStats:
    """Live counters while the fleet runs, then the totals read back from the store."""

    projects: int = 0
    projects_done: int = 0
    sessions: int = 0
    turns: int = 0
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    approved: int = 0
    rejected: int = 0
    forks: int = 0
    follow_ups: int = 0
    mcp_calls: int = 0
    a2a_calls: int = 0
    host_kills: int = 0
    retries: int = 0
    delegations: int = 0
    children: int = 0
    errors: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    wall: float = 0.0
    root_ids: list[str] = field(default_factory=list)
    budget_note: str = ""

    @property
    def steps_per_second(self) -> float:
        """Model requests per second of wall time."""
        return self.steps / self.wall if self.wall else 0.0


async def _decide(orch: SessionHandle, token: str, project: int, stats: FleetStats) -> None:
    """The reviewer's call on one write: approve most, reject every fourth project's (the model is told why)."""
    if project % 4 == 3:
        await orch.reject(token, reason="reviewer: not in this sprint")
        stats.rejected += 1
    else:
        await orch.approve(token, approval={"reviewer": "demo"})
        stats.approved += 1


async def _review(orch: SessionHandle, turn: asyncio.Future[Any], project: int, stats: FleetStats) -> None:
    """Decide, at the orchestrator, every approval its workers ask for, until its turn is over."""
    while not turn.done():
        # Sampling the tree as a human's inbox would: the workers waiting are spawned by the model.
        await asyncio.wait({turn}, timeout=0.05)
        try:
            for approval in await orch.pending_approvals(tree=True):
                if approval.kind == "approval":
                    await _decide(orch, approval.token, project, stats)  # returns once that worker's run rests again
        except InvalidResumeToken:
            pass  # a recovered run asked again with a new token: the next look reads it
        except RepertoryError:
            stats.retries += 1  # the host was restarting under us
        except Exception:  # a Ray error from a killed host: look again once it is back
            stats.retries += 1


async def _tool_calls(rt: Runtime, session_id: str, tool: str | None = None) -> int:
    """How many tool calls (of ``tool``, or any) a session's conversation holds (an analyst's all went to MCP)."""
    thread = await rt.store.load_thread(session_id)  # a session's thread id is its id
    revision = None if thread is None else thread.history_revision_id
    history = None if revision is None else await rt.store.load_history(revision)
    if history is None:
        return 0
    return sum(1 for m in history.messages for c in m.tool_calls if tool is None or c.tool_name == tool)


async def _project(rt: Runtime, i: int, stats: FleetStats) -> None:
    orch = await rt.create_session(agent="orchestrator", title=f"project {i}")
    stats.sessions += 1
    stats.root_ids.append(orch.id)
    plan_turn = await orch.send(f"plan project {i}")
    stats.turns += 1
    follow: TurnHandle | None = None
    if i == 0:
        # A follow-up sent while the plan turn runs (and delegates): it is queued and runs right after it.
        follow = await orch.send("also keep the budget under 10k", if_busy="enqueue")
        stats.turns += 1
        stats.follow_ups += 1
    planned = asyncio.ensure_future(plan_turn.result())
    await _review(orch, planned, i, stats)
    await planned
    if follow is not None:
        await follow.result()
    if i == 1:
        alt = await orch.fork(title=f"project {i}, two weeks late")
        stats.sessions += 1
        stats.forks += 1
        await alt.run("summarise the reports assuming a two-week delay")
        stats.turns += 1
    stats.projects_done += 1


OVER_BUDGET = Budget(max_model_requests=4, on_exceed="cancel_tree")
"""The tree budget of the demo's extra orchestrator: its plan and its three children's first requests."""


async def _over_budget(rt: Runtime, stats: FleetStats) -> None:
    """An orchestrator whose tree budget its plan outgrows: what the summary says of the trip and the cancel."""
    orch = await rt.create_session(agent="orchestrator", title="project over budget", budget=OVER_BUDGET)
    try:
        await (await orch.send("plan project over budget")).result()
        outcome = "not tripped"
    except BudgetExceeded as exc:
        outcome = f"BudgetExceeded ({exc.limit} {exc.used:g} of {exc.allowed:g})"
    except RunCancelled:
        outcome = "cancelled with its tree"  # a child crossed it first and the cancel reached the root
    members: list[str] = []
    left_open = 0
    async with asyncio.timeout(30):  # the tree cancel runs in the background of the child that tripped
        while True:
            members = await subtree(rt.store, orch.id)
            left_open = sum([len(await rt.store.list_turns(sid, OPEN_TURNS)) for sid in members])
            if not left_open:
                break
            await asyncio.sleep(0.05)
    ledger = await orch.budget()
    spent = 0 if ledger is None else ledger.spend.model_requests
    stats.budget_note = (
        f"root: {outcome}; {spent} requests spent of {OVER_BUDGET.max_model_requests}; "
        f"{len(members)} sessions, {left_open} turns left open"
    )


async def _kill_a_host(rt: Runtime, stats: FleetStats, at_fraction: float) -> None:
    """On Ray, kill one shared host once a fraction of the writes was reviewed; Ray restarts it and it re-drives."""
    if rt.backend != "ray":
        return
    from repertory.actors import RayHostClient

    # Sampling the fleet's counters, as the live display does: there is no event to await for "40%".
    wanted = at_fraction * stats.projects
    while stats.approved + stats.rejected < wanted and stats.projects_done < stats.projects:  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    if stats.projects_done >= stats.projects:
        return
    client = rt.host
    if not isinstance(client, RayHostClient):
        return
    client.kill_host(0)
    stats.host_kills += 1


async def run_fleet(
    rt: Runtime,
    projects: int,
    *,
    on_tick: Callable[[FleetStats], None] | None = None,
    kill_host_at: float | None = 0.4,
) -> FleetStats:
    """Run ``projects`` orchestrator trees concurrently; returns the measured totals."""
    stats = FleetStats(projects=projects)
    ticker: asyncio.Task[None] | None = None
    if on_tick is not None:
        tick = on_tick

        async def tick_loop() -> None:
            while True:
                tick(stats)
                await asyncio.sleep(0.2)

        ticker = asyncio.get_running_loop().create_task(tick_loop())
    killer = None
    if kill_host_at is not None:
        killer = asyncio.get_running_loop().create_task(_kill_a_host(rt, stats, kill_host_at))
    try:
        outcomes = await asyncio.gather(
            *(_project(rt, i, stats) for i in range(projects)), _over_budget(rt, stats), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                stats.errors.append(f"{type(outcome).__name__}: {outcome}")
    finally:
        for task in (ticker, killer):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    stats.wall = time.monotonic() - stats.started
    await _totals(rt, stats)
    if on_tick is not None:
        on_tick(stats)
    return stats


async def _totals(rt: Runtime, stats: FleetStats) -> None:
    """Sessions, turns, steps, tokens and delegations from every tree's stored records (the store is the truth).

    ``delegations`` counts the calls the orchestrators' models made to their worker tool and
    ``children`` the sessions spawned for them: equal, also across the host kill (no second child).
    ``mcp_calls`` counts the analysts' tool calls, which all went to the demo's MCP server, and
    ``a2a_calls`` the orchestrators' calls of their remote reviewer (``REMOTE_TOOL``), each one A2A task.
    """
    steps = inp = out = sessions = turns = delegations = children = mcp_calls = 0
    a2a_calls = 0
    for root_id in stats.root_ids:
        a2a_calls += await _tool_calls(rt, root_id, REMOTE_TOOL)
    pending = list(stats.root_ids)
    while pending:
        sid = pending.pop()
        sessions += 1
        turns += len(await rt.store.list_turns(sid))
        for run in await rt.store.list_runs(sid):
            steps += run.step_index
            inp += run.usage.input_tokens
            out += run.usage.output_tokens
            delegations += len(run.delegations)
        kids = await rt.store.list_children(sid)
        children += sum(1 for k in kids if k.lineage.kind == "spawned")
        for kid in kids:
            if kid.agent == "analyst":
                mcp_calls += await _tool_calls(rt, kid.session_id)
        pending.extend(r.session_id for r in kids)
    stats.steps, stats.input_tokens, stats.output_tokens = steps, inp, out
    stats.sessions, stats.turns, stats.delegations, stats.children = sessions, turns, delegations, children
    stats.mcp_calls, stats.a2a_calls = mcp_calls, a2a_calls
