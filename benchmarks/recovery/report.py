"""The recovery benchmark's report: the set-up, the kill, and how long each part of the recovery took."""

from __future__ import annotations

from benchmarks.harness.model import BenchModel
from benchmarks.harness.report import Report, Row, row
from benchmarks.harness.stats import Dist

__all__ = ["IN_FLIGHT", "TARGET_S", "Probe", "Recovered", "RecoveryReport", "Scenario"]

TARGET_S = 5.0
IN_FLIGHT = 500

Counts = dict[str, dict[str, int]]  # table -> status -> rows


class Recovered(BenchModel):
    """A fresh process on the killed store: the start, the re-driven turns, every answer."""

    runtime_start_seconds: float
    running_redriven_seconds: float
    first_answer_seconds: float
    all_answered_seconds: float
    total_seconds: float
    answers_per_s: float | None
    answer_latency: Dist
    tool_reruns_after_restart: int
    open_turns_after: int


class Probe(BenchModel):
    """A fresh process on a copy of the killed store: the start, and every suspended session reachable."""

    runtime_start_seconds: float
    all_suspended_reachable_seconds: float
    statuses: dict[str, int]


class Scenario(Recovered):
    """The whole scenario: set-up, counts at the kill and after, the recovery, the probe, the tuned recovery."""

    suspended: int
    running: int
    setup_seconds: float
    workload_exit: int | None
    at_kill: Counts
    probe_without_answers: Probe
    with_tune_gc: Recovered
    after: Counts
    load_average_before_after: list[float]


class RecoveryReport(Report):
    """``benchmarks/results/recovery.json``."""

    store: str
    target_seconds: float
    model: str
    result: Scenario

    def summarise(self) -> list[Row]:
        """Everything recovered, with and without ``tune_gc``; reachable; re-driven; one answer's latency."""
        r = self.result
        shape = f"{r.suspended:,} suspended + {r.running} running, SIGKILL"
        lat, probe, tuned = r.answer_latency, r.probe_without_answers, r.with_tune_gc
        return [
            row(
                f"recovery ({shape}): every running run re-driven and every suspended one answered",
                r.total_seconds,
                "s",
                TARGET_S,
                note=f"Runtime.start {r.runtime_start_seconds:.2f} s; running done after "
                f"{r.running_redriven_seconds:.2f} s; answers {r.answers_per_s or 0:,.0f}/s",
            ),
            row(
                f"recovery ({shape}): the same, the recovering process calling tune_gc()",
                tuned.total_seconds,
                "s",
                TARGET_S,
                note=f"on a copy of the killed store; running done after {tuned.running_redriven_seconds:.2f} s; "
                f"answers {tuned.answers_per_s or 0:,.0f}/s",
            ),
            row(
                f"recovery ({shape}): every suspended session reachable (metadata, no decision)",
                probe.all_suspended_reachable_seconds,
                "s",
                note=f"on a copy of the killed store; Runtime.start {probe.runtime_start_seconds:.2f} s; "
                f"statuses {probe.statuses}",
            ),
            row(
                f"recovery ({shape}): every running run re-driven to completion",
                r.running_redriven_seconds,
                "s",
                note=f"open turns after: {r.open_turns_after}; tool re-runs after the restart: "
                f"{r.tool_reruns_after_restart}",
            ),
            row(
                f"recovery ({shape}): one approval/resume answered, p50",
                None if lat.count == 0 else lat.p50_ms,
                "ms",
                note=f"p99 {0 if lat.count == 0 else lat.p99_ms:,.0f} ms with up to {IN_FLIGHT} in flight; "
                f"first answer after {r.first_answer_seconds:.2f} s",
            ),
        ]

    def render(self) -> str:
        """The lines printed after a run."""
        r = self.result
        return "\n".join(
            [
                f"recovery ({self.mode}): {r.suspended:,} suspended + {r.running} running sessions, "
                f"SQLite WAL durability normal; set-up {r.setup_seconds:.1f} s",
                f"  at kill: runs {r.at_kill['runs']}, turns {r.at_kill['turns']}",
                f"  after:   runs {r.after['runs']}, turns {r.after['turns']}",
                *(f"  {s.figure}: {s.value or 0:,.2f} {s.unit} ({s.note})" for s in self.rows()),
            ]
        )
