"""Seeing what runs: every queued or running turn of the fleet, with what its whole tree has spent.

``running_turns`` is what the faces show as "running now" (``repertory sessions list --running``,
``repertory sessions top``, the web UI's runs page): the turns a kill switch
(``SessionHandle.cancel(tree=True)``) would stop, each beside the spend of the session tree it belongs
to and that tree's budget, so a person can tell the tree that is burning money from the one that idles.

A tree's spend is summed from its runs' checkpoints (``run_spend``): what every session of the tree
has spent since it was made. The budget is the tree's ledger (``tree:<root id>``) on a store that keeps
ledgers (``BudgetStore``); its own ``spend`` counts only what was spent since the budget was set.
Each tree is read once per call, however many of its turns are open: a fleet of wide trees costs a walk
per tree, not per turn.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from pydantic import BaseModel, ConfigDict

from repertory.core.budget import Budget, BudgetStore, Spend, run_spend, tree_scope
from repertory.core.store import TreeStore
from repertory.core.tree import SessionRecord

__all__ = ["RunningTurn", "running_turns", "tree_spend"]


class RunningTurn(BaseModel):
    """One open turn: whose it is, since when, and what its session tree has spent against which budget."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    session_id: str
    root_id: str
    agent: str
    title: str | None = None
    owner: str | None = None
    submission_id: str
    run_id: str
    status: Literal["queued", "running"]
    since: int
    """When the turn took its status (ms since the epoch): queued when it was sent, running when it started."""
    tree_spend: Spend
    """What every session of the turn's tree has spent, summed over their runs."""
    tree_budget: Budget | None = None
    """The tree's budget (its ``tree:<root>`` ledger), or ``None``: none set, or a store without ledgers."""


async def tree_spend(store: TreeStore, root_id: str) -> Spend:
    """What the tree rooted at ``root_id`` has spent: ``run_spend`` summed over every run of every session of it.

    Walks the tree level by level from the root (``list_children``), reading each level's children
    and runs concurrently; an unknown root is a tree of one session without runs (nothing spent).
    """
    total = Spend()
    frontier = [root_id]
    while frontier:
        runs, children = await asyncio.gather(
            asyncio.gather(*(store.list_runs(sid) for sid in frontier)),
            asyncio.gather(*(store.list_children(sid) for sid in frontier)),
        )
        for listed in runs:
            for run in listed:
                total = total + run_spend(run)
        frontier = [child.session_id for level in children for child in level]
    return total


async def running_turns(store: TreeStore, *, owner: str | None = None) -> list[RunningTurn]:
    """Every queued or running turn of the store (``owner``: only that owner's sessions'), oldest first.

    A turn whose session is gone (deleted meanwhile) is left out. Each tree's spend is read once, and
    the budgets of all the trees in one read of the ledgers.
    """
    turns = await store.list_open_turns()
    ids = list(dict.fromkeys(t.session_id for t in turns))
    found = await asyncio.gather(*(store.load_session(sid) for sid in ids))
    records: dict[str, SessionRecord] = {
        sid: record
        for sid, record in zip(ids, found, strict=True)
        if record is not None and (owner is None or record.owner == owner)
    }
    shown = [t for t in turns if t.session_id in records]
    roots = list(dict.fromkeys(records[t.session_id].root_id for t in shown))
    spends = dict(zip(roots, await asyncio.gather(*(tree_spend(store, r) for r in roots)), strict=True))
    budgets: dict[str, Budget] = {}
    if roots and isinstance(store, BudgetStore):
        ledgers = await store.load_ledgers([tree_scope(r) for r in roots])
        budgets = {r: ledgers[tree_scope(r)].budget for r in roots if tree_scope(r) in ledgers}
    shown.sort(key=lambda t: (t.created_at, t.session_id, t.seq))
    out: list[RunningTurn] = []
    for turn in shown:
        record = records[turn.session_id]
        status: Literal["queued", "running"] = "running" if turn.status == "running" else "queued"
        out.append(
            RunningTurn(
                session_id=record.session_id,
                root_id=record.root_id,
                agent=record.agent,
                title=record.title,
                owner=record.owner,
                submission_id=turn.submission_id,
                run_id=turn.run_id,
                status=status,
                since=turn.updated_at,
                tree_spend=spends[record.root_id],
                tree_budget=budgets.get(record.root_id),
            )
        )
    return out
