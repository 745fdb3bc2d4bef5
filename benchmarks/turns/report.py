"""The turn cost benchmark's report: the tree against its durable-write floor, and issue 21's targets side by side."""

from __future__ import annotations

from pydantic import Field

from benchmarks.group_commit.report import SessionsRound
from benchmarks.harness.model import BenchModel
from benchmarks.harness.report import Report, Row, row
from benchmarks.harness.tables import table, yes
from benchmarks.steps.report import LangGraphRun, RepertoryRun
from benchmarks.store.report import LoadResult
from benchmarks.turns.tree import TreeRun, TurnSql

__all__ = ["FloorPart", "LangGraphPart", "RayPart", "Sizes", "StepsPart", "Target", "TurnsReport"]


_TOOL_NOTE = (
    "The tool here is not idempotent, so its call is committed before it runs: one transaction and four "
    "statements more than with an idempotent tool (tests/runtime/test_turn_cost.py asserts 3 transactions "
    "and 12 statements for that, 4 and 16 for this)"
)


def _without_control(sql: TurnSql) -> float:
    """Statements per turn but BEGIN and COMMIT: how ``tests/runtime/test_turn_cost.py`` counts them."""
    control = sum(v for k, v in sql.statements_by_kind_per_turn.items() if k.split(" ")[0] in ("BEGIN", "COMMIT"))
    return sql.statements_per_turn - control


class Sizes(BenchModel):
    """The sizes of one mode."""

    sessions: int
    turns_per_session: int
    rounds: int
    step_sessions: int
    tool_steps: int
    sql_turns: int
    load_depth: int
    load_runs: int
    langgraph_steps: int
    langgraph_repeats: int
    ray_sessions: int
    ray_turns_per_session: int


class FloorPart(BenchModel):
    """Part 1: the tree's turns/s against a raw sqlite3 loop doing the same turns' durable writes."""

    tree: list[TreeRun]
    floor_turns_per_s: list[float]
    floor_cpu_seconds: list[float] = Field(default_factory=list)  # reports before it was measured have none
    floor_transactions_per_turn: int
    tree_turns_per_s: float
    floor_median_turns_per_s: float
    ratio: float
    cpu_ratio: float | None = Field(None, description="the ratio in turns per CPU second of the process (all threads)")


class StepsPart(BenchModel):
    """Part 2: N sessions x K tool steps on one SQLite store, group commit on (the default) and off."""

    on: list[SessionsRound]
    off: list[SessionsRound]
    on_steps_per_s: float
    off_steps_per_s: float
    ratio: float


class LangGraphPart(BenchModel):
    """One session's N-step run, repertory (default @tool, SQLite normal) against LangGraph + SqliteSaver."""

    steps: int
    repertory: list[RepertoryRun]
    langgraph: list[LangGraphRun]
    repertory_steps_per_s: float
    langgraph_steps_per_s: float
    ratio: float


class RayPart(BenchModel):
    """Part 5: the same turns on PostgreSQL, local, then Ray with 1 host and with one host per core.

    Run with the server's ``synchronous_commit`` on (durable, the default) and off (a commit does
    not wait for its WAL flush: not a setting to run with, a probe of whether the flush or the
    processes bound the turns/s).
    """

    cores: int
    runs: list[TreeRun]
    scaling: float | None = Field(description="turns/s with one host per core over one host (synchronous_commit=on)")
    scaling_by_synchronous_commit: dict[str, float | None] = Field(default_factory=dict)
    finding: str


class Target(BenchModel):
    """One row of issue 21's targets: the figure, and where it was measured (this run or a stored report)."""

    target: str
    figure: str
    value: float | None
    unit: str
    threshold: float | None
    at_most: bool
    source: str
    note: str = ""

    @property
    def met(self) -> bool | None:
        """Whether the figure meets the threshold (``None``: nothing to judge)."""
        if self.value is None or self.threshold is None:
            return None
        return self.value <= self.threshold if self.at_most else self.value >= self.threshold


def _figure(value: float) -> str:
    """A figure at a precision that reads: 1,250 and 44,052, 13.4, 0.131."""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3g}"


