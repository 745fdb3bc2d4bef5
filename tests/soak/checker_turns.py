"""The chaos checker's turn rules: every accepted turn ended exactly once, and event seqs have no gap.

A turn that ended (done, error, cancelled) has exactly one ``turn.completed`` event, its last, in
the turn's status, which is its run's; an open turn has none; a done or suspended turn's run is
stored and holds the turn's message. Each session's events are numbered 1..n with no gap or
duplicate, and say only what the store holds: a ``checkpoint`` event names a stored revision (the
commit it announces landed) and a ``tool.call`` event a call some stored message makes. Every
line of ``accepted.jsonl`` names a stored turn of that session that ended.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any

from tests.soak.checker_evidence import Evidence, LineageBroken, message_text

__all__ = ["check_turns_and_events"]

_TERMINAL = ("done", "error", "cancelled")


def check_turns_and_events(ev: Evidence) -> None:
    t = ev.t
    by_session: dict[str, list[int]] = defaultdict(list)
    completions: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    last_seq: dict[str, int] = {}
    for sid, seq, sub, typ, _at, data in t.events:
        by_session[sid].append(seq)
        if sid not in t.sessions:
            ev.add("event_orphan_session", "event of a session that is not stored", session_id=sid, seq=seq)
        if sub is not None:
            last_seq[sub] = max(last_seq.get(sub, 0), seq)
        if typ == "turn.completed":
            try:
                payload = json.loads(data)
            except json.JSONDecodeError:
                payload = {}
            key = sub or str(payload.get("submission_id"))
            completions[key].append((seq, payload))
        elif typ in ("checkpoint", "tool.call"):
            _event_is_stored(ev, sid, seq, typ, data)
    for sid, seqs in by_session.items():
        counts = Counter(seqs)
        for seq, n in sorted(counts.items()):
            if n > 1:
                ev.add("event_seq_duplicate", f"seq {seq} stored {n} times", session_id=sid, seq=seq)
        present = set(seqs)
        missing = [s for s in range(1, max(present) + 1) if s not in present]
        for seq in missing[:10]:
            ev.add("event_seq_gap", f"seq {seq} missing (seqs run to {max(present)})", session_id=sid, seq=seq)
    for sub, turn in t.turns.items():
        rec = turn.record
        if rec.get("session_id") != turn.session_id or rec.get("status") != turn.status:
            ev.add("turn_row_mismatch", "turns row columns disagree with its record", submission_id=sub)
        done = completions.get(sub, [])
        if turn.status in _TERMINAL:
            if not done:
                ev.add(
                    "turn_completion_missing",
                    f"turn ended {turn.status} without a turn.completed event",
                    session_id=turn.session_id,
                    submission_id=sub,
                )
            elif len(done) > 1:
                ev.add(
                    "turn_completed_twice",
                    f"{len(done)} turn.completed events",
                    session_id=turn.session_id,
                    submission_id=sub,
                    seqs=",".join(str(s) for s, _ in done),
                )
            for seq, payload in done:
                if payload.get("status") != turn.status:
                    ev.add(
                        "turn_completion_status",
                        f"turn.completed says {payload.get('status')}, the turn {turn.status}",
                        session_id=turn.session_id,
                        submission_id=sub,
                        seq=seq,
                    )
            if done and last_seq.get(sub, 0) > max(s for s, _ in done):
                ev.add(
                    "event_after_completion",
                    "an event of the turn follows its turn.completed",
                    session_id=turn.session_id,
                    submission_id=sub,
                )
        elif done:
            ev.add(
                "turn_completed_while_open",
                f"turn is {turn.status} but has a turn.completed event",
                session_id=turn.session_id,
                submission_id=sub,
            )
        run = t.runs.get(str(rec.get("run_id")))
        if run is None and turn.status in ("done", "suspended"):
            # A turn may fail (or be cancelled) before its run is stored; it cannot finish one.
            ev.add(
                "turn_run_missing",
                f"turn is {turn.status} but its run is not stored",
                submission_id=sub,
                run_id=rec.get("run_id"),
            )
        if run is not None and turn.status in _TERMINAL and run.status != turn.status:
            ev.add(
                "turn_run_status",
                f"turn ended {turn.status}, its run is {run.status}",
                submission_id=sub,
                run_id=rec.get("run_id"),
            )
        if run is not None and turn.status != "queued":
            _turn_message(ev, sub, rec, run.state)
    for sub in completions:
        if sub not in t.turns:
            ev.add("turn_completion_orphan", "turn.completed of a turn that is not stored", submission_id=sub)
    seen: set[str] = set()
    for line in ev.accepted:
        sub = str(line.get("submission_id"))
        if sub in seen:
            continue
        seen.add(sub)
        stored = t.turns.get(sub)
        if stored is None:
            ev.add(
                "accepted_turn_missing",
                "accepted turn is not in the store",
                session_id=line.get("session_id"),
                submission_id=sub,
            )
        elif stored.session_id != line.get("session_id"):
            ev.add(
                "accepted_turn_session",
                f"stored under session {stored.session_id}",
                session_id=line.get("session_id"),
                submission_id=sub,
            )
        elif stored.status not in _TERMINAL:
            ev.add(
                "accepted_turn_not_ended",
                f"accepted turn is still {stored.status}",
                session_id=stored.session_id,
                submission_id=sub,
            )
    ev.report.accepted_turns = len(seen)


def _event_is_stored(ev: Evidence, sid: str, seq: int, typ: str, data: str) -> None:
    """A checkpoint event's revision and a tool.call event's call are in the store (a failed commit's are not)."""
    try:
        payload = json.loads(data)
    except json.JSONDecodeError:
        return
    if typ == "checkpoint":
        revision = payload.get("history_revision_id")
        if revision is not None and revision not in ev.t.revisions:
            ev.add(
                "event_checkpoint_unstored",
                "a checkpoint event names a revision the store lacks (its commit never landed)",
                session_id=sid,
                seq=seq,
                revision_id=revision,
            )
    elif str(payload.get("tool_call_id")) not in _stored_call_ids(ev):
        ev.add(
            "event_call_unstored",
            f"a tool.call event of a call no stored message makes ({payload.get('tool_name')})",
            session_id=sid,
            seq=seq,
            tool_call_id=payload.get("tool_call_id"),
        )


def _stored_call_ids(ev: Evidence) -> set[str]:
    """Every tool call id any stored message makes (read once per check)."""
    if ev.stored_call_ids is None:
        ids = set()
        for raw in ev.t.entries.values():
            if '"tool-call"' not in raw:
                continue
            for part in json.loads(raw).get("parts") or []:
                if isinstance(part, dict) and part.get("type") == "tool-call":
                    ids.add(str(part.get("tool_call_id")))
        ev.stored_call_ids = ids
    return ev.stored_call_ids


def _turn_message(ev: Evidence, sub: str, rec: dict[str, Any], state: dict[str, Any]) -> None:
    """The turn's message is in its run's history (what was accepted was also committed)."""
    rev = state.get("history_revision_id")
    message = rec.get("message") or {}
    if rev is None or rev not in ev.t.revisions:
        return
    try:
        history = ev.messages_of(rev)
    except LineageBroken:
        return
    want = message_text(message)
    if not any(m.get("role") == message.get("role") and message_text(m) == want for m in history):
        ev.add(
            "message_missing",
            "the turn's message is not in its run's history",
            submission_id=sub,
            run_id=rec.get("run_id"),
        )


# -- call/result pairing ------------------------------------------------------------------------
