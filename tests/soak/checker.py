"""The chaos soak's independent checker: what the store, its export and the run's journals say happened.

    report = check("sqlite:////tmp/run/store.db", Path("/tmp/run"))
    assert not report.violations, report.violations

Independent means it shares no code with what it checks: the store's tables are read with plain
SQL and the export's Parquet files with pyarrow (``checker_tables``), JSON is decoded here, and the
rules are the documented contract (``docs/contract.md`` and ``docs/concepts/``), not repertory's code.
Each rule broken is one ``Violation`` naming its ids, so a finding can be looked up in the store.

The run folder's journals (written by the workload, outside the store, with ``O_APPEND`` and
``fsync``): ``ledger.jsonl`` (one line per side effect of a non-idempotent tool, written by the tool
before it returns; an MCP tool's by its server, keyed by the call id repertory sends in ``_meta``),
``accepted.jsonl`` (one line per turn ``send()`` returned), ``decisions.jsonl`` (one line per
decision the runtime accepted; ``tool_call_id``, ``tool`` and an edit's ``args`` are used where
present), ``faults.jsonl`` and ``run.json`` (``export_dir``; ``ledger_tools`` optional).

The rules, by violation kind prefix (each module's docstring says more):

- ``turn_*``, ``accepted_*``, ``event_*``: every accepted turn is in the store and ended (done,
  error or cancelled) with exactly one ``turn.completed`` event, its last, in the status of its
  run (a turn may end ``error`` or ``cancelled`` before its run was stored, never ``done``); event
  seqs are 1..n per session with no gap or duplicate; a checkpoint event names a stored revision
  and a tool.call event a stored call (a failed commit announces nothing).
- ``ledger_*``, ``side_effect_*``, ``result_without_side_effect``: no non-idempotent call ran twice
  (one ledger line per call id), and a call has a ledger line iff the run's history gives it a real
  result; an error result is allowed only where it says "outcome unknown" (the call had started
  when the run stopped, or an MCP server died or timed out after the call was sent, so it may have
  run but its result was lost). Which tools are ledgered:
  those named in the ledger, plus ``run.json``'s ``ledger_tools``.
- ``approval_*``, ``decision_*``, ``ran_*``, ``token_*``: a call that asks for approval runs at most
  once, only after an approval, with the approved (maybe edited) arguments, never after a
  rejection; a token is redeemed at most once, is dead once redeemed, lives only in a suspended
  run's row, and never appears in events or the export. A tool counts as approval-gated when any
  run recorded an approval request for it (the workload's gated tools always ask).
- ``revision_*``, ``entry_*``, ``message_*``, ``thread_*``, ``run_*``, ``session_*``, ``fork_*``:
  every committed message is present and each lineage intact: parents resolve, depths count up
  from 1 (so there is no cycle), heads, runs' revisions and forks' revisions resolve and lie on the
  lineages they belong to, and each turn's message is in its run's history.
- ``call_*``, ``result_*``: every model request's history paired each call with exactly one result:
  walking a run's history, each assistant message's calls are answered before the next assistant
  message, each exactly once, with no result for a call never made. The calls a run is still
  waiting on (``pending``, while suspended) are the only ones allowed open at the end.
- ``usage_*``: the export's per-run usage equals the store's, and each tree's total (the export's
  own rows and ``repertory.analytics``' ``tree_usage`` macro) equals the sum of its runs in the store.
- ``export_*``: the Parquet export holds exactly the store's rows (ids per table), the same values
  in the columns that identify and describe them, the same message content (hash), and derived
  ``messages``/``tool_calls`` rows that follow each thread's lineage.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.soak.checker_effects import OUTCOME_UNKNOWN_PREFIX, check_approvals, check_ledger
from tests.soak.checker_evidence import CheckReport, Evidence, Violation
from tests.soak.checker_export import check_export, check_usage
from tests.soak.checker_history import check_lineage, check_pairing
from tests.soak.checker_tables import read_export, read_store
from tests.soak.checker_turns import check_turns_and_events

__all__ = ["OUTCOME_UNKNOWN_PREFIX", "CheckReport", "Violation", "check"]


def _lines(path: Path) -> list[dict[str, Any]]:
    """Whole JSON lines of a journal; a line cut short by a crash mid-write is not trusted."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                out.append(record)
    return out


def check(store_url: str, run_dir: Path) -> CheckReport:
    """Check a finished chaos run: its store at ``store_url`` and the journals and export in ``run_dir``.

    Read-only; call it after the fleet stopped (a live fleet moves the store under the reader).
    """
    run_dir = Path(run_dir)
    meta_path = run_dir / "run.json"
    meta: dict[str, Any] = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    export_dir = Path(meta.get("export_dir") or run_dir / "export")
    ledger = _lines(run_dir / "ledger.jsonl")
    report = CheckReport(store_url=store_url, run_dir=str(run_dir))
    tables = read_store(store_url)
    ev = Evidence(
        t=tables,
        export=read_export(export_dir) if export_dir.is_dir() else None,
        export_dir=export_dir,
        ledger=ledger,
        accepted=_lines(run_dir / "accepted.jsonl"),
        decisions=_lines(run_dir / "decisions.jsonl"),
        ledger_tools={str(line.get("tool")) for line in ledger} | set(meta.get("ledger_tools") or []),
        report=report,
    )
    # Pairing before the ledger rules: they read the calls it collects per run.
    for rule in (
        check_lineage,
        check_turns_and_events,
        check_pairing,
        check_ledger,
        check_approvals,
        check_usage,
        check_export,
    ):
        rule(ev)
    report.sessions = len(tables.sessions)
    report.turns = len(tables.turns)
    report.runs = len(tables.runs)
    report.messages = len(tables.entries)
    report.revisions = len(tables.revisions)
    report.events = len(tables.events)
    report.ledger_entries = len(ledger)
    report.decisions = len(ev.decisions)
    report.faults = len(_lines(run_dir / "faults.jsonl"))
    return report
