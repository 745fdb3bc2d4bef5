"""The tree tables (sessions, turns, events) of ``InMemorySessionStore``, kept as JSON like the rest."""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Mapping, Sequence

from pydantic import JsonValue

from repertory.core.state import ThreadState
from repertory.core.store import AcceptedTurn
from repertory.core.tree import (
    OPEN_TURN_STATUSES,
    SessionEvent,
    SessionRecord,
    SessionStatus,
    TurnRecord,
    TurnStatus,
)
from repertory.errors import CommitConflict, RecordUnreadable, StoreError
from repertory.storage.readback import read_record, read_records

__all__ = ["MemoryTreeTables"]

log = logging.getLogger("repertory.storage")

# What an update may change (``TreeStore.update_session`` / ``update_turn``); the rest is the row's
# place in the tree or the queue, which the store owns (a caller's stale copy must not move it).
_SESSION_MUTABLE = ("title", "model", "cwd", "updated_at")
_TURN_MUTABLE = ("status", "error", "created_at", "updated_at")


def _session(raw: str, session_id: str) -> SessionRecord:
    return read_record(SessionRecord, raw, what="session", row_id=session_id, droppable=("metadata",))


def _turn(raw: str, submission_id: str) -> TurnRecord:
    return read_record(TurnRecord, raw, what="turn", row_id=submission_id)


def _owned_by(raw: str, session_id: str, owner: str) -> bool:
    try:
        return _session(raw, session_id).owner == owner
    except RecordUnreadable:
        return False


