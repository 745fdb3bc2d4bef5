"""The step report's tables, as printed after a run."""

from __future__ import annotations

from benchmarks.harness.tables import table, yes
from benchmarks.steps.report import SCRIPT_LABELS, TARGET_DISK_RATIO, StepsReport

__all__ = ["render"]


def _mb(n: int) -> str:
    return f"{n / 1e6:,.2f} MB"


def _target(t: float | None) -> str:
    return f">= {t:g}x" if t else "-"


def render(report: StepsReport) -> str:
    """The human-readable tables."""
    steps = report.steps
    parts = [
        f"Step benchmark ({report.mode}): {steps:,} tool steps + 1 final reply = {steps + 1:,} model "
        f"requests per run, ~{report.message_pair_json_bytes:,} B of message JSON per step"
    ]
    m = report.machine
    if m.git_commit != m.git_commit_after or m.repertory_tree_dirty_after:
        parts.append(
            f"NOTE: repertory/ changed while this ran (commit {m.git_commit}, dirty at start: "
            f"{m.repertory_tree_dirty}; after: {m.git_commit_after}, dirty: {m.repertory_tree_dirty_after}). "
            "The figures are for the code imported at start."
        )
    commits = report.repertory.commits
    rows = []
    for r in report.repertory.summary:
        per_step = commits["idempotent" if r.idempotent else "default"].commits_per_tool_step
        rows.append(
            [
                f"repertory {SCRIPT_LABELS[r.script]}",
                r.durability,
                "idempotent" if r.idempotent else "default @tool",
                f"{per_step:g}",
                f"{r.steps_per_s:,.0f}",
                f"{r.us_per_step:,.0f}",
                str(r.runs),
            ]
        )
    for g in report.langgraph.runs:
        rows.append(
            [f"LangGraph {g.saver} + {g.invoke}", "async (default)", "ToolNode", "2 ckpt", f"{g.steps_per_s:,.1f}",
             f"{g.us_per_step:,.0f}", "1"]
        )  # fmt: skip
    parts.append(
        table(
            "\nThroughput (median of runs; steps/s = model requests per second)",
            ["who", "durability", "tool", "commits/step", "steps/s", "us/step", "runs"],
            rows,
        )
    )
    parts.append(
        "  repertory WAL pages written per commit: "
        + ", ".join(
            f"{name} @tool {c.wal_pages_per_commit:.1f} ({c.wal_pages_per_tool_step:.1f} per step)"
            for name, c in commits.items()
        )
    )
    if report.langgraph.runs:
        g0 = report.langgraph.runs[0]
        parts.append(
            f"  LangGraph SQLite settings: journal_mode={g0.journal_mode}, "
            f"synchronous={g0.sqlite_synchronous} (2 = FULL, SQLite's default), durability {g0.durability}"
        )
    ratios = report.ratios
    if ratios is not None:
        parts.append(
            table(
                f"\nRatios against LangGraph {ratios.langgraph_reference} "
                f"({ratios.langgraph_steps_per_s:,.1f} steps/s)",
                ["repertory config", "steps/s", "ratio", "target", "meets"],
                [
                    [r.label, f"{r.steps_per_s:,.0f}", f"{r.ratio:.1f}x", _target(r.target), yes(r.meets)]
                    for r in ratios.rows
                ],
            )
        )
    short = report.short_run
    if short is not None:
        parts.append(
            table(
                f"\nThe same at {short.steps} steps (LangGraph SqliteSaver {short.langgraph.steps_per_s:,.1f} "
                "steps/s; its checkpoints hold the whole history, so its step cost grows with the run)",
                ["repertory config", "steps/s", "ratio", "target", "meets"],
                [
                    [r.label, f"{r.steps_per_s:,.0f}", f"{r.ratio:.1f}x", _target(r.target), yes(r.meets)]
                    for r in short.rows
                ],
            )
        )
    disk = report.disk
    parts.append(
        table(
            f"\nBytes on disk after one {steps:,}-step run (db + WAL after wal_checkpoint(TRUNCATE); -shm not counted)",
            ["who", "db + wal", "payload", "wal before ckpt", "per step"],
            [
                [d.who, _mb(d.bytes_on_disk), _mb(d.payload_bytes), _mb(d.wal_bytes_before_checkpoint),
                 f"{d.bytes_on_disk / steps:,.0f} B"]
                for d in disk.rows
            ],
        )
    )  # fmt: skip
    if disk.ratio is not None:
        parts.append(
            f"  repertory / LangGraph = {disk.ratio:.3%} (target <= {TARGET_DISK_RATIO:.0%}): {yes(disk.meets)}"
        )
    by_length = report.bytes_by_run_length
    if by_length.rows:
        parts.append(
            table(
                "\nBytes on disk per step by run length (the empty database taken off)",
                ["steps", "repertory B/step", "LangGraph B/step"],
                [
                    [
                        f"{r.steps:,}",
                        f"{r.repertory_bytes_per_step:,.0f}",
                        "-" if r.langgraph_bytes_per_step is None else f"{r.langgraph_bytes_per_step:,.0f}",
                    ]
                    for r in by_length.rows
                ],
            )
        )
    for prof in report.profiles:
        p = prof.report
        parts.append(
            table(
                f"\ncProfile of repertory, {prof.label}: {p.profiled_us_per_step:,.0f} us/step profiled, "
                f"{p.wall_us_per_step_unprofiled:,.0f} us/step unprofiled (x{p.profiler_inflation or 0:.2f}); "
                "top 20 by tottime",
                ["function", "calls/step", "tottime us/step", "cumtime us/step"],
                [
                    [t.function[:78], f"{t.calls_per_step:.1f}", f"{t.tottime_us_per_step:.1f}",
                     f"{t.cumtime_us_per_step:.1f}"]
                    for t in p.top_by_tottime
                ],
            )
        )  # fmt: skip
        parts.append(
            table(
                "\n  Self time by category (builtins charged to their callers; the estimate keeps sqlite's C time "
                f"and divides Python by x{p.python_profiler_inflation or 0:.2f})",
                ["category", "share", "profiled us/step", "~unprofiled us/step"],
                [
                    [k, f"{v.share:.0%}", f"{v.profiled_us_per_step:.1f}", f"{v.est_unprofiled_us_per_step:.1f}"]
                    for k, v in p.categories.items()
                ],
            )
        )
        parts.append(
            table(
                "\n  Inclusive time of the step's pieces (profiled)",
                ["piece", "calls/step", "profiled us/step"],
                [[i.piece, f"{i.calls_per_step:.2f}", f"{i.profiled_us_per_step:.1f}"] for i in p.inclusive],
            )
        )
    for sql in report.sql_statements:
        parts.append(
            table(
                f"\nSQL statements per step, durability {sql.durability}, default @tool, "
                f"{SCRIPT_LABELS[sql.script]} (writer connection wrapped; not a timed run)",
                ["statement", "calls/step", "us/call", "us/step"],
                [
                    [k[:60], f"{v.calls_per_step:.2f}", f"{v.us_per_call:.1f}", f"{v.us_per_step:.1f}"]
                    for k, v in sql.statements.items()
                    if v.us_per_step >= 0.05
                ],
            )
        )
    parts.append(
        table(
            "\nPieces timed alone (no profiler)",
            ["piece", "us"],
            [[k, f"{v:,.2f}"] for k, v in report.component_costs_us.items()],
        )
    )
    return "\n".join(parts)
