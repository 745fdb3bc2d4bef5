"""The node failover report: the times from the kill, and the checks (hosts moved, nothing charged twice)."""

from __future__ import annotations

from pydantic import Field

from benchmarks.harness.model import BenchModel
from benchmarks.harness.report import Report, Row, row

__all__ = ["TARGET_SECONDS", "FailoverFigures", "FailoverReport", "HostFact"]

TARGET_SECONDS = 5.0


class HostFact(BenchModel):
    """Where a shared host ran."""

    node_id: str
    pid: int


class FailoverFigures(BenchModel):
    """The scenario's times from the kill and its checks (``tests/actors/test_node_failover.py`` reads them)."""

    sessions: int
    running_turns: int
    nodes: int
    health_checks: dict[str, int | str]  # Ray adds its own settings (object spilling) to the dict it is given
    kill_to_old_host_processes_gone_s: float
    kill_to_first_call_served_s: float
    kill_to_every_session_served_s: float
    kill_to_interrupted_turns_done_s: float
    target_s: float = TARGET_SECONDS
    met: bool
    hosts_before: list[HostFact]
    hosts_after: list[HostFact]
    hosts_started_on_killed_node: bool
    hosts_moved: bool
    killed_node: str
    interrupted_turns_done: bool
    charges_written: int
    charged_twice: list[str]
    every_session_answers_after: bool


class FailoverReport(Report):
    """``benchmarks/results/ray_failover.json``."""

    git: dict[str, str | bool | None] = Field(default_factory=dict)
    durability: str
    figures: FailoverFigures

    def summarise(self) -> list[Row]:
        """The kill to the first call served elsewhere, against the target."""
        f = self.figures
        note = (
            f"{f.sessions} sessions on 2 hosts, {f.running_turns} turns running; old processes gone after "
            f"{f.kill_to_old_host_processes_gone_s} s; every session {f.kill_to_every_session_served_s} s; "
            f"interrupted turns done {f.kill_to_interrupted_turns_done_s} s; charged twice: {len(f.charged_twice)}"
        )
        return [row("node hard failure -> first call served elsewhere", f.kill_to_first_call_served_s, "s",
                    TARGET_SECONDS, note=note)]  # fmt: skip

    def render(self) -> str:
        """The line printed after a run."""
        f = self.figures
        return (
            f"node killed with {f.sessions} sessions ({f.running_turns} turns running): first call served after "
            f"{f.kill_to_first_call_served_s} s (target <= {TARGET_SECONDS} s), every session after "
            f"{f.kill_to_every_session_served_s} s, interrupted turns done after "
            f"{f.kill_to_interrupted_turns_done_s} s; "
            f"hosts moved: {f.hosts_moved}; charged twice: {f.charged_twice or 'none'}"
        )
