"""The group commit benchmark's report: each workload on and off, lone commits, the profile of the headline."""

from __future__ import annotations

from benchmarks.harness.model import BenchModel
from benchmarks.harness.report import Report, Row, row

__all__ = [
    "TARGET_RATIO",
    "TARGET_STEPS_PER_S",
    "Category",
    "GroupCommitReport",
    "LoneCommits",
    "LoneSession",
    "LoneSide",
    "PlanFigures",
    "Profile",
    "Side",
    "SessionsRound",
    "Skipped",
    "Targets",
    "VariantResult",
]

TARGET_STEPS_PER_S = 20_000
TARGET_RATIO = 3.0


class SessionsRound(BenchModel):
    """One timed round of N sessions each running one run of ``steps`` tool steps and a final reply."""

    group_commit: bool
    sessions: int
    model_steps: int
    seconds: float
    cpu_seconds: float
    gc_seconds: float
    steps_per_s: float
    cpu_us_per_step: float
    commits: int
    batches: int | None
    mean_batch: float | None


class Side(BenchModel):
    """One workload with group commit on (or off): medians of its rounds, and every round."""

    steps_per_s: float
    cpu_us_per_step: float
    wall_us_per_step: float
    gc_share_of_wall: float
    mean_batch: float | None
    rounds: list[SessionsRound]


class VariantResult(BenchModel):
    """One session workload, on and off, and the ratios."""

    variant: str
    backend: str
    durability: str
    idempotent_tool: bool
    model_yields: bool
    gc_disabled_while_timed: bool
    tune_gc: bool
    sessions: int
    tool_steps_per_run: int
    model_steps_per_run: int
    on: Side
    off: Side
    ratio_on_over_off: float
    cpu_ratio_off_over_on: float


class LoneCommits(BenchModel):
    """One writer committing one engine step at a time: the latency of each commit."""

    commits: int
    p50_us: float
    p90_us: float
    p99_us: float
    mean_us: float
    commits_per_s: float


class LoneSession(BenchModel):
    """One session alone: steps/s where no commit has company."""

    model_steps: int
    steps_per_s: float
    seconds: float


class LoneRounds(BenchModel):
    """Every round of the lone figures."""

    commits: list[LoneCommits]
    session: list[LoneSession]


class LoneSide(BenchModel):
    """The lone figures with group commit on (or off): medians of the rounds."""

    p50_us: float
    p90_us: float
    p99_us: float
    mean_us: float
    commits_per_s: float
    session_steps_per_s: float
    rounds: LoneRounds


class Lone(BenchModel):
    """Where group commit can only cost: lone commits and a lone session, on and off."""

    commit_message_bytes: int
    commits_per_round: int
    on: LoneSide
    off: LoneSide
    p50_on_minus_off_us: float


class Category(BenchModel):
    """Own time of one category of the profile."""

    share: float
    profiled_us_per_step: float


class Profile(BenchModel):
    """Self time per category (cProfile) of one headline round, beside the unprofiled wall time."""

    profiled_us_per_step: float
    unprofiled_us_per_step: float
    categories: dict[str, Category]


class Skipped(BenchModel):
    """A part not measured, and why."""

    skipped: str


class Targets(BenchModel):
    """Aggregate steps/s at least; on/off ratio at least."""

    steps_per_s: int = TARGET_STEPS_PER_S
    ratio_on_over_off: float = TARGET_RATIO


class PlanFigures(BenchModel):
    """The sizes the run used."""

    sessions: int
    steps: int
    rounds: int
    lone_commits: int
    lone_steps: int
    lone_rounds: int
    postgres: bool
    pg_rounds: int
    profile: bool


class GroupCommitReport(Report):
    """``benchmarks/results/group_commit.json``."""

    durability: str
    targets: Targets = Targets()
    plan: PlanFigures
    sqlite: list[VariantResult]
    postgres: VariantResult | Skipped | None
    lone: Lone
    profile: dict[str, Profile] | None = None

    def variants(self) -> list[VariantResult]:
        """Every workload measured: the SQLite ones, then PostgreSQL's if it ran."""
        return self.sqlite + ([self.postgres] if isinstance(self.postgres, VariantResult) else [])

    def summarise(self) -> list[Row]:
        """The headline on and its ratio to off; every other workload on; lone commit latency."""
        head = self.sqlite[0]
        on, off = head.on, head.off
        n = f"{head.sessions:,} sessions"
        rows = [
            row(f"group commit: model steps/s, {n}, {head.variant}", round(on.steps_per_s), "steps/s",
                TARGET_STEPS_PER_S, at_most=False,
                note=f"off: {off.steps_per_s:,.0f}; CPU {on.cpu_us_per_step:.0f} vs {off.cpu_us_per_step:.0f} "
                f"us/step; mean batch {on.mean_batch or 0:.0f}"),
            row(f"group commit: on/off ratio, {n}, {head.variant}", round(head.ratio_on_over_off, 2), "x",
                TARGET_RATIO, at_most=False, note="same run, alternating rounds"),
        ]  # fmt: skip
        for v in self.variants()[1:]:
            rows.append(row(f"group commit: model steps/s, {v.variant}", round(v.on.steps_per_s), "steps/s",
                            note=f"off {v.off.steps_per_s:,.0f}: {v.ratio_on_over_off:.2f}x"))  # fmt: skip
        lone = self.lone
        rows.append(row("group commit: lone commit latency p50, on", round(lone.on.p50_us, 1), "us",
                        note=f"off {lone.off.p50_us:.1f} us; p99 on/off {lone.on.p99_us:.0f}/"
                        f"{lone.off.p99_us:.0f} us"))  # fmt: skip
        return rows

    def render(self) -> str:
        """The table printed after a run."""
        m = self.machine
        lines = [
            f"group commit ({self.mode}) - {m.cpu_count} CPUs, Python {m.python}, SQLite {m.sqlite_version}; "
            f"load average before/after {(m.load_average_before or [0.0])[0]:.2f}/"
            f"{(m.load_average_after or [0.0])[0]:.2f}",
            f"{'workload':<50} {'on steps/s':>11} {'off steps/s':>12} {'ratio':>6} {'CPU us/step on/off':>19} "
            f"{'batch':>6} {'GC on/off':>10}",
        ]
        for v in self.variants():
            on, off = v.on, v.off
            lines.append(
                f"{v.variant:<50} {on.steps_per_s:>11,.0f} {off.steps_per_s:>12,.0f} "
                f"{v.ratio_on_over_off:>5.2f}x {on.cpu_us_per_step:>9.0f}/{off.cpu_us_per_step:<9.0f} "
                f"{on.mean_batch or 0:>6.0f} {on.gc_share_of_wall:>4.0%}/{off.gc_share_of_wall:<4.0%}"
            )
        if isinstance(self.postgres, Skipped):
            lines.append(f"PostgreSQL: not measured: {self.postgres.skipped}")
        for side, s in (("on", self.lone.on), ("off", self.lone.off)):
            lines.append(
                f"lone writer, group commit {side:<3}: commit p50 {s.p50_us:.1f} us, p99 {s.p99_us:.1f} us, "
                f"{s.commits_per_s:,.0f} commits/s; one session alone {s.session_steps_per_s:,.0f} steps/s"
            )
        for side, prof in (self.profile or {}).items():
            top = ", ".join(f"{k} {v.share:.0%}" for k, v in list(prof.categories.items())[:5])
            lines.append(f"profile, group commit {side}: {top}")
        return "\n".join(lines)
