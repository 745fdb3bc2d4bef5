"""The step benchmark's report: repertory's runs and LangGraph's, the ratios, the disk, where the time goes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BeforeValidator

from benchmarks.harness.model import BenchModel
from benchmarks.harness.plots import Plot, log_x, subtitle
from benchmarks.harness.report import Report, Row, row
from benchmarks.harness.sqlite_files import DiskUsage
from benchmarks.harness.tables import table, yes

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "HEADLINE_IDEMPOTENT",
    "HEADLINE_SCRIPT",
    "PLOTS",
    "SCRIPT_LABELS",
    "SCRIPTS",
    "TARGET_DISK_RATIO",
    "TARGET_FULL_RATIO",
    "TARGET_NORMAL_RATIO",
    "BytesByRunLength",
    "CategoryCost",
    "CommitCounts",
    "ConfigSummary",
    "DiskComparison",
    "DiskRow",
    "Durabilities",
    "Inclusive",
    "LangGraphPart",
    "LangGraphRun",
    "MaybeDisk",
    "ProfileReport",
    "RatioRow",
    "Ratios",
    "RepertoryPart",
    "RepertoryRun",
    "RunLengthRow",
    "ShortRow",
    "ShortRun",
    "SqlBreakdown",
    "StatementCost",
    "StepProfile",
    "StepsReport",
    "Targets",
    "TopRow",
]

TARGET_NORMAL_RATIO = 10.0
TARGET_FULL_RATIO = 3.0
TARGET_DISK_RATIO = 0.01
SCRIPTS = ("list", "list+usage", "fn")
HEADLINE_SCRIPT = "list"
HEADLINE_IDEMPOTENT = False
SCRIPT_LABELS = {
    "list": "ScriptedModel(list)",
    "list+usage": "ScriptedModel(list, usage given)",
    "fn": "ScriptedModel(step function)",
}


def _empty_is_none(value: Any) -> Any:
    # A part not measured was written as ``{}`` before these reports were typed.
    return None if value == {} else value


MaybeDisk = Annotated[DiskUsage | None, BeforeValidator(_empty_is_none)]


class CommitCounts(BenchModel):
    """Commits and WAL pages per step, counted on short untimed runs."""

    commits_per_tool_step: float
    fixed_commits_per_run: float
    wal_pages_per_commit: float
    wal_pages_per_tool_step: float


class RepertoryRun(BenchModel):
    """One timed repertory run (its disk read on the first round only)."""

    durability: str
    idempotent: bool
    script: str
    steps: int
    seconds: float
    steps_per_s: float
    us_per_step: float
    disk: MaybeDisk = None


class ConfigSummary(BenchModel):
    """One configuration's runs: the median and every round."""

    durability: str
    idempotent: bool
    script: str
    runs: int
    seconds_median: float
    steps_per_s: float
    us_per_step: float
    steps_per_s_all: list[float]
    disk: MaybeDisk = None


class RepertoryPart(BenchModel):
    """repertory's side: commits per step, the summary per configuration, every run."""

    commits: dict[str, CommitCounts]
    summary: list[ConfigSummary]
    runs: dict[str, list[RepertoryRun]]

    def pick(self, durability: str, idempotent: bool, script: str) -> ConfigSummary:
        """The summary of one configuration."""
        return next(
            s for s in self.summary if (s.durability, s.idempotent, s.script) == (durability, idempotent, script)
        )


class LangGraphRun(BenchModel):
    """One timed LangGraph run, with what its checkpointer wrote."""

    saver: str
    invoke: str
    steps: int
    seconds: float
    steps_per_s: float
    us_per_step: float
    sqlite_synchronous: int | None
    journal_mode: str | None
    durability: str = "async (LangGraph's default; not passed)"
    checkpoints: int = 0
    checkpoint_blob_bytes: int = 0
    last_checkpoint_blob_bytes: int = 0
    writes: int = 0
    write_blob_bytes: int = 0
    disk: MaybeDisk = None


