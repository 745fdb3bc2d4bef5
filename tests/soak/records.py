"""The run folder's files: JSON lines appended durably, read back whole, and the folder's layout.

Every history file (``ledger.jsonl``, ``accepted.jsonl``, ``decisions.jsonl``, the driver's own
``roots.jsonl`` and ``served.jsonl``) is appended with ``O_APPEND`` and ``fsync`` before the writer
goes on, one ``os.write`` per line: a SIGKILL leaves every line that was written whole, so the
checker reads what really happened outside the store. A line cut short by a crash mid-write (the
kernel makes one ``write`` of a small buffer atomic on a local file, so this does not happen in
practice) is skipped by the reader rather than trusted.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["LEDGER_TOOLS", "RunPaths", "append_line", "now_ms", "read_lines"]

LEDGER_TOOLS = ("charge", "write_file", "send_email", "publish_figures")
"""The workload's non-idempotent tools, each side effect of which is a ledger line (``run.json``'s ``ledger_tools``).

``publish_figures`` is the demo MCP server's: the server writes its line, keyed by the call id
repertory sends in the request's ``_meta``."""


def now_ms() -> int:
    """Wall-clock epoch milliseconds (what every record of the run is stamped with)."""
    return int(time.time() * 1000)


def append_line(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line with O_APPEND, then fsync, before returning."""
    data = (json.dumps(record, sort_keys=True, default=str) + "\n").encode()
    fd = os.open(path, os.O_APPEND | os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_lines(path: Path) -> list[dict[str, Any]]:
    """Every whole JSON line of ``path`` (none if it does not exist)."""
    if not path.exists():
        return []
    out: list[dict[str, Any]] = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut short by a crash: never trusted
    return out


@dataclass(frozen=True)
class RunPaths:
    """Where a chaos run keeps its files (the checker's contract names the first six)."""

    root: Path

    @property
    def ledger(self) -> Path:
        """One line per side effect of a non-idempotent tool, written by the tool."""
        return self.root / "ledger.jsonl"

    @property
    def accepted(self) -> Path:
        """One line per turn the driver got back from ``send()`` (durable from then on)."""
        return self.root / "accepted.jsonl"

    @property
    def decisions(self) -> Path:
        """One line per decision the approver made and got accepted."""
        return self.root / "decisions.jsonl"

    @property
    def faults(self) -> Path:
        """One line per fault injected, with when the fleet served again."""
        return self.root / "faults.jsonl"

    @property
    def run_json(self) -> Path:
        """The run's settings and times, written at the end."""
        return self.root / "run.json"

    @property
    def export(self) -> Path:
        """The Parquet export of the store, made after the fleet quiesced."""
        return self.root / "export"

    @property
    def roots(self) -> Path:
        """The driver's own journal: the root sessions it created (the approver watches these)."""
        return self.root / "roots.jsonl"

    @property
    def served(self) -> Path:
        """The driver's own journal: each accepted turn it saw end, and when (recovery times)."""
        return self.root / "served.jsonl"

    @property
    def errors(self) -> Path:
        """Errors the driver and approver retried through (what the faults cost them)."""
        return self.root / "retries.jsonl"

    @property
    def quiesce(self) -> Path:
        """Created by the conductor: the driver stops sending and waits for every accepted turn."""
        return self.root / "quiesce"

    @property
    def quiesced(self) -> Path:
        """Created by the driver once every accepted turn ended."""
        return self.root / "quiesced"

    @property
    def stop_approver(self) -> Path:
        """Created by the conductor after the driver quiesced: the approver exits."""
        return self.root / "stop-approver"

    @property
    def logs(self) -> Path:
        """The subprocesses' stdout and stderr, one file per incarnation."""
        return self.root / "logs"