class MemoryTreeTables:
    """Mixin: the tree half of the in-memory store. Writes happen after every check passes."""

    _threads: dict[str, str]
    _runs: dict[str, tuple[int, int, str, str]]  # run_id -> (updated_at, write seq, thread_id, json)
    _closed: bool

    def _init_tree(self) -> None:
        self._sessions: dict[str, str] = {}
        self._children: dict[str, list[str]] = {}
        self._turns: dict[str, str] = {}
        self._session_turns: dict[str, list[str]] = {}
        self._events: dict[str, list[str]] = {}
        # Every event, entry and revision gets a number when it is written, from one counter that
        # never goes back (a deletion leaves a gap): an export's position (``MemorySnapshot``).
        self._born = itertools.count(1)
        self._event_born: dict[str, list[int]] = {}
        # revision id -> threads whose lineage joins it there (``repertory.storage.history_gc``)
        self._pins: dict[str, set[str]] = {}

    def _tree_open(self) -> None:
        if self._closed:
            raise StoreError("store is closed")

    async def create_session(self, session: SessionRecord, *, head: str | None = None) -> None:
        """Insert the session and its thread together."""
        self._tree_open()
        if session.session_id in self._sessions or session.session_id in self._threads:
            raise CommitConflict(f"session {session.session_id!r} already exists", session_id=session.session_id)
        thread = ThreadState(
            thread_id=session.session_id,
            history_revision_id=head,
            created_at=session.created_at,
            updated_at=session.created_at,
        )
        self._sessions[session.session_id] = session.model_dump_json()
        self._threads[session.session_id] = thread.model_dump_json()
        if head is not None:
            self._pins.setdefault(head, set()).add(session.session_id)
        if session.lineage.parent_id is not None:
            self._children.setdefault(session.lineage.parent_id, []).append(session.session_id)

    def _drop_sessions(self, session_ids: set[str]) -> tuple[int, int, int]:
        """Remove sessions with their turns and events (threads are the store's); returns the three counts.

        A surviving child keeps its place under the deleted parent's id, as the database stores'
        ``parent_id`` column keeps it.
        """
        sessions = turns = events = 0
        for sid in session_ids:
            raw = self._sessions.pop(sid, None)
            if raw is None:
                continue
            sessions += 1
            try:
                parents = [_session(raw, sid).lineage.parent_id]
            except RecordUnreadable:  # its parent unknown: look in every list of children
                parents = [p for p, children in self._children.items() if sid in children]
            for parent in parents:
                if parent is not None and parent in self._children:
                    self._children[parent] = [c for c in self._children[parent] if c != sid]
            for submission_id in self._session_turns.pop(sid, []):
                self._turns.pop(submission_id, None)
                turns += 1
            events += len(self._events.pop(sid, []))
            self._event_born.pop(sid, None)
        return sessions, turns, events

    async def amend_session(
        self, session_id: str, *, agent: str | None = None, metadata: Mapping[str, JsonValue] | None = None
    ) -> SessionRecord:
        """Rewrite the session's agent and/or metadata (it must exist)."""
        self._tree_open()
        raw = self._sessions.get(session_id)
        if raw is None:
            raise StoreError(f"no session {session_id!r} to amend")
        record = _session(raw, session_id)
        changes: dict[str, object] = {}
        if agent is not None:
            changes["agent"] = agent
        if metadata is not None:
            changes["metadata"] = dict(metadata)
        # Validated as a whole record: a change that would not survive a real store fails here too.
        amended = SessionRecord.model_validate({**record.model_dump(), **changes})
        self._sessions[session_id] = amended.model_dump_json()
        return amended

    async def load_session(self, session_id: str) -> SessionRecord | None:
        """A copy of the session row."""
        self._tree_open()
        raw = self._sessions.get(session_id)
        return None if raw is None else _session(raw, session_id)

    async def update_session(self, session: SessionRecord) -> None:
        """Rewrite the session's title, model, cwd and updated_at (it must exist)."""
        self._tree_open()
        self._sessions[session.session_id] = self._session_row(session)

    def _session_row(self, session: SessionRecord) -> str:
        """The stored row with ``session``'s mutable fields: checked and serialised, not yet written."""
        raw = self._sessions.get(session.session_id)
        if raw is None:
            raise StoreError(f"no session {session.session_id!r} to update")
        stored = _session(raw, session.session_id)
        changes = {f: getattr(session, f) for f in _SESSION_MUTABLE}
        return stored.model_copy(update=changes).model_dump_json()

    async def list_children(self, parent_id: str) -> list[SessionRecord]:
        """Children oldest first."""
        self._tree_open()
        # Insertion order is creation order, also within one millisecond.
        children = [(c, self._sessions[c]) for c in self._children.get(parent_id, [])]
        return read_records(SessionRecord, children, what="session", droppable=("metadata",))

    async def list_sessions(self, *, roots_only: bool = False, limit: int | None = None) -> list[SessionRecord]:
        """Sessions oldest first (dicts keep insertion order), optionally only roots, capped."""
        self._tree_open()
        out: list[SessionRecord] = []
        for record in read_records(SessionRecord, self._sessions.items(), what="session", droppable=("metadata",)):
            if roots_only and record.lineage.parent_id is not None:
                continue
            out.append(record)
            if limit is not None and len(out) >= limit:
                break
        return out

    def _statuses(self) -> dict[str, SessionStatus]:
        """Every session that is not idle, with its status (the rule of ``TreeStore.page_sessions``)."""
        latest: dict[str, tuple[int, int, str]] = {}
        for updated_at, seq, thread_id, raw in self._runs.values():
            if thread_id not in latest or (updated_at, seq) > latest[thread_id][:2]:
                latest[thread_id] = (updated_at, seq, raw)
        out: dict[str, SessionStatus] = {}
        for thread_id, (_, _, raw) in latest.items():
            try:
                status = json.loads(raw)["status"]
            except (ValueError, KeyError, TypeError, RecursionError):
                log.warning("skipping the latest run of thread %r, which cannot be read back", thread_id)
                continue
            if thread_id in self._sessions and status in ("suspended", "error"):
                out[thread_id] = status
        for turn in read_records(TurnRecord, self._turns.items(), what="turn"):
            if turn.status in OPEN_TURN_STATUSES:
                out[turn.session_id] = "running"
        return out

    async def page_sessions(
        self,
        *,
        before: str | None = None,
        limit: int = 50,
        roots_only: bool = False,
        agent: str | None = None,
        status: SessionStatus | None = None,
        search: str | None = None,
        owner: str | None = None,
    ) -> list[SessionRecord]:
        """Newest first (reversed insertion order) from the session before ``before``."""
        self._tree_open()
        ids = list(self._sessions)
        if before is not None:
            if before not in self._sessions:
                return []
            ids = ids[: ids.index(before)]
        statuses = self._statuses() if status is not None else {}
        needle = search.lower() if search else None
        out: list[SessionRecord] = []
        for sid in reversed(ids):
            if len(out) >= limit:
                break
            if status is not None and statuses.get(sid, "idle") != status:
                continue
            try:
                record = _session(self._sessions[sid], sid)
            except RecordUnreadable as exc:
                log.warning("skipping session %r, which cannot be read back: %s", sid, exc.reason)
                continue
            if roots_only and record.lineage.parent_id is not None:
                continue
            if agent is not None and record.agent != agent:
                continue
            if owner is not None and record.owner != owner:
                continue
            if needle and not (sid.lower().startswith(needle) or needle in (record.title or "").lower()):
                continue
            out.append(record)
        return out

    async def session_counts(self, *, owner: str | None = None) -> dict[SessionStatus, int]:
        """Running, suspended and error counts (of ``owner``'s sessions, when named)."""
        self._tree_open()
        counts: dict[SessionStatus, int] = {"running": 0, "suspended": 0, "error": 0}
        for sid, status in self._statuses().items():
            raw = self._sessions.get(sid) if owner is not None else None
            if owner is not None and (raw is None or not _owned_by(raw, sid, owner)):
                continue
            counts[status] += 1
        return counts

    async def add_turn(self, turn: TurnRecord, *, events: Sequence[SessionEvent] = ()) -> TurnRecord:
        """Queue a turn with the next per-session seq, and append ``events``, all or nothing."""
        self._tree_open()
        if turn.submission_id in self._turns:
            raise CommitConflict(f"turn {turn.submission_id!r} already exists")
        self._write_events(self._check_events(events))
        queue = self._session_turns.setdefault(turn.session_id, [])
        last = _turn(self._turns[queue[-1]], queue[-1]).seq if queue else 0
        stored = turn.model_copy(update={"seq": last + 1})
        self._turns[turn.submission_id] = stored.model_dump_json()
        queue.append(turn.submission_id)
        return stored

    async def accept_turn(self, turn: TurnRecord, *, events: Sequence[SessionEvent] = ()) -> AcceptedTurn:
        """``add_turn``, and the session's thread as it stands once the turn is queued."""
        stored = await self.add_turn(turn, events=events)
        raw = self._threads.get(turn.session_id)
        return AcceptedTurn(stored, None if raw is None else ThreadState.model_validate_json(raw))

    async def update_turn(self, turn: TurnRecord, *, events: Sequence[SessionEvent] = ()) -> None:
        """Rewrite the turn's status, error and times (it must exist), with ``events``, all or nothing."""
        self._tree_open()
        row = self._turn_row(turn)
        rows = self._check_events(events)  # both checked before either is written
        self._turns[turn.submission_id] = row
        self._write_events(rows)

    def _turn_row(self, turn: TurnRecord) -> str:
        """The stored row with ``turn``'s mutable fields: checked and serialised, not yet written."""
        raw = self._turns.get(turn.submission_id)
        if raw is None:
            raise StoreError(f"no turn {turn.submission_id!r} to update")
        stored = _turn(raw, turn.submission_id)
        changes = {f: getattr(turn, f) for f in _TURN_MUTABLE}
        return stored.model_copy(update=changes).model_dump_json()

    async def load_turn(self, submission_id: str) -> TurnRecord | None:
        """A copy of the turn."""
        self._tree_open()
        raw = self._turns.get(submission_id)
        return None if raw is None else _turn(raw, submission_id)

    async def list_turns(self, session_id: str, statuses: Sequence[TurnStatus] | None = None) -> list[TurnRecord]:
        """Turns in queue order."""
        self._tree_open()
        ids = self._session_turns.get(session_id, [])
        turns = read_records(TurnRecord, ((t, self._turns[t]) for t in ids), what="turn")
        return [t for t in turns if statuses is None or t.status in statuses]

    async def list_open_turns(self) -> list[TurnRecord]:
        """Queued and running turns of every session."""
        self._tree_open()
        turns = read_records(TurnRecord, self._turns.items(), what="turn")
        return sorted((t for t in turns if t.status in OPEN_TURN_STATUSES), key=lambda t: (t.session_id, t.seq))

    def _check_events(self, events: Sequence[SessionEvent]) -> list[tuple[str, str]]:
        rows: list[tuple[str, str]] = []
        expected: dict[str, int] = {}
        for event in events:
            if event.seq is None:
                raise StoreError("live-only events (seq None) are never stored")
            sid = event.session_id
            nxt = expected.get(sid, len(self._events.get(sid, [])) + 1)
            if event.seq != nxt:
                raise CommitConflict(f"event seq {event.seq} of session {sid!r} is not the next one ({nxt})")
            expected[sid] = nxt + 1
            rows.append((sid, event.model_dump_json()))
        return rows

    def _write_events(self, rows: list[tuple[str, str]]) -> None:
        for sid, raw in rows:
            self._events.setdefault(sid, []).append(raw)
            self._event_born.setdefault(sid, []).append(next(self._born))

    async def append_events(self, events: Sequence[SessionEvent]) -> None:
        """Append gap-free events, all or nothing."""
        self._tree_open()
        self._write_events(self._check_events(events))

    async def load_events(self, session_id: str, after_seq: int = 0, limit: int | None = None) -> list[SessionEvent]:
        """Stored events after ``after_seq``."""
        self._tree_open()
        rows = self._events.get(session_id, [])[max(after_seq, 0) :]
        if limit is not None:
            rows = rows[:limit]
        return [SessionEvent.model_validate_json(r) for r in rows]

    async def last_event_seq(self, session_id: str) -> int:
        """Highest stored seq, 0 when none."""
        self._tree_open()
        return len(self._events.get(session_id, []))