class LangGraphPart(BenchModel):
    """LangGraph's side: its runs, the graph, the recursion limit."""

    runs: list[LangGraphRun]
    graph: str
    recursion_limit: int


class RatioRow(BenchModel):
    """One repertory configuration against LangGraph's reference run."""

    label: str
    dur: str
    idempotent: bool
    script: str
    steps_per_s: float
    ratio: float
    target: float | None
    meets: bool | None


class Ratios(BenchModel):
    """repertory's configurations against LangGraph (``SqliteSaver + graph.invoke``)."""

    langgraph_reference: str
    langgraph_steps_per_s: float
    rows: list[RatioRow]
    against_async_saver: dict[str, float] | None = None


class ShortRow(BenchModel):
    """One configuration at the short run length."""

    label: str
    durability: str
    script: str
    steps_per_s: float
    ratio: float
    target: float | None
    meets: bool | None


class ShortRun(BenchModel):
    """The comparison at 100 steps: LangGraph's step cost grows with the run."""

    steps: int
    langgraph: LangGraphRun
    rows: list[ShortRow]


class DiskRow(BenchModel):
    """Bytes one side left on disk after the run."""

    who: str
    bytes_on_disk: int
    payload_bytes: int
    wal_bytes_before_checkpoint: int
    detail: DiskUsage


class DiskComparison(BenchModel):
    """Bytes on disk after one run, and repertory over LangGraph against the target."""

    rows: list[DiskRow]
    target_max_ratio: float = TARGET_DISK_RATIO
    ratio: float | None = None
    meets: bool | None = None


class TopRow(BenchModel):
    """One of the functions with the most own time, per model request."""

    function: str
    ncalls: int
    calls_per_step: float
    tottime_s: float
    tottime_us_per_step: float
    cumtime_us_per_step: float


class CategoryCost(BenchModel):
    """Own time of one category, profiled and estimated without the profiler."""

    share: float
    profiled_us_per_step: float
    est_unprofiled_us_per_step: float


class Inclusive(BenchModel):
    """Inclusive time of one piece of a step."""

    piece: str
    calls_per_step: float
    profiled_us_per_step: float


class ProfileReport(BenchModel):
    """cProfile of one repertory run: top functions, own time by category, the step's pieces."""

    model_requests: int
    profiled_us_per_step: float
    wall_us_per_step_unprofiled: float
    profiler_inflation: float | None
    python_profiler_inflation: float | None
    top_by_tottime: list[TopRow]
    categories: dict[str, CategoryCost]
    inclusive: list[Inclusive]


class StepProfile(BenchModel):
    """A profile and the configuration it ran."""

    label: str
    script: str
    report: ProfileReport


class StatementCost(BenchModel):
    """One kind of SQL statement of a run, per model request."""

    calls_per_step: float
    us_per_call: float
    us_per_step: float


class SqlBreakdown(BenchModel):
    """The SQL of one run, statement kind by statement kind."""

    durability: str
    tool: str
    script: str
    statements: dict[str, StatementCost]


class RunLengthRow(BenchModel):
    """Bytes on disk per step after a run of one length (the empty database taken off)."""

    steps: int
    repertory_bytes_on_disk: int
    repertory_bytes_per_step: float
    langgraph_bytes_on_disk: int | None = None
    langgraph_bytes_per_step: float | None = None


class BytesByRunLength(BenchModel):
    """Bytes per step by run length: flat for repertory, growing for LangGraph."""

    empty_database_bytes: dict[str, int]
    repertory_config: str
    langgraph_config: str | None
    rows: list[RunLengthRow]


class Durabilities(BenchModel):
    """What each side's durability was."""

    repertory: dict[str, str]
    langgraph: str
    profiles: str


class Targets(BenchModel):
    """Ratios against LangGraph at least; bytes on disk over LangGraph's at most."""

    normal_ratio: float = TARGET_NORMAL_RATIO
    full_ratio: float = TARGET_FULL_RATIO
    disk_ratio_max: float = TARGET_DISK_RATIO


