"""The chaos soak's independent checker: what the store, its export and the run's journals say happened.

    report = check("sqlite:////tmp/run/store.db", Path("/tmp/run"))
    assert not report.violations, report.violations

Independent means it shares no code with what it checks: the store's tables are read with plain
SQL and the export's Parquet files with pyarrow (``checker_tables``), JSON is decoded here, and the
rules below are the documented contract (docs, ``API.md``, ``DESIGN.md``), not repertory's code.
Each rule broken is one ``Violation`` naming its ids, so a finding can be looked up in the store.

The run folder's journals (written by the workload, outside the store, with ``O_APPEND`` and
``fsync``): ``ledger.jsonl`` (one line per side effect of a non-idempotent tool, written by the tool
before it returns), ``accepted.jsonl`` (one line per turn ``send()`` returned), ``decisions.jsonl``
(one line per decision the runtime accepted; ``tool_call_id``, ``tool`` and an edit's ``args`` are
used where present), ``faults.jsonl`` and ``run.json`` (``export_dir``; ``ledger_tools`` optional).

The rules, by violation kind prefix:

- ``turn_*``, ``accepted_*``, ``event_*``: every accepted turn is in the store and ended (done,
  error or cancelled) with exactly one ``turn.completed`` event, its last, in the status of its
  run (a turn may end ``error`` or ``cancelled`` before its run was stored, never ``done``); event
  seqs are 1..n per session with no gap or duplicate.
- ``ledger_*``, ``side_effect_*``, ``result_without_side_effect``: no non-idempotent call ran twice
  (one ledger line per call id), and a call has a ledger line iff the run's history gives it a real
  result; an error result is allowed only where the engine writes "outcome unknown" (the call had
  started when the run stopped, so its tool ran but its result was lost). Which tools are ledgered:
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

import hashlib
import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from benchmarks.chaos.checker_tables import StoreTables, read_export, read_store

__all__ = ["OUTCOME_UNKNOWN_PREFIX", "CheckReport", "Violation", "check"]

OUTCOME_UNKNOWN_PREFIX = "outcome unknown"
"""How the engine's error result for a non-idempotent call cut short by a crash begins (``DESIGN.md``)."""

_TERMINAL = ("done", "error", "cancelled")
_ROLES = ("system", "user", "assistant", "tool")
_TOKEN = re.compile(r"[0-9a-f]{48}")  # repertory's resume tokens: 192 random bits in hex
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


def _canonical(text: str) -> str:
    """A JSON document's content hash, whatever its key order or spacing."""
    blob = json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


class _Lineage(Exception):
    """A lineage walk that met a missing revision or a cycle."""