class TurnsReport(Report):
    """``benchmarks/results/turns.json``."""

    store: str
    sizes: Sizes
    turn_cost: FloorPart | None = None
    steps: StepsPart | None = None
    sql: TurnSql | None = None
    load_history: list[LoadResult] = Field(default_factory=list)
    langgraph: LangGraphPart | None = None
    ray: RayPart | None = None
    targets: list[Target] = Field(default_factory=list)
    skipped: dict[str, str] = Field(default_factory=dict)

    def summarise(self) -> list[Row]:
        """One row per issue-21 target (its source in the note), then a turn's SQL and the Ray scaling."""
        rows = [
            row(t.figure, t.value, t.unit, t.threshold, t.at_most, note="; ".join(x for x in (t.source, t.note) if x))
            for t in self.targets
        ]
        if self.sql is not None:
            kinds = ", ".join(f"{k} {v:g}" for k, v in self.sql.statements_by_kind_per_turn.items())
            rows.append(
                row(
                    "SQL statements per two-step turn (a later turn, local, SQLite)",
                    self.sql.statements_per_turn,
                    "",
                    note=f"{_without_control(self.sql):g} without BEGIN/COMMIT ({kinds}); {_TOOL_NOTE}",
                )
            )
            rows.append(
                row(
                    "write transactions per two-step turn",
                    self.sql.write_transactions_per_turn,
                    "",
                    note=f"the floor needs {self.turn_cost.floor_transactions_per_turn if self.turn_cost else 2}",
                )
            )
        if self.ray is not None:
            for r in self.ray.runs:
                label = f"{r.backend}{f', {r.hosts} host(s)' if r.hosts else ''}"
                rows.append(
                    row(
                        f"turns/s, {r.store}, {label}, {r.sessions:,} sessions x {r.turns_per_session}",
                        r.turns_per_s,
                        "turns/s",
                        note=f"client CPU {r.client_cpu_seconds:.1f} s of "
                        f"{r.seconds:.1f} s wall; failures {sum(r.failures.values())}",
                    )
                )
            for value, x in self.ray.scaling_by_synchronous_commit.items():
                rows.append(
                    row(
                        f"Ray turns/s, {self.ray.cores} hosts over 1 host, PostgreSQL synchronous_commit={value}",
                        x,
                        "x",
                        note=f"linear would be {self.ray.cores}x",
                    )
                )
        rows += [row(f"{name} (skipped)", None, "", note=why) for name, why in self.skipped.items()]
        rows += [row(f"{name} (FAILED)", None, "", note=why) for name, why in self.failed.items()]
        return rows

    def render(self) -> str:
        """The tables printed after a run."""
        out = [
            table(
                f"issue 21 targets ({self.mode} run; 'this run' figures are measured here, the rest read from "
                "benchmarks/results/)",
                ["figure", "value", "target", "met?", "source"],
                [
                    [
                        t.figure,
                        "-" if t.value is None else f"{_figure(t.value)} {t.unit}".strip(),
                        "-" if t.threshold is None else f"{'<=' if t.at_most else '>='} {t.threshold:g} {t.unit}",
                        yes(t.met),
                        t.source,
                    ]
                    for t in self.targets
                ],
            )
        ]
        if self.turn_cost is not None:
            c = self.turn_cost
            out.append(
                table(
                    "\nturn cost: the tree against the raw durable-write floor (one row per round)",
                    ["round", "tree turns/s", "tree CPU s", "floor turns/s", "floor CPU s"],
                    [
                        [str(i + 1), f"{t.turns_per_s:,.0f}", f"{t.client_cpu_seconds:.2f}", f"{f:,.0f}", f"{fc:.2f}"]
                        for i, (t, f, fc) in enumerate(
                            zip(c.tree, c.floor_turns_per_s, c.floor_cpu_seconds or [0.0] * len(c.tree), strict=True)
                        )
                    ],
                )
            )
            out.append(
                f"median: tree {c.tree_turns_per_s:,.0f} turns/s, floor {c.floor_median_turns_per_s:,.0f}, "
                f"ratio {c.ratio:.3f}; per CPU second {c.cpu_ratio or 0:.3f}"
            )
        if self.sql is not None:
            out.append(
                f"\none later two-step turn: {self.sql.statements_per_turn:g} SQL statements "
                f"({_without_control(self.sql):g} without BEGIN/COMMIT), "
                f"{self.sql.write_transactions_per_turn:g} write transactions. {_TOOL_NOTE}"
            )
            out += [f"  {k:<28} {v:g}" for k, v in self.sql.statements_by_kind_per_turn.items()]
        if self.ray is not None:
            out.append(
                table(
                    f"\nPostgreSQL, the same turns: local, then Ray ({self.ray.cores} cores)",
                    ["store", "backend", "hosts", "sessions x turns", "turns/s", "wall s", "client CPU s", "failures"],
                    [
                        [
                            r.store,
                            r.backend,
                            str(r.hosts or "-"),
                            f"{r.sessions:,} x {r.turns_per_session}",
                            f"{r.turns_per_s:,.0f}",
                            f"{r.seconds:.1f}",
                            f"{r.client_cpu_seconds:.1f}",
                            str(sum(r.failures.values())),
                        ]
                        for r in self.ray.runs
                    ],
                )
            )
            out.append(self.ray.finding)
        out += [f"skipped {k}: {v}" for k, v in self.skipped.items()]
        out += [f"FAILED {k}: {v}" for k, v in self.failed.items()]
        return "\n".join(out)
