"""The table of what runs (``repertory sessions list --running`` and ``repertory sessions top``).

One row per queued or running turn (``repertory.tree.fleet.running_turns``), with what the turn's
whole session tree has spent and the tree's budget: a tree whose spend nears its caps is the one to
stop (``repertory sessions cancel ROOT --tree``).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from repertory.cli._tables import Field, Layout, fit_table
from repertory.core.budget import Budget
from repertory.tree.fleet import RunningTurn

__all__ = ["age", "budget_text", "running_table"]

_FIELDS = (
    Field("session", "id"),
    Field("root", "id"),
    Field("agent"),
    Field("turn"),
    Field("since", "number"),
    Field("tree tokens", "number"),
    Field("tree requests", "number"),
    Field("tree tool calls", "number"),
    Field("tree cost", "number"),
    Field("tree budget", "text", min_width=14),
)
_ALL = ("session", "root", "agent", "turn", "since", "tree tokens", "tree requests", "tree tool calls", "tree cost")
_LAYOUTS = (
    Layout((*_ALL, "tree budget")),
    Layout((*_ALL, "tree budget"), whole_ids=False),
    Layout(("session", "agent", "turn", "since", "tree tokens", "tree requests", "tree cost", "tree budget"), False),
    Layout(("session", "turn", "since", "tree tokens", "tree cost", "tree budget"), whole_ids=False),
    Layout(("session", "turn", "since", "tree tokens", "tree cost")),
    Layout(("session", "turn", "since", "tree tokens")),
)


def age(ms: int) -> str:
    """A duration, to the second: ``42s``, ``3m05s``, ``2h07m``, ``1d04h``."""
    s = max(ms, 0) // 1000
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def budget_text(budget: Budget | None) -> str:
    """The caps of a budget, ``max 10,000 tokens, max $2.0000``; empty without one."""
    if budget is None:
        return ""
    caps: list[str] = []
    if budget.max_cost is not None:
        caps.append(f"max ${budget.max_cost:,.4f}")
    if budget.max_tokens is not None:
        caps.append(f"max {budget.max_tokens:,} tokens")
    if budget.max_model_requests is not None:
        caps.append(f"max {budget.max_model_requests:,} requests")
    if budget.max_tool_calls is not None:
        caps.append(f"max {budget.max_tool_calls:,} tool calls")
    return ", ".join(caps)


def _row(turn: RunningTurn, now: int) -> tuple[str, ...]:
    spend = turn.tree_spend
    return (
        turn.session_id,
        turn.root_id,
        turn.agent,
        turn.status,
        age(now - turn.since),
        f"{spend.tokens:,}",
        f"{spend.model_requests:,}",
        f"{spend.tool_calls:,}",
        f"${spend.cost:,.4f}",
        budget_text(turn.tree_budget),
    )


def running_table(console: Console, turns: Sequence[RunningTurn], now: int, *, wide: bool = False) -> Table:
    """The turns as a table that fits ``console``, titled with how many turns of how many trees are open."""
    trees = len({t.root_id for t in turns})
    title = f"running now: {len(turns)} turn{'s' * (len(turns) != 1)} in {trees} tree{'s' * (trees != 1)}"
    rows = [_row(turn, now) for turn in turns]
    return fit_table(console, title, _FIELDS, rows, _LAYOUTS, wide=wide)
