"""The chaos soak's report: per run, minutes, turns, faults by kind, recoveries, violations, turns lost.

One ``ChaosFigures`` per soak (a backend and a store); ``ChaosReport`` holds the soaks of one suite
run and renders the rows of ``RESULTS.md``: the violations and the accepted turns lost (target 0
each) and the p99 time from a fault to the fleet serving again (reported, no target).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field

from benchmarks.harness.machine import git_state
from benchmarks.harness.model import BenchModel
from benchmarks.harness.report import Clock, Report, Row, finish, row, write_report

if TYPE_CHECKING:
    from tests.soak.run import ChaosOutcome

__all__ = ["ChaosFigures", "ChaosReport", "add_to_report"]


class ChaosFigures(BenchModel):
    """One soak's figures (``tests.soak.run.ChaosOutcome`` without the run folder's paths)."""

    backend: str
    store: str
    seed: int
    minutes: float
    turns: int
    accepted: int
    accepted_lost: int
    turns_by_status: dict[str, int]
    faults: dict[str, int]
    left_out: dict[str, str] = Field(default_factory=dict)
    """Fault kinds this soak could not inject (``disk_full`` where no tmpfs could be mounted), and why."""
    store_full_errors: int = 0
    recoveries: int
    fault_to_serving_p50_s: float | None
    fault_to_serving_p99_s: float | None
    decisions: dict[str, int]
    ledger_lines: int
    retried_errors: int
    unexpected_exits: int
    quiesced: bool
    quiesce_restarts: int = 0
    checker: str
    violations: int | None
    violation_list: list[str] = Field(default_factory=list)


class ChaosReport(Report):
    """``benchmarks/results/chaos.json``."""

    git: dict[str, str | bool | None] = Field(default_factory=dict)
    runs: list[ChaosFigures]

    def rows(self) -> list[Row]:
        """Always worked out from ``runs``: a stored summary from before rows named their command would hide it."""
        return self.summarise()

    def summarise(self) -> list[Row]:
        """Per soak: violations and accepted turns lost (target 0), and the p99 fault-to-serving time."""
        rows = []
        for r in self.runs:
            name = f"{r.backend}+{r.store}, {r.minutes:g} min"
            faults = ", ".join(f"{k} {v}" for k, v in sorted(r.faults.items()))
            note = (
                f"seed {r.seed}; {r.turns} turns ({r.accepted} accepted by the driver); "
                f"{sum(r.faults.values())} faults ({faults}); {r.recoveries} recoveries; checker: {r.checker}"
            )
            if r.left_out:
                note += "; left out: " + "; ".join(f"{k} ({why})" for k, why in sorted(r.left_out.items()))
            violations = r.violations if r.violations is not None else None
            # The soak's own options: the report's mode alone would print ``--quick`` for a 3-minute soak.
            again = (
                f"python -m tests.soak --minutes {r.minutes:g} --backend {r.backend} --store {r.store} --seed {r.seed}"
            )
            rows.append(row(f"chaos {name}: violations", violations, "", 0, note=note, command=again))
            rows.append(row(f"chaos {name}: accepted turns lost", r.accepted_lost, "", 0, command=again))
            rows.append(
                row(f"chaos {name}: p99 fault -> fleet serving again", r.fault_to_serving_p99_s, "s", command=again)
            )
        return rows

    def render(self) -> str:
        """The lines printed after a run."""
        lines = []
        for r in self.runs:
            lines.append(
                f"{r.backend}+{r.store} {r.minutes:g} min seed {r.seed}: {r.turns} turns, "
                f"{sum(r.faults.values())} faults {r.faults}, {r.recoveries} recoveries, "
                f"p50/p99 fault->serving {r.fault_to_serving_p50_s}/{r.fault_to_serving_p99_s} s, "
                f"violations {r.violations}, accepted turns lost {r.accepted_lost}"
            )
        return "\n".join(lines)


def add_to_report(path: Path, outcome: ChaosOutcome) -> Path:
    """Put one soak's figures into the report at ``path`` (created if missing), replacing its backend+store's."""
    figures = asdict(outcome)
    figures.pop("run_dir")
    figures["unexpected_exits"] = len(outcome.unexpected_exits)
    figures.pop("lost_detail")
    new = ChaosFigures.model_validate(figures)
    runs = []
    if path.exists():
        old = ChaosReport.model_validate_json(path.read_text()).runs
        runs = [r for r in old if (r.backend, r.store) != (new.backend, new.store)]
    clock = Clock.start("chaos", "full" if new.minutes >= 5 else "quick")
    report = ChaosReport(**clock.frame(), git=git_state(), runs=[*runs, new])
    report = finish(report, clock)
    report.seconds = None  # the soak's own minutes say how long it ran
    return write_report(report, path)
