"""The demo's live view and final summary, rendered with rich to fit an 80-column terminal.

rich narrows a table too wide for the terminal by bringing its widest columns down to one width,
cutting any header longer than that ("sessio…"). So the live view has six columns whose headers wrap
between short words ("approved / rejected"), which rich can narrow to ten characters each.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from repertory.demo.fleet import FleetStats

__all__ = ["progress_table", "summary_table"]


def progress_table(stats: FleetStats) -> Table:
    """One live line per counter while the fleet runs."""
    table = Table(title="repertory demo: a fleet of agent sessions", expand=False)
    for header in ("projects done", "sessions", "turns", "approved / rejected", "forks / follow-ups", "host kills"):
        table.add_column(header, justify="right")
    table.add_row(
        f"{stats.projects_done}/{stats.projects}",
        str(stats.sessions),
        str(stats.turns),
        f"{stats.approved} / {stats.rejected}",
        f"{stats.forks} / {stats.follow_ups}",
        str(stats.host_kills),
    )
    return table


def summary_table(stats: FleetStats, backend: str, store: str) -> Table:
    """The totals, read back from the store."""
    table = Table(title=f"summary ({backend} backend, store {store})")
    table.add_column("what")
    table.add_column("value", justify="right")
    rows = [
        ("orchestrator trees", f"{stats.projects_done}/{stats.projects}"),
        ("sessions", f"{stats.sessions}"),
        ("turns", f"{stats.turns}"),
        ("model steps", f"{stats.steps}"),
        ("tokens in / out", f"{stats.input_tokens:,} / {stats.output_tokens:,}"),
        ("delegated calls / child sessions", f"{stats.delegations} / {stats.children}"),
        ("approvals approved / rejected (at the root)", f"{stats.approved} / {stats.rejected}"),
        ("forks / follow-ups", f"{stats.forks} / {stats.follow_ups}"),
        ("MCP tool calls (the analysts, figures server)", f"{stats.mcp_calls}"),
        ("A2A tasks (a remote reviewer, second server)", f"{stats.a2a_calls}"),
        ("hosts killed and recovered", f"{stats.host_kills}"),
        ("calls retried while a host restarted", f"{stats.retries}"),
        ("wall time", f"{stats.wall:.2f} s"),
        ("steps/s", f"{stats.steps_per_second:,.0f}"),
    ]
    for what, value in rows:
        table.add_row(what, value)
    if stats.budget_note:
        table.add_row("tree budget tripped (max 4 requests, cancel_tree)", stats.budget_note)
    if stats.errors:
        table.add_row("errors", "; ".join(stats.errors[:3]))
    return table


def console() -> Console:
    """The console the demo writes to."""
    return Console()
