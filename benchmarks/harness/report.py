"""The report model every benchmark writes: a frame (what ran, when, where), summary rows, its figures.

A benchmark's report is a subclass of ``Report`` whose fields are its figures; ``summarise()`` turns
them into ``Row``s (one line each of ``RESULTS.md``) and ``render()`` into the text printed after a
run. The JSON written is the model's dump, so a report read back validates into the same class:
that is how ``RESULTS.md`` gets summary rows out of reports written before they carried their own.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import Field, SerializationInfo, SerializerFunctionWrapHandler, model_serializer, model_validator

from benchmarks.harness.machine import Machine, machine_info
from benchmarks.harness.model import BenchModel

__all__ = [
    "RESULTS_DIR",
    "BenchModel",
    "Clock",
    "Machine",
    "Mode",
    "Report",
    "Row",
    "finish",
    "mode_of",
    "row",
    "write_report",
]

RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"

# ``full``: the sizes the figures are quoted at; ``quick``: a benchmark's own ``--quick`` (smaller,
# still meaningful); ``smoke``: the suite's ``--quick`` where a benchmark's quick mode is not small
# enough (it proves the code runs; its figures mean nothing).
Mode = Literal["full", "quick", "smoke"]


class Row(BenchModel):
    """One summary line: a figure, its unit, its target (at most or at least) and whether it is met."""

    figure: str
    value: int | float | None
    unit: str
    target: int | float | None = None
    target_is: Literal["at most", "at least"] | None = None
    met: bool | None = None
    note: str = ""
    command: str | None = None
    """The command that measures this row again, when it is not the report's own (a soak's options)."""


def row(
    figure: str,
    value: float | None,
    unit: str,
    target: float | None = None,
    at_most: bool = True,
    note: str = "",
    command: str | None = None,
) -> Row:
    """A summary row; ``met`` is worked out from the target when both are known."""
    met = None
    if target is not None and value is not None:
        met = value <= target if at_most else value >= target
    target_is: Literal["at most", "at least"] | None = None
    if target is not None:
        target_is = "at most" if at_most else "at least"
    return Row(
        figure=figure, value=value, unit=unit, target=target, target_is=target_is, met=met, note=note, command=command
    )


def mode_of(quick: bool, smoke: bool = False) -> Mode:
    """The mode a run was made in."""
    return "smoke" if smoke else "quick" if quick else "full"


class Report(BenchModel):
    """The frame every report has; a benchmark subclasses it with its own figures.

    ``peers`` says, per peer measured against (LangGraph), ``"measured"`` or why not; ``failed``
    names parts that failed while the rest was measured (the suite then reports ``FAILED``).
    """

    benchmark: str
    mode: Mode
    created_at: str = ""
    machine: Machine = Field(default_factory=Machine)
    seconds: float | None = None
    summary: list[Row] = Field(default_factory=list)
    peers: dict[str, str] = Field(default_factory=dict)
    failed: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _legacy_mode(cls, data: Any) -> Any:
        # Reports older than ``mode`` said ``quick: true/false``; the renderer reads them the same way.
        if isinstance(data, dict) and "mode" not in data and "quick" in data:
            return {**data, "mode": "quick" if data["quick"] else "full"}
        return data

    @model_serializer(mode="wrap")
    def _without_empty_parts(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        # Most benchmarks have no peer and no failed part: their reports do not carry the two fields.
        data: dict[str, Any] = handler(self)
        for name in ("peers", "failed"):
            if not data.get(name):
                data.pop(name, None)
        return data

    def summarise(self) -> list[Row]:
        """The summary rows of this report's figures (a benchmark overrides it)."""
        return []

    def rows(self) -> list[Row]:
        """The rows ``RESULTS.md`` shows: the report's own, or worked out from its figures."""
        return list(self.summary) if self.summary else self.summarise()

    def render(self) -> str:
        """The text printed after a run (a benchmark overrides it); by default, the summary rows."""
        return "\n".join(f"  {r.figure}: {r.value} {r.unit} {r.note}".rstrip() for r in self.rows())

    def to_json(self) -> str:
        """The JSON written to ``results/<name>.json``."""
        return json.dumps(self.model_dump(mode="json"), indent=2, default=str) + "\n"


R = TypeVar("R", bound=Report)


@dataclass(frozen=True)
class Clock:
    """When and where a run started: the frame of its report, and the start of its ``seconds``."""

    benchmark: str
    mode: Mode
    created_at: str
    machine: Machine
    started: float

    @classmethod
    def start(cls, benchmark: str, mode: Mode) -> Clock:
        """Read the machine (load average before) and start the clock."""
        return cls(benchmark, mode, time.strftime("%Y-%m-%dT%H:%M:%S%z"), machine_info(), time.perf_counter())

    def frame(self) -> dict[str, Any]:
        """The frame fields of a report: ``SomeReport(**clock.frame(), figures=...)``."""
        return {"benchmark": self.benchmark, "mode": self.mode, "created_at": self.created_at, "machine": self.machine}


def finish(report: R, clock: Clock) -> R:
    """Stamp the load average after and the seconds taken, and work out the summary rows."""
    report.machine.load_average_after = list(os.getloadavg())
    report.seconds = round(time.perf_counter() - clock.started, 2)
    report.summary = report.summarise()
    return report


def write_report(report: Report, path: Path) -> Path:
    """Write the JSON report atomically: a run killed half-way never leaves half a file to render."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(report.to_json())
    os.replace(tmp, path)
    return path
