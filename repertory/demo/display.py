"""The demo's live view and final summary, rendered with rich."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from repertory.demo.fleet import FleetStats

__all__ = ["progress_table", "summary_table"]


def progress_table(stats: FleetStats) -> Table:
    """One live line per counter while the fleet runs."""
    table = Table(title="repertory demo: a fleet of agent sessions", expand=False)
    table.add_column("projects done", justify="right")
    table.add_column("sessions", justify="right")
    table.add_column("turns", justify="right")
    table.add_column("approved", justify="right")
    table.add_column("rejected", justify="right")
    table.add_column("forks", justify="right")
    table.add_column("follow-ups", justify="right")
    table.add_column("host kills", justify="right")
    table.add_row(
        f"{stats.projects_done}/{stats.projects}",
        str(stats.sessions),
        str(stats.turns),
        str(stats.approved),
        str(stats.rejected),
        str(stats.forks),
        str(stats.follow_ups),
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
        ("hosts killed and recovered", f"{stats.host_kills}"),
        ("calls retried while a host restarted", f"{stats.retries}"),
        ("wall time", f"{stats.wall:.2f} s"),
        ("steps/s", f"{stats.steps_per_second:,.0f}"),
    ]
    for what, value in rows:
        table.add_row(what, value)
    if stats.errors:
        table.add_row("errors", "; ".join(stats.errors[:3]))
    return table


def console() -> Console:
    """The console the demo writes to."""
    return Console()