@dataclass(slots=True)
class _Call:
    """A tool call as one run's history holds it, with the result(s) that answered it."""

    tool_name: str
    args: dict[str, Any]
    results: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class _Checker:
    url: str
    run_dir: Path
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
    run_calls: dict[str, dict[str, _Call]] = field(default_factory=dict)

    def add(self, kind: str, message: str, **ids: str | int | None) -> None:
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
        """Revision ids from the root to ``revision_id``; ``_Lineage`` on a missing parent or a cycle."""
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
                raise _Lineage(f"cycle through revision {at}")
            seen.add(at)
            rev = self.t.revisions.get(at)
            if rev is None:
                raise _Lineage(f"revision {at} does not exist")
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
        except _Lineage:
            return True

    def messages_of(self, revision_id: str) -> list[dict[str, Any]]:
        out = []
        for rid in self.lineage(revision_id):
            raw = self.t.entries.get(self.t.revisions[rid].entry_id)
            if raw is not None:
                out.append(json.loads(raw))
        return out

    def check_lineage(self) -> None:
        t = self.t
        for eid, raw in t.entries.items():
            try:
                message = json.loads(raw)
            except json.JSONDecodeError:
                self.add("message_malformed", "history entry is not JSON", entry_id=eid)
                continue
            if (
                not isinstance(message, dict)
                or message.get("role") not in _ROLES
                or not isinstance(message.get("parts"), list)
            ):
                self.add("message_malformed", "history entry is not a message (role, parts)", entry_id=eid)
        for rid, rev in t.revisions.items():
            if rev.entry_id not in t.entries:
                self.add("entry_missing", "a revision's entry is not stored", revision_id=rid, entry_id=rev.entry_id)
            if rev.parent_id is None:
                if rev.depth != 1:
                    self.add("revision_depth", f"root revision has depth {rev.depth}, not 1", revision_id=rid)
                continue
            parent = t.revisions.get(rev.parent_id)
            if parent is None:
                self.add(
                    "revision_parent_missing", "parent revision is not stored", revision_id=rid, parent_id=rev.parent_id
                )
            elif rev.depth != parent.depth + 1:
                self.add(
                    "revision_depth",
                    f"depth {rev.depth} under a parent of depth {parent.depth}",
                    revision_id=rid,
                    parent_id=rev.parent_id,
                )
        for rid in t.revisions:
            try:
                self.lineage(rid)
            except _Lineage as exc:
                if "cycle" in str(exc):
                    self.add("revision_cycle", str(exc), revision_id=rid)
        for tid, head in t.threads.items():
            if head is not None and head not in t.revisions:
                self.add("thread_head_missing", "thread head revision is not stored", thread_id=tid, revision_id=head)
        for run_id, run in t.runs.items():
            state = run.state
            if state.get("thread_id") != run.thread_id or state.get("status") != run.status:
                self.add("run_row_mismatch", "runs row columns disagree with its state", run_id=run_id)
            at = state.get("history_revision_id")
            if at is None:
                continue
            if at not in t.revisions:
                self.add("run_revision_missing", "run's history revision is not stored", run_id=run_id, revision_id=at)
            elif run.thread_id not in t.threads:
                self.add("run_thread_missing", "run's thread is not stored", run_id=run_id, thread_id=run.thread_id)
            elif not self.on_lineage(at, t.threads[run.thread_id]):
                self.add(
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
                self.add("session_row_mismatch", "sessions.parent_id disagrees with the record", session_id=sid)
            if kind != "root" and parent not in t.sessions:
                self.add(
                    "session_parent_missing", f"{kind} session's parent is not stored", session_id=sid, parent_id=parent
                )
            if record.get("root_id") not in t.sessions:
                self.add(
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
                    self.add("fork_revision_missing", "fork's revision is not stored", session_id=sid, revision_id=at)
                    continue
                if sid in t.threads and not self.on_lineage(at, t.threads[sid]):
                    self.add(
                        "fork_off_lineage",
                        "fork's thread does not descend from its fork revision",
                        session_id=sid,
                        revision_id=at,
                    )
                if parent in t.threads and not self.on_lineage(at, t.threads[parent]):
                    self.add(
                        "fork_not_on_parent",
                        "fork revision is not on the parent's lineage",
                        session_id=sid,
                        parent_id=parent,
                        revision_id=at,
                    )

    # -- turns and events ---------------------------------------------------------------------------

    def check_turns_and_events(self) -> None:
        t = self.t
        by_session: dict[str, list[int]] = defaultdict(list)
        completions: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
        last_seq: dict[str, int] = {}
        for sid, seq, sub, typ, _at, data in t.events:
            by_session[sid].append(seq)
            if sid not in t.sessions:
                self.add("event_orphan_session", "event of a session that is not stored", session_id=sid, seq=seq)
            if sub is not None:
                last_seq[sub] = max(last_seq.get(sub, 0), seq)
            if typ == "turn.completed":
                try:
                    payload = json.loads(data)
                except json.JSONDecodeError:
                    payload = {}
                key = sub or str(payload.get("submission_id"))
                completions[key].append((seq, payload))
        for sid, seqs in by_session.items():
            counts = Counter(seqs)
            for seq, n in sorted(counts.items()):
                if n > 1:
                    self.add("event_seq_duplicate", f"seq {seq} stored {n} times", session_id=sid, seq=seq)
            present = set(seqs)
            missing = [s for s in range(1, max(present) + 1) if s not in present]
            for seq in missing[:10]:
                self.add("event_seq_gap", f"seq {seq} missing (seqs run to {max(present)})", session_id=sid, seq=seq)
        for sub, turn in t.turns.items():
            rec = turn.record
            if rec.get("session_id") != turn.session_id or rec.get("status") != turn.status:
                self.add("turn_row_mismatch", "turns row columns disagree with its record", submission_id=sub)
            done = completions.get(sub, [])
            if turn.status in _TERMINAL:
                if not done:
                    self.add(
                        "turn_completion_missing",
                        f"turn ended {turn.status} without a turn.completed event",
                        session_id=turn.session_id,
                        submission_id=sub,
                    )
                elif len(done) > 1:
                    self.add(
                        "turn_completed_twice",
                        f"{len(done)} turn.completed events",
                        session_id=turn.session_id,
                        submission_id=sub,
                        seqs=",".join(str(s) for s, _ in done),
                    )
                for seq, payload in done:
                    if payload.get("status") != turn.status:
                        self.add(
                            "turn_completion_status",
                            f"turn.completed says {payload.get('status')}, the turn {turn.status}",
                            session_id=turn.session_id,
                            submission_id=sub,
                            seq=seq,
                        )
                if done and last_seq.get(sub, 0) > max(s for s, _ in done):
                    self.add(
                        "event_after_completion",
                        "an event of the turn follows its turn.completed",
                        session_id=turn.session_id,
                        submission_id=sub,
                    )
            elif done:
                self.add(
                    "turn_completed_while_open",
                    f"turn is {turn.status} but has a turn.completed event",
                    session_id=turn.session_id,
                    submission_id=sub,
                )
            run = t.runs.get(str(rec.get("run_id")))
            if run is None and turn.status in ("done", "suspended"):
                # A turn may fail (or be cancelled) before its run is stored; it cannot finish one.
                self.add(
                    "turn_run_missing",
                    f"turn is {turn.status} but its run is not stored",
                    submission_id=sub,
                    run_id=rec.get("run_id"),
                )
            if run is not None and turn.status in _TERMINAL and run.status != turn.status:
                self.add(
                    "turn_run_status",
                    f"turn ended {turn.status}, its run is {run.status}",
                    submission_id=sub,
                    run_id=rec.get("run_id"),
                )
            if run is not None and turn.status != "queued":
                self.check_turn_message(sub, rec, run.state)
        for sub in completions:
            if sub not in t.turns:
                self.add("turn_completion_orphan", "turn.completed of a turn that is not stored", submission_id=sub)
        seen: set[str] = set()
        for line in self.accepted:
            sub = str(line.get("submission_id"))
            if sub in seen:
                continue
            seen.add(sub)
            stored = t.turns.get(sub)
            if stored is None:
                self.add(
                    "accepted_turn_missing",
                    "accepted turn is not in the store",
                    session_id=line.get("session_id"),
                    submission_id=sub,
                )
            elif stored.session_id != line.get("session_id"):
                self.add(
                    "accepted_turn_session",
                    f"stored under session {stored.session_id}",
                    session_id=line.get("session_id"),
                    submission_id=sub,
                )
            elif stored.status not in _TERMINAL:
                self.add(
                    "accepted_turn_not_ended",
                    f"accepted turn is still {stored.status}",
                    session_id=stored.session_id,
                    submission_id=sub,
                )
        self.report.accepted_turns = len(seen)

    def check_turn_message(self, sub: str, rec: dict[str, Any], state: dict[str, Any]) -> None:
        """The turn's message is in its run's history (what was accepted was also committed)."""
        rev = state.get("history_revision_id")
        message = rec.get("message") or {}
        if rev is None or rev not in self.t.revisions:
            return
        try:
            history = self.messages_of(rev)
        except _Lineage:
            return
        want = _text(message)
        if not any(m.get("role") == message.get("role") and _text(m) == want for m in history):
            self.add(
                "message_missing",
                "the turn's message is not in its run's history",
                submission_id=sub,
                run_id=rec.get("run_id"),
            )

    # -- call/result pairing ------------------------------------------------------------------------

    def check_pairing(self) -> None:
        for run_id, run in self.t.runs.items():
            rev = run.state.get("history_revision_id")
            if rev is None or rev not in self.t.revisions:
                continue
            try:
                history = self.messages_of(rev)
            except _Lineage:
                continue
            waiting = {str(p.get("tool_call_id")) for p in run.state.get("pending") or []}
            self.run_calls[run_id] = self.pair(run_id, run.status, history, waiting)

    def pair(self, run_id: str, status: str, history: list[dict[str, Any]], waiting: set[str]) -> dict[str, _Call]:
        calls: dict[str, _Call] = {}
        open_calls: list[str] = []
        for message in history:
            parts = [p for p in message.get("parts") or [] if isinstance(p, dict)]
            if message.get("role") == "assistant":
                for cid in open_calls:
                    self.add(
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
                        self.add(
                            "call_id_reused", "two calls with one id in a history", run_id=run_id, tool_call_id=cid
                        )
                        continue
                    calls[cid] = _Call(str(p.get("tool_name")), dict(p.get("args") or {}))
                    open_calls.append(cid)
            for p in parts:
                if p.get("type") != "tool-result":
                    continue
                cid = str(p.get("tool_call_id"))
                call = calls.get(cid)
                if call is None:
                    self.add("result_orphan", "result for a call never made", run_id=run_id, tool_call_id=cid)
                    continue
                call.results.append(p)
                if cid in open_calls:
                    open_calls.remove(cid)
                elif len(call.results) > 1:
                    self.add(
                        "result_duplicate", f"{len(call.results)} results for one call", run_id=run_id, tool_call_id=cid
                    )
                else:
                    self.add("result_late", "result after the next model reply", run_id=run_id, tool_call_id=cid)
        for cid in open_calls:
            if status == "running" or (status == "suspended" and cid in waiting):
                continue
            self.add(
                "call_unanswered", f"call left without a result in a {status} run", run_id=run_id, tool_call_id=cid
            )
        return calls

    # -- ledger, approvals, tokens ------------------------------------------------------------------

    def check_ledger(self) -> None:
        first: dict[str, dict[str, Any]] = {}
        for line in self.ledger:
            cid = str(line.get("tool_call_id"))
            if cid in first:
                held = first[cid]
                self.add(
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
            run = self.t.runs.get(run_id)
            if run is None:
                self.add(
                    "ledger_run_missing", "side effect of a run that is not stored", run_id=run_id, tool_call_id=cid
                )
                continue
            if run.thread_id != line.get("session_id"):
                self.add("ledger_session", f"run belongs to {run.thread_id}", run_id=run_id, tool_call_id=cid)
            call = self.run_calls.get(run_id, {}).get(cid)
            if call is None:
                self.add(
                    "ledger_call_missing",
                    "side effect of a call its run's history lacks",
                    run_id=run_id,
                    tool_call_id=cid,
                )
                continue
            if not call.results:
                self.add(
                    "side_effect_without_result", "the call ran but has no result", run_id=run_id, tool_call_id=cid
                )
                continue
            result = call.results[0]
            if result.get("is_error") and not str(result.get("result")).startswith(OUTCOME_UNKNOWN_PREFIX):
                self.add(
                    "side_effect_with_error_result",
                    f"the call ran but its result is an error: {str(result.get('result'))[:120]}",
                    run_id=run_id,
                    tool_call_id=cid,
                )
        reported: set[str] = set()
        for run_id, calls in self.run_calls.items():
            for cid, call in calls.items():
                if call.tool_name not in self.ledger_tools or cid in first or cid in reported:
                    continue
                if call.results and not call.results[0].get("is_error"):
                    reported.add(cid)
                    self.add(
                        "result_without_side_effect",
                        f"{call.tool_name} has a result but no ledger line",
                        run_id=run_id,
                        tool_call_id=cid,
                    )

    def check_approvals(self) -> None:
        t = self.t
        records: dict[str, tuple[str, dict[str, Any]]] = {}
        for run_id, run in t.runs.items():
            counts = Counter(str(a.get("tool_call_id")) for a in run.state.get("approvals") or [])
            for cid, n in counts.items():
                if n > 1:
                    self.add(
                        "approval_recorded_twice", f"{n} approval records for one call", run_id=run_id, tool_call_id=cid
                    )
            for a in run.state.get("approvals") or []:
                records[str(a.get("tool_call_id"))] = (run_id, a)
        gated = {str(a.get("tool_name")) for _, a in records.values()}
        ledgered: dict[str, dict[str, Any]] = {}
        for line in self.ledger:
            ledgered.setdefault(str(line.get("tool_call_id")), line)
        for cid, line in ledgered.items():
            held = records.get(cid)
            if held is None:
                if line.get("tool") in gated:
                    self.add(
                        "ran_without_approval",
                        f"{line.get('tool')} ran without an approval record",
                        tool_call_id=cid,
                        run_id=line.get("run_id"),
                    )
                continue
            run_id, record = held
            if record.get("decision") != "approved":
                self.add(
                    "ran_without_approval",
                    f"ran though its approval is {record.get('decision')}",
                    tool_call_id=cid,
                    run_id=run_id,
                )
            elif line.get("args") is not None and line.get("args") != record.get("args"):
                self.add(
                    "ran_with_other_args",
                    "ran with arguments other than the approved ones",
                    tool_call_id=cid,
                    run_id=run_id,
                )
        decided_tokens: Counter[str] = Counter()
        decided_calls: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for line in self.decisions:
            decided_tokens[str(line.get("token"))] += 1
            if line.get("tool_call_id") is not None:
                decided_calls[str(line["tool_call_id"])].append(line)
        for token, n in decided_tokens.items():
            if n > 1:
                self.add("token_redeemed_twice", f"{n} accepted decisions on one token", token=token)
        for cid, lines in decided_calls.items():
            if len(lines) > 1:
                self.add("decision_twice", f"{len(lines)} accepted decisions on one call", tool_call_id=cid)
            line = lines[0]
            held = records.get(cid)
            if held is None:
                self.add(
                    "decision_unknown_call",
                    "decision on a call no run asked approval for",
                    tool_call_id=cid,
                    token=line.get("token"),
                )
                continue
            run_id, record = held
            want = "rejected" if line.get("decision") == "reject" else "approved"
            if record.get("decision") != want:
                self.add(
                    "decision_mismatch",
                    f"approver's decision {line.get('decision')} is recorded as {record.get('decision')}",
                    tool_call_id=cid,
                    run_id=run_id,
                )
            if line.get("decision") == "reject" and cid in ledgered:
                self.add("ran_after_reject", "the call ran after it was rejected", tool_call_id=cid, run_id=run_id)
            if (
                line.get("decision") == "edit"
                and line.get("args") is not None
                and record.get("args") != line.get("args")
            ):
                self.add(
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
                    self.add(
                        "token_state_mismatch", f"a live token on a {run.status} run, unlike its state", run_id=run_id
                    )
                if run.token in live:
                    self.add("token_shared", "one live token on two runs", run_id=run_id, other_run_id=live[run.token])
                live[run.token] = run_id
            elif run.status == "suspended":
                self.add("token_state_mismatch", "a suspended run without a live token", run_id=run_id)
        for token in decided_tokens:
            if token in live:
                self.add(
                    "token_still_live",
                    "a token redeemed by an accepted decision is still live",
                    token=token,
                    run_id=live[token],
                )
        known = set(live) | set(decided_tokens)
        for sid, seq, _sub, _typ, _at, data in t.events:
            for token in _TOKEN.findall(data):
                if token in known:
                    self.add("token_in_events", "a resume token is in an event", session_id=sid, seq=seq)
        if self.export is not None:
            for row in self.export.get("runs", []):
                for token in _TOKEN.findall(str(row.get("state"))):
                    if token in known:
                        self.add("token_exported", "a resume token is in the export", run_id=row.get("run_id"))

    # -- usage ----------------------------------------------------------------------------------------

    def check_usage(self) -> None:
        if self.export is None:
            return
        fields = (
            "input_tokens",
            "output_tokens",
            "total_tokens",
            "requests",
            "cache_read_tokens",
            "cache_write_tokens",
        )
        store_usage = {rid: _usage(run.state, fields) for rid, run in self.t.runs.items()}
        exported = {str(r["run_id"]): r for r in self.export.get("runs", [])}
        for rid, usage in store_usage.items():
            row = exported.get(rid)
            if row is None:
                continue  # reported as export_missing_row
            got = tuple(int(row.get(f) or 0) for f in fields)
            if got != usage:
                self.add("usage_export_run", f"export usage {got} != store {usage}", run_id=rid)
        roots: dict[str, list[str]] = defaultdict(list)
        for sid, record in self.t.sessions.items():
            roots[str(record.get("root_id"))].append(sid)
        runs_by_thread: dict[str, list[str]] = defaultdict(list)
        for rid, run in self.t.runs.items():
            runs_by_thread[run.thread_id].append(rid)
        export_roots: dict[str, list[str]] = defaultdict(list)
        for row in self.export.get("sessions", []):
            export_roots[str(row.get("root_id"))].append(str(row["session_id"]))
        export_runs_by_thread: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in self.export.get("runs", []):
            export_runs_by_thread[str(row.get("thread_id"))].append(row)
        macro = self.tree_usage_macro(sorted(roots), fields)
        for root, members in roots.items():
            want = tuple(sum(store_usage[r][i] for s in members for r in runs_by_thread[s]) for i in range(len(fields)))
            got = tuple(
                sum(int(row.get(f) or 0) for s in export_roots.get(root, []) for row in export_runs_by_thread[s])
                for f in fields
            )
            if got != want:
                self.add(
                    "usage_tree_export", f"export's tree total {got} != sum of the store's runs {want}", root_id=root
                )
            if macro is not None and macro.get(root) != want:
                self.add(
                    "usage_tree_macro", f"tree_usage() says {macro.get(root)}, the runs sum to {want}", root_id=root
                )

    def tree_usage_macro(self, roots: list[str], fields: tuple[str, ...]) -> dict[str, tuple[int, ...]] | None:
        """The product's own roll-up (``repertory.analytics.tree_usage``) for each root, over the export."""
        try:
            from repertory.analytics import connect
        except ImportError:
            return None
        con = connect(self.export_dir)
        try:
            out = {}
            cols = ", ".join(fields)
            for root in roots:
                row = con.execute(f"SELECT {cols} FROM tree_usage(?)", [root]).fetchone()
                out[root] = tuple(int(v or 0) for v in row) if row else tuple(0 for _ in fields)
            return out
        finally:
            con.close()

    # -- export ----------------------------------------------------------------------------------------

    def check_export(self) -> None:
        if self.export is None:
            self.add("export_missing", f"no export at {self.export_dir}")
            return
        t = self.t
        ex = self.export
        self.report.export_rows = sum(len(rows) for rows in ex.values())
        store_rows: dict[str, dict[tuple[Any, ...], tuple[Any, ...]]] = {
            "sessions": {
                (s,): (t.session_parents[s], r.get("root_id"), (r.get("lineage") or {}).get("kind", "root"))
                for s, r in t.sessions.items()
            },
            "threads": {(tid,): (head,) for tid, head in t.threads.items()},
            "runs": {
                (rid,): (r.thread_id, r.status, r.state.get("history_revision_id"), r.state.get("step_index"))
                for rid, r in t.runs.items()
            },
            "entries": {(eid,): (_canonical(m),) for eid, m in t.entries.items()},
            "revisions": {(rid,): (r.parent_id, r.entry_id, r.depth) for rid, r in t.revisions.items()},
            "turns": {
                (sub,): (tr.session_id, tr.seq, tr.status, tr.record.get("run_id")) for sub, tr in t.turns.items()
            },
            "events": {(sid, seq): (sub, typ, at, _canonical(data)) for sid, seq, sub, typ, at, data in t.events},
        }
        columns: dict[str, Callable[[dict[str, Any]], tuple[Any, ...]]] = {
            "sessions": lambda r: (r["parent_id"], r["root_id"], r["lineage_kind"]),
            "threads": lambda r: (r["head_revision_id"],),
            "runs": lambda r: (r["thread_id"], r["status"], r["history_revision_id"], r["step_index"]),
            "entries": lambda r: (_canonical(r["message"]),),
            "revisions": lambda r: (r["parent_id"], r["entry_id"], r["depth"]),
            "turns": lambda r: (r["session_id"], r["seq"], r["status"], r["run_id"]),
            "events": lambda r: (r["submission_id"], r["type"], r["at"], _canonical(r["data"])),
        }
        keys = {"events": ("session_id", "seq")}
        first_col = {
            "sessions": "session_id",
            "threads": "thread_id",
            "runs": "run_id",
            "entries": "entry_id",
            "revisions": "revision_id",
            "turns": "submission_id",
        }
        for table, held in store_rows.items():
            key_cols = keys.get(table, (first_col.get(table, ""),))
            got = {tuple(r[c] for c in key_cols): columns[table](r) for r in ex.get(table, [])}
            for key in held.keys() - got.keys():
                self.add(
                    "export_missing_row", f"{table} row not in the export", table=table, key="/".join(map(str, key))
                )
            for key in got.keys() - held.keys():
                self.add(
                    "export_extra_row", f"{table} row the store does not hold", table=table, key="/".join(map(str, key))
                )
            for key in held.keys() & got.keys():
                if held[key] != got[key]:
                    kind = "export_message_mismatch" if table == "entries" else "export_value_mismatch"
                    self.add(
                        kind,
                        f"{table}: store {held[key]} != export {got[key]}",
                        table=table,
                        key="/".join(map(str, key)),
                    )
        self.check_derived(ex)

    def check_derived(self, ex: dict[str, list[dict[str, Any]]]) -> None:
        """``messages`` and ``tool_calls`` follow each thread's lineage as the store holds it."""
        by_thread: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for row in ex.get("messages", []):
            by_thread[str(row["thread_id"])].append((int(row["position"]), str(row["entry_id"])))
        calls_by_thread: dict[str, set[str]] = defaultdict(set)
        for row in ex.get("tool_calls", []):
            calls_by_thread[str(row["thread_id"])].add(str(row["tool_call_id"]))
        everywhere: set[str] = set()
        for tid, head in self.t.threads.items():
            want: list[str] = []
            own_calls: set[str] = set()  # made in a revision this thread wrote: it must have the row
            lineage_calls: set[str] = set()  # on its lineage: it may have the row (a call it answered)
            if head is not None:
                try:
                    lineage = self.lineage(head)
                except _Lineage:
                    continue
                for rid in lineage:
                    rev = self.t.revisions[rid]
                    want.append(rev.entry_id)
                    raw = self.t.entries.get(rev.entry_id)
                    for p in (json.loads(raw).get("parts") or []) if raw else []:
                        if isinstance(p, dict) and p.get("type") == "tool-call":
                            cid = str(p.get("tool_call_id"))
                            lineage_calls.add(cid)
                            if rev.thread_id in (tid, None):
                                own_calls.add(cid)
            everywhere |= lineage_calls
            got = [e for _, e in sorted(by_thread.get(tid, []))]
            if got != want:
                self.add(
                    "export_thread_messages",
                    f"export's messages ({len(got)}) do not follow the thread's lineage ({len(want)})",
                    thread_id=tid,
                )
            exported = calls_by_thread.get(tid, set())
            for cid in sorted(own_calls - exported):
                self.add(
                    "export_tool_calls", "a call the thread made is not in tool_calls", thread_id=tid, tool_call_id=cid
                )
            for cid in sorted(exported - lineage_calls):
                self.add(
                    "export_tool_calls",
                    "tool_calls row for a call not on the thread's lineage",
                    thread_id=tid,
                    tool_call_id=cid,
                )
        self.report.tool_calls = len(everywhere)
        for cid in sorted(everywhere - {c for calls in calls_by_thread.values() for c in calls}):
            self.add("export_tool_calls", "a stored call has no tool_calls row on any thread", tool_call_id=cid)


def _text(message: dict[str, Any]) -> str:
    return "".join(
        str(p.get("text", "")) for p in message.get("parts") or [] if isinstance(p, dict) and p.get("type") == "text"
    )


def _usage(state: dict[str, Any], fields: tuple[str, ...]) -> tuple[int, ...]:
    usage = state.get("usage") or {}
    return tuple(int(usage.get(f) or 0) for f in fields)


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
    checker = _Checker(
        url=store_url,
        run_dir=run_dir,
        t=tables,
        export=read_export(export_dir) if export_dir.is_dir() else None,
        export_dir=export_dir,
        ledger=ledger,
        accepted=_lines(run_dir / "accepted.jsonl"),
        decisions=_lines(run_dir / "decisions.jsonl"),
        ledger_tools={str(line.get("tool")) for line in ledger} | set(meta.get("ledger_tools") or []),
        report=report,
    )
    checker.check_lineage()
    checker.check_turns_and_events()
    checker.check_pairing()
    checker.check_ledger()
    checker.check_approvals()
    checker.check_usage()
    checker.check_export()
    report.sessions = len(tables.sessions)
    report.turns = len(tables.turns)
    report.runs = len(tables.runs)
    report.messages = len(tables.entries)
    report.revisions = len(tables.revisions)
    report.events = len(tables.events)
    report.ledger_entries = len(ledger)
    report.decisions = len(checker.decisions)
    report.faults = len(_lines(run_dir / "faults.jsonl"))
    return report