class StepsReport(Report):
    """``benchmarks/results/steps.json``."""

    bytes_by_run_length: BytesByRunLength
    workdir: str
    steps: int
    model_requests_per_run: int
    repeats: int
    tool_result_chars: int
    message_pair_json_bytes: int
    durability: Durabilities
    targets: Targets = Targets()
    repertory: RepertoryPart
    langgraph: LangGraphPart
    ratios: Annotated[Ratios | None, BeforeValidator(_empty_is_none)] = None
    short_run: ShortRun | None = None
    disk: DiskComparison
    profiles: list[StepProfile]
    sql_statements: list[SqlBreakdown]
    component_costs_us: dict[str, float]

    def summarise(self) -> list[Row]:
        """Steps/s of the plain script; ratios with a target; disk against LangGraph; bytes per step."""
        rows: list[Row] = []
        steps = self.steps
        for s in self.repertory.summary:
            if s.script == "list" and not s.idempotent:
                rows.append(row(f"model steps/s, one session, {steps:,} tool steps (SQLite {s.durability})",
                                s.steps_per_s, "steps/s"))  # fmt: skip
        if self.ratios is not None:
            for x in self.ratios.rows:
                if x.target is not None:
                    rows.append(
                        row(
                            f"steps/s against LangGraph ({x.dur}, {self.ratios.langgraph_reference})",
                            x.ratio,
                            "x",
                            x.target,
                            at_most=False,
                            note=f"LangGraph {self.ratios.langgraph_steps_per_s:,.1f} steps/s",
                        )
                    )
        if self.disk.ratio is not None:
            rows.append(row(f"bytes on disk after a {steps:,}-step run, repertory / LangGraph", self.disk.ratio * 100,
                            "%", self.disk.target_max_ratio * 100))  # fmt: skip
        for last in self.bytes_by_run_length.rows[-1:]:
            peer = last.langgraph_bytes_per_step
            note = "" if peer is None else f"LangGraph {peer:,.0f} B/step"
            rows.append(row(f"bytes on disk per step, {last.steps:,}-step run", last.repertory_bytes_per_step, "B",
                            note=note))  # fmt: skip
        if self.peers.get("langgraph", "measured") != "measured":
            rows.append(row("LangGraph comparison", None, "", note=f"not measured: {self.peers['langgraph']}"))
        return rows

    def render(self) -> str:
        """The tables printed after a run."""
        return _tables(self)


def _bytes_per_step(report: StepsReport, axes: Axes) -> None:
    rows = report.bytes_by_run_length.rows
    mine = [(r.steps, r.repertory_bytes_per_step) for r in rows]
    theirs = [(r.steps, r.langgraph_bytes_per_step) for r in rows if r.langgraph_bytes_per_step is not None]
    for label, marker, points in (("repertory", "o", mine), ("LangGraph + SqliteSaver", "s", theirs)):
        if points:
            axes.plot([p[0] for p in points], [p[1] for p in points], marker=marker, label=label)
    axes.set_yscale("log")
    log_x(axes, [r.steps for r in rows])
    axes.set_xlabel("run length (tool steps)")
    axes.set_ylabel("bytes on disk per step")
    axes.set_title("Bytes per step vs run length (SQLite, empty database taken off)\n" + subtitle(report), fontsize=9)


PLOTS = [
    Plot[StepsReport](
        "bytes_per_step_vs_run_length.png",
        "bytes_by_run_length",
        lambda r: bool(r.bytes_by_run_length.rows),
        _bytes_per_step,
    )
]


# The step report's tables, as printed after a run.


def _mb(n: int) -> str:
    return f"{n / 1e6:,.2f} MB"


def _target(t: float | None) -> str:
    return f">= {t:g}x" if t else "-"


def _tables(report: StepsReport) -> str:
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
