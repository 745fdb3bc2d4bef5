"""The chaos checker's history rules: lineages intact, and every call paired with exactly one result.

Lineage: every revision's parent and entry are stored, depths count up from 1 along parents (so
no cycle), thread heads, runs' revisions and forks' revisions resolve, and a run's (a fork's)
revision lies on its thread's (its parent's) lineage. Pairing: walking each run's history, every
assistant message's calls are answered before the next assistant message, each exactly once, with
no result for a call never made; only the calls a suspended run waits on may stay open. The calls
seen per run are kept in ``Evidence.run_calls`` for the ledger rules.
"""

from __future__ import annotations

import json
from typing import Any

from tests.soak.checker_evidence import CallSeen, Evidence, LineageBroken

__all__ = ["check_lineage", "check_pairing"]

_ROLES = ("system", "user", "assistant", "tool")


def check_lineage(ev: Evidence) -> None:
    t = ev.t
    for eid, raw in t.entries.items():
        try:
            message = json.loads(raw)
        except json.JSONDecodeError:
            ev.add("message_malformed", "history entry is not JSON", entry_id=eid)
            continue
        if (
            not isinstance(message, dict)
            or message.get("role") not in _ROLES
            or not isinstance(message.get("parts"), list)
        ):
            ev.add("message_malformed", "history entry is not a message (role, parts)", entry_id=eid)
    for rid, rev in t.revisions.items():
        if rev.entry_id not in t.entries:
            ev.add("entry_missing", "a revision's entry is not stored", revision_id=rid, entry_id=rev.entry_id)
        if rev.parent_id is None:
            if rev.depth != 1:
                ev.add("revision_depth", f"root revision has depth {rev.depth}, not 1", revision_id=rid)
            continue
        parent = t.revisions.get(rev.parent_id)
        if parent is None:
            ev.add("revision_parent_missing", "parent revision is not stored", revision_id=rid, parent_id=rev.parent_id)
        elif rev.depth != parent.depth + 1:
            ev.add(
                "revision_depth",
                f"depth {rev.depth} under a parent of depth {parent.depth}",
                revision_id=rid,
                parent_id=rev.parent_id,
            )
    for rid in t.revisions:
        try:
            ev.lineage(rid)
        except LineageBroken as exc:
            if "cycle" in str(exc):
                ev.add("revision_cycle", str(exc), revision_id=rid)
    for tid, head in t.threads.items():
        if head is not None and head not in t.revisions:
            ev.add("thread_head_missing", "thread head revision is not stored", thread_id=tid, revision_id=head)
    for run_id, run in t.runs.items():
        state = run.state
        if state.get("thread_id") != run.thread_id or state.get("status") != run.status:
            ev.add("run_row_mismatch", "runs row columns disagree with its state", run_id=run_id)
        at = state.get("history_revision_id")
        if at is None:
            continue
        if at not in t.revisions:
            ev.add("run_revision_missing", "run's history revision is not stored", run_id=run_id, revision_id=at)
        elif run.thread_id not in t.threads:
            ev.add("run_thread_missing", "run's thread is not stored", run_id=run_id, thread_id=run.thread_id)
        elif not ev.on_lineage(at, t.threads[run.thread_id]):
            ev.add(
                "run_off_lineage",
                "run's revision is not on its thread's lineage",
                run_id=run_id,
                thread_id=run.thread_id,
                revision_id=at,
            )
    for sid, record in t.sessions.items():
        lineage = record.get("lineage") or {}
        kind, parent = lineage.get("kind", "root"), lineage.get("parent_id")
        if t.session_parents.get(sid) != parent:
            ev.add("session_row_mismatch", "sessions.parent_id disagrees with the record", session_id=sid)
        if kind != "root" and parent not in t.sessions:
            ev.add("session_parent_missing", f"{kind} session's parent is not stored", session_id=sid, parent_id=parent)
        if record.get("root_id") not in t.sessions:
            ev.add(
                "session_root_missing",
                "session's root is not stored",
                session_id=sid,
                root_id=record.get("root_id"),
            )
        if kind == "forked":
            at = lineage.get("forked_at_revision_id")
            if at is None:
                continue
            if at not in t.revisions:
                ev.add("fork_revision_missing", "fork's revision is not stored", session_id=sid, revision_id=at)
                continue
            if sid in t.threads and not ev.on_lineage(at, t.threads[sid]):
                ev.add(
                    "fork_off_lineage",
                    "fork's thread does not descend from its fork revision",
                    session_id=sid,
                    revision_id=at,
                )
            if parent in t.threads and not ev.on_lineage(at, t.threads[parent]):
                ev.add(
                    "fork_not_on_parent",
                    "fork revision is not on the parent's lineage",
                    session_id=sid,
                    parent_id=parent,
                    revision_id=at,
                )


# -- turns and events ---------------------------------------------------------------------------


def check_pairing(ev: Evidence) -> None:
    for run_id, run in ev.t.runs.items():
        rev = run.state.get("history_revision_id")
        if rev is None or rev not in ev.t.revisions:
            continue
        try:
            history = ev.messages_of(rev)
        except LineageBroken:
            continue
        waiting = {str(p.get("tool_call_id")) for p in run.state.get("pending") or []}
        ev.run_calls[run_id] = _pair(ev, run_id, run.status, history, waiting)


def _pair(
    ev: Evidence, run_id: str, status: str, history: list[dict[str, Any]], waiting: set[str]
) -> dict[str, CallSeen]:
    calls: dict[str, CallSeen] = {}
    open_calls: list[str] = []
    for message in history:
        parts = [p for p in message.get("parts") or [] if isinstance(p, dict)]
        if message.get("role") == "assistant":
            for cid in open_calls:
                ev.add(
                    "call_unanswered",
                    "call has no result before the next model reply",
                    run_id=run_id,
                    tool_call_id=cid,
                )
            open_calls = []
            for p in parts:
                if p.get("type") != "tool-call":
                    continue
                cid = str(p.get("tool_call_id"))
                if cid in calls:
                    ev.add("call_id_reused", "two calls with one id in a history", run_id=run_id, tool_call_id=cid)
                    continue
                calls[cid] = CallSeen(str(p.get("tool_name")), dict(p.get("args") or {}))
                open_calls.append(cid)
        for p in parts:
            if p.get("type") != "tool-result":
                continue
            cid = str(p.get("tool_call_id"))
            call = calls.get(cid)
            if call is None:
                ev.add("result_orphan", "result for a call never made", run_id=run_id, tool_call_id=cid)
                continue
            call.results.append(p)
            if cid in open_calls:
                open_calls.remove(cid)
            elif len(call.results) > 1:
                ev.add("result_duplicate", f"{len(call.results)} results for one call", run_id=run_id, tool_call_id=cid)
            else:
                ev.add("result_late", "result after the next model reply", run_id=run_id, tool_call_id=cid)
    for cid in open_calls:
        if status == "running" or (status == "suspended" and cid in waiting):
            continue
        ev.add("call_unanswered", f"call left without a result in a {status} run", run_id=run_id, tool_call_id=cid)
    return calls


# -- ledger, approvals, tokens ------------------------------------------------------------------
