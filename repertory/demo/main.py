"""The demo from start to finish: runtime, fleet, live view, summary, export and DuckDB answers."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from repertory._extras import installed
from repertory.core.model import Model
from repertory.demo.agents import make_agents
from repertory.demo.display import console, progress_table, summary_table
from repertory.demo.fleet import FleetStats, run_fleet
from repertory.tree.runtime import Runtime

__all__ = ["answer_table", "run_demo"]


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
    options: dict[str, Any] = {"hosts": 2, "keep_hosts": False} if backend == "ray" else {}
    options.update(runtime_options or {})
    out.print(f"[bold]repertory demo[/]: {sessions} orchestrators on the {backend} backend, store {escape(store)}")
    async with (
        _remote_reviewer() as a2a_url,
        await Runtime.start(
            store=store, backend=backend, agents=make_agents(delay=delay, model=model, a2a_url=a2a_url), **options
        ) as rt,
    ):
        if live:
            with Live(progress_table(FleetStats(projects=sessions)), console=out, refresh_per_second=8) as view:
                stats = await run_fleet(rt, sessions, on_tick=lambda s: view.update(progress_table(s)))
        else:
            stats = await run_fleet(rt, sessions)
        out.print(summary_table(stats, backend, store))
        await _export_and_ask(rt, export_dir or os.path.join(".repertory", "export"), stats)
    return stats


@asynccontextmanager
async def _remote_reviewer() -> AsyncIterator[str | None]:
    """The demo's A2A reviewer, served on loopback for the run (its URL); ``None`` without the ``a2a`` extra."""
    if not installed("a2a"):
        yield None
        return
    from repertory.demo.a2a_agent import serve_reviewer

    async with serve_reviewer() as url:
        yield url


async def _export_and_ask(rt: Runtime, out_dir: str, stats: FleetStats) -> None:
    """Export the run history to Parquet and answer a few questions with DuckDB."""
    out = console()
    try:
        from repertory.analytics import connect
        from repertory.storage.export import export_parquet
    except ImportError as exc:  # the analytics extra is part of the default install; say so if not
        out.print(f"[yellow]export skipped:[/] {escape(str(exc))}")
        return
    report = await export_parquet(rt.store, out_dir)
    counts = ", ".join(f"{name} {t.total_rows:,}" for name, t in report.tables.items())
    out.print(f"[bold]Parquet export[/] in {escape(out_dir)} ({report.elapsed_s:.2f} s): {counts}")
    db = connect(out_dir)
    # Columns named in words that wrap ("tokens in", not "input_tokens"): an 80-column terminal holds every table.
    questions = {
        "messages by role": "SELECT role, count(*) AS messages FROM messages GROUP BY role ORDER BY messages DESC",
        "tool calls by tool and outcome": (
            "SELECT tool_name AS tool, CASE WHEN is_error THEN 'error' ELSE 'ok' END AS outcome, count(*) AS calls "
            "FROM tool_calls GROUP BY ALL ORDER BY tool, outcome"
        ),
        "delegations the models made (calls linked to their child sessions)": (
            'SELECT tool_name AS tool, count(*) AS calls, count(DISTINCT child_session_id) AS "child sessions" '
            "FROM tool_calls WHERE child_session_id IS NOT NULL GROUP BY tool_name"
        ),
        "tokens of the three largest trees": (
            'SELECT s.session_id AS tree, u.sessions, u.runs, u.input_tokens AS "tokens in", '
            'u.output_tokens AS "tokens out", u.total_tokens AS "total tokens" '
            "FROM sessions s, tree_usage(s.session_id) u "
            "WHERE s.parent_id IS NULL ORDER BY u.total_tokens DESC LIMIT 3"
        ),
    }
    for title, sql in questions.items():
        try:
            relation = db.sql(sql)
            columns = [str(c) for c in relation.columns]
            rows = relation.fetchall()
        except Exception as exc:  # a question the export cannot answer is reported, never fatal
            out.print(f"[yellow]{escape(title)}: could not answer ({escape(str(exc))})[/]")
            continue
        out.print(answer_table(f"DuckDB: {title}", columns, rows))


def answer_table(title: str, columns: list[str], rows: list[tuple[Any, ...]]) -> Table:
    """A query's answer as a table that keeps every value whole.

    A column of numbers is right-aligned (thousands separated) and its header may wrap; a column
    of single words (ids, names) never wraps, so an id is never cut: rich narrows the other columns.
    Values are text, never rich markup.
    """
    table = Table(title=title)
    for i, column in enumerate(columns):
        values = [row[i] for row in rows]
        numeric = bool(values) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        words = all(isinstance(v, str) and len(v.split()) <= 1 for v in values if v is not None)
        table.add_column(column, justify="right" if numeric else "left", no_wrap=words and not numeric)
    for row in rows:
        table.add_row(
            *(
                Text("" if v is None else f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v))
                for v in row
            )
        )
    return table
