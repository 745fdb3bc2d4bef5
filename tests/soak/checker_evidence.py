"""What the chaos checker's rules share: the tables read, the journals, the findings, lineage walks.

The rules (``checker_history``, ``checker_turns``, ``checker_effects``, ``checker_export``) each
take one ``Evidence`` and add what they find to it; ``checker.check`` builds it and runs them.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from tests.soak.checker_tables import StoreTables

__all__ = ["CallSeen", "CheckReport", "Evidence", "LineageBroken", "Violation", "canonical", "message_text"]

_CAP = 50  # violations of one kind kept in full; the rest are counted in one more


class Violation(BaseModel):
    """One broken rule: its kind, what was seen, and the ids to look it up by."""

    kind: str
    message: str
    ids: dict[str, str] = Field(default_factory=dict)

    def __str__(self) -> str:
        ids = " ".join(f"{k}={v}" for k, v in sorted(self.ids.items()))
        return f"{self.kind}: {self.message}" + (f" [{ids}]" if ids else "")


class CheckReport(BaseModel):
    """Everything the checker looked at (counts) and every violation it found."""

    store_url: str
    run_dir: str
    sessions: int = 0
    turns: int = 0
    accepted_turns: int = 0
    runs: int = 0
    messages: int = 0
    revisions: int = 0
    tool_calls: int = 0
    ledger_entries: int = 0
    decisions: int = 0
    events: int = 0
    faults: int = 0
    export_rows: int = 0
    violations: list[Violation] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no rule was broken."""
        return not self.violations

    def kinds(self) -> Counter[str]:
        """How many violations of each kind."""
        return Counter(v.kind for v in self.violations)


def canonical(text: str) -> str:
    """A JSON document's content hash, whatever its key order or spacing."""
    blob = json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def message_text(message: dict[str, Any]) -> str:
    """A message's text parts, joined (as ``ModelMessage.text`` does)."""
    return "".join(
        str(p.get("text", "")) for p in message.get("parts") or [] if isinstance(p, dict) and p.get("type") == "text"
    )


class LineageBroken(Exception):
    """A lineage walk that met a missing revision or a cycle."""


@dataclass(slots=True)
class CallSeen:
    """A tool call as one run's history holds it, with the result(s) that answered it."""

    tool_name: str
    args: dict[str, Any]
    results: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class Evidence:
    """The store's tables, its export, the run's journals, and the report the rules add findings to."""

    t: StoreTables
    export: dict[str, list[dict[str, Any]]] | None
    export_dir: Path
    ledger: list[dict[str, Any]]
    accepted: list[dict[str, Any]]
    decisions: list[dict[str, Any]]
    ledger_tools: set[str]
    report: CheckReport
    seen_kinds: Counter[str] = field(default_factory=Counter)
    lineages: dict[str, list[str]] = field(default_factory=dict)
    run_calls: dict[str, dict[str, CallSeen]] = field(default_factory=dict)
    # Each entry decoded once: every run of a thread (and of its forks) walks the same prefix.
    decoded: dict[str, dict[str, Any]] = field(default_factory=dict)
    stored_call_ids: set[str] | None = None
    """Every tool call id a stored message makes (``checker_turns`` fills it on first need)."""

    def add(self, kind: str, message: str, **ids: str | int | None) -> None:
        """Record one violation (ids as strings; past the cap for its kind, only counted)."""
        self.seen_kinds[kind] += 1
        n = self.seen_kinds[kind]
        if n <= _CAP:
            self.report.violations.append(
                Violation(kind=kind, message=message, ids={k: str(v) for k, v in ids.items() if v is not None})
            )
        elif n == _CAP + 1:
            self.report.violations.append(
                Violation(kind=kind, message=f"more than {_CAP} violations of this kind; the rest are not listed")
            )

    # -- lineage ------------------------------------------------------------------------------------

    def lineage(self, revision_id: str) -> list[str]:
        """Revision ids from the root to ``revision_id``; ``LineageBroken`` on a missing parent or a cycle."""
        held = self.lineages.get(revision_id)
        if held is not None:
            return held
        chain: list[str] = []
        seen: set[str] = set()
        at: str | None = revision_id
        while at is not None:
            if at in self.lineages:
                chain.extend(reversed(self.lineages[at]))
                break
            if at in seen:
                raise LineageBroken(f"cycle through revision {at}")
            seen.add(at)
            rev = self.t.revisions.get(at)
            if rev is None:
                raise LineageBroken(f"revision {at} does not exist")
            chain.append(at)
            at = rev.parent_id
        chain.reverse()
        self.lineages[revision_id] = chain
        return chain

    def on_lineage(self, revision_id: str, head: str | None) -> bool:
        """Whether ``revision_id`` is ``head`` or one of its ancestors; True when that cannot be told.

        A lineage that is broken (a missing parent, a cycle) is reported once, where it breaks;
        every run and fork above the break would otherwise be reported again as off its lineage.
        """
        if head is None:
            return False
        try:
            return revision_id in set(self.lineage(head))
        except LineageBroken:
            return True

    def messages_of(self, revision_id: str) -> list[dict[str, Any]]:
        """The decoded messages of a revision's lineage, oldest first (a missing entry is skipped)."""
        out = []
        for rid in self.lineage(revision_id):
            entry_id = self.t.revisions[rid].entry_id
            message = self.decoded.get(entry_id)
            if message is None:
                raw = self.t.entries.get(entry_id)
                if raw is None:
                    continue
                message = self.decoded[entry_id] = json.loads(raw)
            out.append(message)
        return out
