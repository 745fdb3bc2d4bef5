"""The demo's fleet: orchestrators that plan, spawn workers, wait for reviewers, and summarise.

Everything a session tree is for happens here at once: parallel children, approvals that a
reviewer task approves or rejects, a follow-up sent while a turn runs, a fork, and (on Ray) a host
killed in the middle and recovered. ``run_fleet`` returns what happened, measured from the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from repertory.core.result import RunResult
from repertory.demo.agents import AGENT_FOR
from repertory.errors import InvalidResumeToken, RepertoryError
from repertory.tree.handle import SessionHandle
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
    host_kills: int = 0
    retries: int = 0
    errors: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    wall: float = 0.0
    root_ids: list[str] = field(default_factory=list)

    @property
    def steps_per_second(self) -> float:
        """Model requests per second of wall time."""
        return self.steps / self.wall if self.wall else 0.0


async def _review(child: SessionHandle, stats: FleetStats, decision_index: int) -> RunResult | None:
    """The reviewer: approve most writes, reject every fourth (it tells the model why)."""
    for _ in range(50):
        pending = await child.pending_approvals()
        if not pending:
            return None
        token = pending[0].token
        try:
            if decision_index % 4 == 3:
                result = await child.reject(token, reason="reviewer: not in this sprint")
                stats.rejected += 1
            else:
                result = await child.approve(token, approval={"reviewer": "demo"})
                stats.approved += 1
            return result
        except InvalidResumeToken:
            await asyncio.sleep(0.05)  # a recovered run asked again with a new token: read it
        except RepertoryError:
            await asyncio.sleep(0.2)  # the host was restarting under us
        except Exception:  # a Ray error from a killed host: look again once it is back
            stats.retries += 1
            await asyncio.sleep(0.2)
    return None


async def _worker(rt: Runtime, orch: SessionHandle, subtask: str, project: int, stats: FleetStats, index: int) -> str:
    agent = AGENT_FOR.get(subtask, "worker")
    child = await orch.spawn(agent=agent, title=subtask)
    stats.sessions += 1
    turn = await child.send(f"{subtask} for project {project}")
    stats.turns += 1
    result = await turn.result()
    while result.status == "suspended":
        decided = await _review(child, stats, project * 3 + index)
        result = decided if decided is not None else await turn.result()
    if agent == "analyst":
        made = await _tool_calls(rt, child.id)  # awaited first: `x += await f()` reads x before the await
        stats.mcp_calls += made
    return result.text or ""


async def _tool_calls(rt: Runtime, session_id: str) -> int:
    """How many tool calls a session's conversation holds (an analyst's all went to the demo's MCP server)."""
    thread = await rt.store.load_thread(session_id)  # a session's thread id is its id
    revision = None if thread is None else thread.history_revision_id
    history = None if revision is None else await rt.store.load_history(revision)
    return 0 if history is None else sum(len(m.tool_calls) for m in history.messages)


async def _project(rt: Runtime, i: int, stats: FleetStats) -> None:
    orch = await rt.create_session(agent="orchestrator", title=f"project {i}")
    stats.sessions += 1
    stats.root_ids.append(orch.id)
    plan_turn = await orch.send(f"plan project {i}")
    stats.turns += 1
    if i == 0:
        # A follow-up sent while the plan turn runs: it is queued and runs right after it.
        follow = await orch.send("also keep the budget under 10k", if_busy="enqueue")
        stats.turns += 1
        stats.follow_ups += 1
        await follow.result()
    plan = await plan_turn.result()
    subtasks: list[str] = json.loads(plan.text or "{}").get("subtasks", [])
    reports = await asyncio.gather(*(_worker(rt, orch, s, i, stats, k) for k, s in enumerate(subtasks)))
    for subtask, report in zip(subtasks, reports, strict=True):
        await orch.notify(title=f"{subtask} finished", body=report)
        stats.turns += 1
    await orch.run("summarise the reports")
    stats.turns += 1
    if i == 1:
        alt = await orch.fork(title=f"project {i}, two weeks late")
        stats.sessions += 1
        stats.forks += 1
        await alt.run("summarise the reports assuming a two-week delay")
        stats.turns += 1
    stats.projects_done += 1


async def _kill_a_host(rt: Runtime, stats: FleetStats, at_fraction: float) -> None:
    """On Ray, kill one shared host once a fraction of the turns ran; Ray restarts it and it re-drives."""
    if rt.backend != "ray":
        return
    from repertory.actors.client import RayHostClient

    expected_turns = stats.projects * 9
    # Sampling the fleet's counters, as the live display does: there is no event to await for "40%".
    while stats.turns < at_fraction * expected_turns and stats.projects_done < stats.projects:  # noqa: ASYNC110
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
        outcomes = await asyncio.gather(*(_project(rt, i, stats) for i in range(projects)), return_exceptions=True)
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
    """Steps and tokens from the stored runs of every tree (the store is the truth)."""
    steps = inp = out = 0
    pending = list(stats.root_ids)
    while pending:
        sid = pending.pop()
        for run in await rt.store.list_runs(sid):
            steps += run.step_index
            inp += run.usage.input_tokens
            out += run.usage.output_tokens
        pending.extend(r.session_id for r in await rt.store.list_children(sid))
    stats.steps, stats.input_tokens, stats.output_tokens = steps, inp, out
