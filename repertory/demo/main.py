"""The demo from start to finish: runtime, fleet, live view, summary, export and DuckDB answers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from rich.live import Live
from rich.table import Table

from repertory.core.model import Model
from repertory.demo.agents import make_agents
from repertory.demo.display import console, progress_table, summary_table
from repertory.demo.fleet import FleetStats, run_fleet
from repertory.tree.runtime import Runtime

__all__ = ["run_demo"]


async def run_demo(
    *,
    sessions: int = 50,
    backend: Literal["local", "ray"] = "ray",
    store: str = "sqlite:///.repertory/repertory.db",
    model: Model | None = None,
    delay: float = 0.2,
    export_dir: str | None = None,
    live: bool = True,
    runtime_options: dict[str, Any] | None = None,
) -> FleetStats:
    """Run the demo fleet and print what happened; returns the totals.

    ``runtime_options`` go to ``Runtime.start`` (``repertory demo --otlp-endpoint`` hands the Ray
    hosts their span exporter's settings this way).
    """
    out = console()
    if store.startswith("sqlite:///") and not store.startswith("sqlite:////"):
        Path(store[len("sqlite:///") :].split("?")[0]).parent.mkdir(parents=True, exist_ok=True)
    agents = make_agents(delay=delay, model=model)
    options: dict[str, Any] = {"hosts": 2, "keep_hosts": False} if backend == "ray" else {}
    options.update(runtime_options or {})
    out.print(f"[bold]repertory demo[/]: {sessions} orchestrators on the {backend} backend, store {store}")
    async with await Runtime.start(store=store, backend=backend, agents=agents, **options) as rt:
        if live:
            with Live(progress_table(FleetStats(projects=sessions)), console=out, refresh_per_second=8) as view:
                stats = await run_fleet(rt, sessions, on_tick=lambda s: view.update(progress_table(s)))
        else:
            stats = await run_fleet(rt, sessions)
        out.print(summary_table(stats, backend, store))
        await _export_and_ask(rt, export_dir or os.path.join(".repertory", "export"), stats)
    return stats


async def _export_and_ask(rt: Runtime, out_dir: str, stats: FleetStats) -> None:
    """Export the run history to Parquet and answer a few questions with DuckDB."""
    out = console()
    try:
        from repertory.analytics import connect
        from repertory.storage.export import export_parquet
    except ImportError as exc:  # the analytics extra is part of the default install; say so if not
        out.print(f"[yellow]export skipped:[/] {exc}")
        return
    report = await export_parquet(rt.store, out_dir)
    counts = ", ".join(f"{name} {t.total_rows:,}" for name, t in report.tables.items())
    out.print(f"[bold]Parquet export[/] in {out_dir} ({report.elapsed_s:.2f} s): {counts}")
    db = connect(out_dir)
    questions = {
        "messages by role": "SELECT role, count(*) AS n FROM messages GROUP BY role ORDER BY n DESC",
        "tool calls by tool and outcome": (
            "SELECT tool_name, is_error, count(*) AS n FROM tool_calls GROUP BY ALL ORDER BY tool_name, is_error"
        ),
        "delegations the models made (calls linked to their child sessions)": (
            "SELECT tool_name, count(*) AS calls, count(DISTINCT child_session_id) AS child_sessions "
            "FROM tool_calls WHERE child_session_id IS NOT NULL GROUP BY tool_name"
        ),
        "tokens of the three largest trees": (
            "SELECT s.session_id, u.* FROM sessions s, tree_usage(s.session_id) u "
            "WHERE s.parent_id IS NULL ORDER BY u.total_tokens DESC LIMIT 3"
        ),
    }
    for title, sql in questions.items():
        try:
            relation = db.sql(sql)
            columns = [str(c) for c in relation.columns]
            rows = relation.fetchall()
        except Exception as exc:  # a question the export cannot answer is reported, never fatal
            out.print(f"[yellow]{title}: could not answer ({exc})[/]")
            continue
        table = Table(title=f"DuckDB: {title}")
        for column in columns:
            table.add_column(column)
        for row in rows:
            table.add_row(*("" if v is None else str(v) for v in row))
        out.print(table)
