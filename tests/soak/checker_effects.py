"""The chaos checker's side-effect rules: the ledger against the histories, approvals and tokens.

Ledger: one line per call id (a second is a call that ran twice); a line's run holds the call and
gives it a real result, or an "outcome unknown" error (the engine's: the tool ran, the run stopped
before its result was committed; or an MCP tool's: its server died or timed out after the call was
sent); a real result of a ledgered tool has its line. An MCP server's lines (the workload's
``publish_figures``) are keyed by the call id it was sent in the request's ``_meta``. Approvals: a
gated call ran only once approved, with the approved arguments, never after a rejection; the
approver's accepted decisions agree with the runs' approval records. Tokens: redeemed at most
once, dead once redeemed, live only on a suspended run (as its state says), never in an event or
in the export.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any

from tests.soak.checker_evidence import Evidence

__all__ = ["OUTCOME_UNKNOWN_PREFIX", "check_approvals", "check_ledger"]

OUTCOME_UNKNOWN_PREFIX = "outcome unknown"
"""How an error result begins whose call may have run: the engine's after a crash, an MCP tool's when
its server died or timed out after the call was sent (docs/concepts/idempotency.md, docs/guides/mcp.md)."""

_TOKEN = re.compile(r"[0-9a-f]{48}")  # repertory's resume tokens: 192 random bits in hex


def check_ledger(ev: Evidence) -> None:
    first: dict[str, dict[str, Any]] = {}
    for line in ev.ledger:
        cid = str(line.get("tool_call_id"))
        if cid in first:
            held = first[cid]
            ev.add(
                "ledger_duplicate",
                f"non-idempotent call ran twice (pids {held.get('pid')}, {line.get('pid')})",
                tool_call_id=cid,
                run_id=line.get("run_id"),
                first_run_id=held.get("run_id"),
                tool=line.get("tool"),
            )
            continue
        first[cid] = line
    for cid, line in first.items():
        run_id = str(line.get("run_id"))
        run = ev.t.runs.get(run_id)
        if run is None:
            ev.add("ledger_run_missing", "side effect of a run that is not stored", run_id=run_id, tool_call_id=cid)
            continue
        if run.thread_id != line.get("session_id"):
            ev.add("ledger_session", f"run belongs to {run.thread_id}", run_id=run_id, tool_call_id=cid)
        call = ev.run_calls.get(run_id, {}).get(cid)
        if call is None:
            ev.add(
                "ledger_call_missing",
                "side effect of a call its run's history lacks",
                run_id=run_id,
                tool_call_id=cid,
            )
            continue
        if not call.results:
            ev.add("side_effect_without_result", "the call ran but has no result", run_id=run_id, tool_call_id=cid)
            continue
        result = call.results[0]
        if result.get("is_error") and not str(result.get("result")).startswith(OUTCOME_UNKNOWN_PREFIX):
            ev.add(
                "side_effect_with_error_result",
                f"the call ran but its result is an error: {str(result.get('result'))[:120]}",
                run_id=run_id,
                tool_call_id=cid,
            )
    reported: set[str] = set()
    for run_id, calls in ev.run_calls.items():
        for cid, call in calls.items():
            if call.tool_name not in ev.ledger_tools or cid in first or cid in reported:
                continue
            if call.results and not call.results[0].get("is_error"):
                reported.add(cid)
                ev.add(
                    "result_without_side_effect",
                    f"{call.tool_name} has a result but no ledger line",
                    run_id=run_id,
                    tool_call_id=cid,
                )


def check_approvals(ev: Evidence) -> None:
    t = ev.t
    records: dict[str, tuple[str, dict[str, Any]]] = {}
    for run_id, run in t.runs.items():
        counts = Counter(str(a.get("tool_call_id")) for a in run.state.get("approvals") or [])
        for cid, n in counts.items():
            if n > 1:
                ev.add("approval_recorded_twice", f"{n} approval records for one call", run_id=run_id, tool_call_id=cid)
        for a in run.state.get("approvals") or []:
            records[str(a.get("tool_call_id"))] = (run_id, a)
    gated = {str(a.get("tool_name")) for _, a in records.values()}
    ledgered: dict[str, dict[str, Any]] = {}
    for line in ev.ledger:
        ledgered.setdefault(str(line.get("tool_call_id")), line)
    for cid, line in ledgered.items():
        held = records.get(cid)
        if held is None:
            if line.get("tool") in gated:
                ev.add(
                    "ran_without_approval",
                    f"{line.get('tool')} ran without an approval record",
                    tool_call_id=cid,
                    run_id=line.get("run_id"),
                )
            continue
        run_id, record = held
        if record.get("decision") != "approved":
            ev.add(
                "ran_without_approval",
                f"ran though its approval is {record.get('decision')}",
                tool_call_id=cid,
                run_id=run_id,
            )
        elif line.get("args") is not None and line.get("args") != record.get("args"):
            ev.add(
                "ran_with_other_args",
                "ran with arguments other than the approved ones",
                tool_call_id=cid,
                run_id=run_id,
            )
    decided_tokens: Counter[str] = Counter()
    decided_calls: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in ev.decisions:
        decided_tokens[str(line.get("token"))] += 1
        if line.get("tool_call_id") is not None:
            decided_calls[str(line["tool_call_id"])].append(line)
    for token, n in decided_tokens.items():
        if n > 1:
            ev.add("token_redeemed_twice", f"{n} accepted decisions on one token", token=token)
    for cid, lines in decided_calls.items():
        if len(lines) > 1:
            ev.add("decision_twice", f"{len(lines)} accepted decisions on one call", tool_call_id=cid)
        line = lines[0]
        held = records.get(cid)
        if held is None:
            ev.add(
                "decision_unknown_call",
                "decision on a call no run asked approval for",
                tool_call_id=cid,
                token=line.get("token"),
            )
            continue
        run_id, record = held
        want = "rejected" if line.get("decision") == "reject" else "approved"
        if record.get("decision") != want:
            ev.add(
                "decision_mismatch",
                f"approver's decision {line.get('decision')} is recorded as {record.get('decision')}",
                tool_call_id=cid,
                run_id=run_id,
            )
        if line.get("decision") == "reject" and cid in ledgered:
            ev.add("ran_after_reject", "the call ran after it was rejected", tool_call_id=cid, run_id=run_id)
        if line.get("decision") == "edit" and line.get("args") is not None and record.get("args") != line.get("args"):
            ev.add(
                "decision_edit_lost",
                "the edited arguments are not the recorded ones",
                tool_call_id=cid,
                run_id=run_id,
            )
    live: dict[str, str] = {}
    for run_id, run in t.runs.items():
        suspended = run.state.get("suspended_on") or {}
        if run.token is not None:
            if run.status != "suspended" or suspended.get("token") != run.token:
                ev.add("token_state_mismatch", f"a live token on a {run.status} run, unlike its state", run_id=run_id)
            if run.token in live:
                ev.add("token_shared", "one live token on two runs", run_id=run_id, other_run_id=live[run.token])
            live[run.token] = run_id
        elif run.status == "suspended":
            ev.add("token_state_mismatch", "a suspended run without a live token", run_id=run_id)
    for token in decided_tokens:
        if token in live:
            ev.add(
                "token_still_live",
                "a token redeemed by an accepted decision is still live",
                token=token,
                run_id=live[token],
            )
    known = set(live) | set(decided_tokens)
    for sid, seq, _sub, _typ, _at, data in t.events:
        for token in _TOKEN.findall(data):
            if token in known:
                ev.add("token_in_events", "a resume token is in an event", session_id=sid, seq=seq)
    if ev.export is not None:
        for row in ev.export.get("runs", []):
            for token in _TOKEN.findall(str(row.get("state"))):
                if token in known:
                    ev.add("token_exported", "a resume token is in the export", run_id=row.get("run_id"))


# -- usage ----------------------------------------------------------------------------------------
