"""Issue 21's targets read from the reports other benchmarks stored: the figure, when, and from what run.

Some targets need a long run of their own (10,000 sessions and a SIGKILL, a Ray instance): this
benchmark does not repeat them but reads their latest report in ``benchmarks/results/`` (always
that folder, the committed full-size figures, even when this run writes elsewhere), through the
benchmark's typed report so the row is worked out from the figures by that benchmark's own code.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from benchmarks.harness.report import RESULTS_DIR, Row
from benchmarks.harness.suite import load

__all__ = ["Stored", "stored_row"]


class Stored:
    """One row read from a stored report, with where it came from (or why it could not be read)."""

    def __init__(self, row: Row | None, source: str) -> None:
        self.row = row
        self.source = source


def _date(raw: dict[str, object], path: Path) -> str:
    created = raw.get("created_at")
    if isinstance(created, str) and created:
        return created[:10]
    try:  # older reports carry no date: the commit that last wrote the file does
        out = subprocess.run(["git", "log", "-1", "--format=%cs", "--", str(path)], cwd=path.parent,
                             capture_output=True, text=True, timeout=10, check=False).stdout.strip()  # fmt: skip
    except OSError:
        out = ""
    return f"committed {out}" if out else "undated"


def stored_row(name: str, pick: Callable[[Row], bool], folder: Path = RESULTS_DIR) -> Stored:
    """The first summary row of ``folder/<name>.json`` that ``pick`` accepts, worked out afresh."""
    path = folder / f"{name}.json"
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return Stored(None, f"no readable {path.name}: run `python -m benchmarks.{name}`")
    loaded = load(name)
    if loaded is None:
        return Stored(None, f"no benchmarks/{name}/ package")
    try:
        report = loaded.report.model_validate(raw)
    except ValidationError:
        return Stored(None, f"{path.name} does not match this version's report: rerun `python -m benchmarks.{name}`")
    commit = (report.machine.git_commit or "")[:10] or "?"
    source = f"results/{path.name}, {report.mode} run, {_date(raw, path)}, git {commit}"
    found = next((r for r in report.summarise() if pick(r)), None)
    if found is None:
        return Stored(None, f"{source}: no such figure in it (rerun `python -m benchmarks.{name}`)")
    return Stored(found, source)
