"""``InMemorySessionStore``: the conformance reference, for tests and throwaway sessions.

Records are kept as JSON text, exactly as the database backends keep them, so every read is a
fresh copy and a record that would not survive a real store does not survive this one either.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, KeysView, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import TypeAdapter

from repertory.core.budget import SpendDelta, tree_scope
from repertory.core.history import HistoryEntry, HistoryIntegrityError, HistoryRevision, MessageHistory
from repertory.core.ids import now_ms
from repertory.core.state import RunState, RunStatus, ThreadState
from repertory.core.store import DeletedRows, StoreAliases
from repertory.core.tree import SessionEvent, SessionRecord, TurnRecord
from repertory.errors import StoreError
from repertory.storage.commit_plan import (
    check_event_sessions,
    check_head_move,
    check_stored_state,
    plan_commit,
    plan_head_move,
)
from repertory.storage.history_gc import base_namers, collectable, commit_pins, head_move_pins
from repertory.storage.memory._budget_tables import MemoryBudgetTables
from repertory.storage.memory._inbox_tables import MemoryInboxTables
from repertory.storage.memory._memory_tables import MemoryMemTables
from repertory.storage.memory._time_tables import MemoryTimeTables
from repertory.storage.memory._tree_tables import MemoryTreeTables
from repertory.storage.readback import read_record, read_records

__all__ = ["HistoryTable", "InMemorySessionStore", "MemorySnapshot", "RecordTable", "WriteHook", "WrittenTable"]

HistoryTable = Literal["history_entries", "history_revisions"]
"""The two tables of the history graph, by the names the database stores give them."""

WrittenTable = Literal["runs", "history_entries", "history_revisions"]
"""The tables whose writes ``InMemorySessionStore.write_hook`` sees."""
RecordTable = Literal["sessions", "turns", "runs", "schedules", "webhooks", "decision_requests"]
"""The tables whose rows are one record's JSON (``InMemorySessionStore.replace_record``)."""

WriteHook = Callable[[WrittenTable, str], None]
"""``(table, key)``, called just before the in-memory store writes that row (see ``write_hook``)."""

_REVISION = TypeAdapter(HistoryRevision)
_ENTRY = TypeAdapter(HistoryEntry)


@dataclass(frozen=True, slots=True)
class MemorySnapshot:
    """Copies of every row of an in-memory store at one moment, as the store keeps them (JSON text).

    Lists keep insertion order. Every entry, revision and event was numbered when it was written,
    from one counter: the numbers are that order's change marker (an export's position), and a
    deletion, which leaves gaps among them, never moves one (a count or a list offset would be
    moved by it, and an export resuming there would skip rows).
    """

    entries: list[tuple[str, str]]
    """``(entry_id, HistoryEntry JSON)``, oldest first."""
    revisions: list[tuple[str, str]]
    """``(revision_id, HistoryRevision JSON)``, oldest first."""
    runs: list[tuple[str, int, str, str]]
    """``(run_id, write sequence number, thread_id, RunState JSON)``; the number grows with every write."""
    threads: list[tuple[str, str]]
    """``(thread_id, ThreadState JSON)``."""
    sessions: list[tuple[str, str]]
    """``(session_id, SessionRecord JSON)``."""
    turns: list[tuple[str, str]]
    """``(submission_id, TurnRecord JSON)``."""
    events: dict[str, list[str]]
    """session_id -> its ``SessionEvent`` JSON, in ``seq`` order."""
    entry_numbers: list[int]
    """The number of each of ``entries``, in the same order (ascending)."""
    revision_numbers: list[int]
    """The number of each of ``revisions``, in the same order (ascending)."""
    event_numbers: dict[str, list[int]]
    """session_id -> the number of each of its ``events``, in the same order (ascending)."""


class InMemorySessionStore(
    MemoryTreeTables, MemoryMemTables, MemoryTimeTables, MemoryInboxTables, MemoryBudgetTables, StoreAliases
):
    """A ``TreeStore`` held in this process's memory; nothing survives the process."""

    def __init__(self) -> None:
        self._runs: dict[str, tuple[int, int, str, str]] = {}  # run_id -> (updated_at, seq, thread_id, json)
        self._threads: dict[str, str] = {}
        self._revisions: dict[str, str] = {}
        self._entries: dict[str, str] = {}
        self._entry_born: dict[str, int] = {}  # entry id -> its number (``MemorySnapshot``)
        self._revision_born: dict[str, int] = {}
        self._seq = itertools.count(1)
        self._closed = False
        self._writers: dict[str, str] = {}  # revision id -> the thread whose commit first wrote it
        self._shared_entries: set[str] = set()  # entries a second revision came to name
        self._namers: dict[str, set[str]] = {}  # entry -> revisions naming it, for re-added ones (history_gc)
        self._init_tree()
        self.write_hook: WriteHook | None = None
        """Called with ``(table, key)`` before each write of a run or history row; ``None`` normally.

        The seam fault-injection and write-counting tests use (``repertory.testing.conformance``
        probes): an exception from the hook fails that write and the call it is in. A commit writes
        its run row first, so a hook failing there leaves the whole commit unwritten (failing at a
        later row leaves the rows before it written: that is the hook's choice). History rows
        are reported even when already held (the write is then a no-op), as a database's ``INSERT
        OR IGNORE`` would attempt them.
        """

    def row_ids(self, table: HistoryTable) -> KeysView[str]:
        """The ids of one history table's rows, as a live read-only view.

        Lets a probe count what the store holds and ask whether it holds an entry, which no
        ``SessionStore`` method answers (history is reached by revision, never listed).
        """
        return (self._entries if table == "history_entries" else self._revisions).keys()

    def replace_record(self, table: RecordTable, row_id: str, raw: str) -> None:
        """Replace the JSON of one existing row with ``raw``, unchecked; ``KeyError`` for an unknown row.

        The seam a probe uses to leave a row as a hand edit or an older version would have
        (``repertory.testing.conformance``'s readback suite): nothing else writes a row unchecked.
        """
        if table == "runs":
            updated_at, seq, thread_id, _ = self._runs[row_id]
            self._runs[row_id] = (updated_at, seq, thread_id, raw)
            return
        if table == "decision_requests":
            self._replace_request(row_id, raw)
            return
        rows = {
            "sessions": self._sessions,
            "turns": self._turns,
            "schedules": self._time().schedules,
            "webhooks": self._time().webhooks,
        }[table]
        if row_id not in rows:
            raise KeyError(row_id)
        rows[row_id] = raw

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("store is closed")

    async def load_run(self, run_id: str) -> RunState | None:
        """A copy of the run's checkpoint, or ``None``."""
        self._check_open()
        row = self._runs.get(run_id)
        return None if row is None else read_record(RunState, row[3], what="run", row_id=run_id)

    async def list_runs(
        self, thread_id: str | None = None, *, statuses: Sequence[RunStatus] | None = None, limit: int | None = None
    ) -> list[RunState]:
        """Runs newest-updated first, ties broken by most recent write; optionally filtered and capped."""
        self._check_open()
        rows = [(k, r) for k, r in self._runs.items() if thread_id is None or r[2] == thread_id]
        rows.sort(key=lambda kr: (kr[1][0], kr[1][1]), reverse=True)
        runs = read_records(RunState, ((k, r[3]) for k, r in rows), what="run")
        if statuses is not None:
            runs = [r for r in runs if r.status in statuses]
        return runs if limit is None else runs[: max(limit, 0)]

    async def delete_run(self, run_id: str) -> None:
        """Remove the run row only."""
        self._check_open()
        self._runs.pop(run_id, None)

    async def load_thread(self, thread_id: str) -> ThreadState | None:
        """A copy of the thread head, or ``None``."""
        self._check_open()
        raw = self._threads.get(thread_id)
        return None if raw is None else ThreadState.model_validate_json(raw)

    async def load_history(self, revision_id: str) -> MessageHistory | None:
        """The lineage of ``revision_id``, root first, or ``None``.

        A lineage missing a revision or an entry raises ``HistoryIntegrityError``, as the SQL
        stores' do: a store that lost part of a lineage says so rather than a ``KeyError``.
        """
        self._check_open()
        if revision_id not in self._revisions:
            return None
        revisions: list[HistoryRevision] = []
        current: str | None = revision_id
        while current is not None:
            raw = self._revisions.get(current)
            if raw is None:
                raise HistoryIntegrityError(f"history does not hold revision {current!r}")
            rev = _REVISION.validate_json(raw)
            revisions.append(rev)
            current = rev.parent_id
        revisions.reverse()
        try:
            entries = [_ENTRY.validate_json(self._entries[r.entry_id]) for r in revisions]
        except KeyError as exc:
            raise HistoryIntegrityError(f"history does not hold entry {exc.args[0]!r}") from None
        return MessageHistory.of_lineage(revision_id, revisions, entries)

    async def commit_session(
        self,
        *,
        run: RunState,
        thread: ThreadState,
        history: MessageHistory,
        base_revision_id: str | None = None,
        redeem_token: str | None = None,
        events: Sequence[SessionEvent] = (),
        turn: TurnRecord | None = None,
        session: SessionRecord | None = None,
        spend: SpendDelta | None = None,
    ) -> None:
        """Atomic: every check passes before the first write, and the writes cannot fail halfway."""
        self._check_open()
        check_event_sessions(events, thread.thread_id)
        delta = plan_commit(run, thread, history, base_revision_id, self._revisions.__contains__)
        stored_thread = self._threads.get(thread.thread_id)
        stored_head = None if stored_thread is None else ThreadState.model_validate_json(stored_thread)
        raw_run = self._runs.get(run.run_id)
        stored_run = None if raw_run is None else RunState.model_validate_json(raw_run[3])
        check_stored_state(
            run,
            thread,
            base_revision_id,
            None if stored_head is None else stored_head.history_revision_id,
            stored_head is not None,
            None if stored_run is None else stored_run.status,
            redeem_token,
            None if stored_run is None or stored_run.suspended_on is None else stored_run.suspended_on.token,
        )
        event_rows = self._check_events(events)
        turn_row = None if turn is None else self._turn_row(turn)
        session_row = None if session is None else self._session_row(session)
        ledger_rows = self._planned_spend(spend)
        # Serialise everything first: a failure here leaves the store untouched.
        run_json = run.model_dump_json()
        if stored_head is not None:
            thread = thread.model_copy(update={"created_at": stored_head.created_at})
        thread_json = thread.model_dump_json()
        new_entries = [(e.id, e.model_dump_json()) for e in delta.entries]
        new_revs = [(r.id, r.model_dump_json()) for r in delta.revisions]
        again = {} if delta.grows else base_namers(history, base_revision_id, [e.id for e in delta.entries])
        # The run row goes first: a write_hook failing it (a test's injected failure) leaves nothing written.
        hook = self.write_hook
        if hook is not None:
            hook("runs", run.run_id)
        self._runs[run.run_id] = (run.updated_at, next(self._seq), run.thread_id, run_json)
        self._threads[thread.thread_id] = thread_json
        tid = thread.thread_id
        for eid, raw in new_entries:
            if hook is not None:
                hook("history_entries", eid)
            if self._add_entry(eid, raw):
                continue
            if eid in again:  # re-added (a compaction): every revision naming it is recorded
                named = self._namers.setdefault(eid, set())
                named.update(again[eid])
                named.update(r.id for r in delta.revisions if r.entry_id == eid)
            else:
                self._shared_entries.add(eid)
        for rid, raw in new_revs:
            if hook is not None:
                hook("history_revisions", rid)
            if self._add_revision(rid, raw):
                self._writers[rid] = tid
            else:
                self._pins.setdefault(rid, set()).add(tid)  # walked but held: someone else's
        for pinned in commit_pins(delta.revisions, history.revision_id, base_revision_id):
            self._pins.setdefault(pinned, set()).add(tid)
        self._write_events(event_rows)
        if turn is not None and turn_row is not None:
            self._turns[turn.submission_id] = turn_row
        if session is not None and session_row is not None:
            self._sessions[session.session_id] = session_row
        if ledger_rows:
            self._write_spend(ledger_rows)

    async def move_head(self, thread_id: str, *, history: MessageHistory, base_revision_id: str | None) -> None:
        """Compare-and-set the thread head to ``history.revision_id``, writing the revisions it lacks."""
        self._check_open()
        delta = plan_head_move(history, thread_id, self._revisions.__contains__)
        raw = self._threads.get(thread_id)
        stored = None if raw is None else ThreadState.model_validate_json(raw)
        check_head_move(
            thread_id, base_revision_id, stored is not None, None if stored is None else stored.history_revision_id
        )
        assert stored is not None
        thread_json = stored.model_copy(
            update={"history_revision_id": history.revision_id, "updated_at": now_ms()}
        ).model_dump_json()
        new_entries = [(e.id, e.model_dump_json()) for e in delta.entries]
        new_revs = [(r.id, r.model_dump_json()) for r in delta.revisions]
        hook = self.write_hook
        for eid, entry_json in new_entries:
            if hook is not None:
                hook("history_entries", eid)
            self._add_entry(eid, entry_json)
        for rid, rev_json in new_revs:
            if hook is not None:
                hook("history_revisions", rid)
            self._add_revision(rid, rev_json)
        for pinned in head_move_pins(delta.revisions, history.revision_id, base_revision_id):
            self._pins.setdefault(pinned, set()).add(thread_id)
        self._threads[thread_id] = thread_json

    def _add_entry(self, entry_id: str, raw: str) -> bool:
        """Hold the entry unless it is held already (then ``False``); a new one gets its number."""
        return self._hold(self._entries, self._entry_born, entry_id, raw)

    def _add_revision(self, revision_id: str, raw: str) -> bool:
        """Hold the revision unless it is held already (then ``False``); a new one gets its number."""
        return self._hold(self._revisions, self._revision_born, revision_id, raw)

    def _hold(self, rows: dict[str, str], born: dict[str, int], key: str, raw: str) -> bool:
        if key in rows:
            return False
        rows[key] = raw
        born[key] = next(self._born)
        return True

    async def save(self, run: RunState) -> None:
        """Write the run row unconditionally."""
        self._check_open()
        if self.write_hook is not None:
            self.write_hook("runs", run.run_id)
        self._runs[run.run_id] = (run.updated_at, next(self._seq), run.thread_id, run.model_dump_json())

    async def delete_sessions(self, session_ids: Sequence[str]) -> DeletedRows:
        """Delete the sessions and what is theirs alone; one synchronous step, so nothing sees it half done.

        Which history stays follows ``repertory.storage.history_gc`` (writers, pins, shared entries).
        """
        self._check_open()
        gone = [sid for sid in dict.fromkeys(session_ids) if sid in self._sessions]
        if not gone:
            return DeletedRows()
        doomed = set(gone)
        # From the heads and from whatever the threads pinned (a head they left: ``commit_pins``).
        starts = [self._head(sid) for sid in gone]
        starts += [rid for rid, threads in self._pins.items() if not threads.isdisjoint(doomed)]
        reached: dict[str, tuple[str | None, str]] = {}
        for head in starts:
            current = head
            while current is not None and current not in reached and current in self._revisions:
                rev = _REVISION.validate_json(self._revisions[current])
                reached[current] = (rev.parent_id, rev.entry_id)
                current = rev.parent_id

        def alive(thread_id: str) -> bool:
            return thread_id in self._threads and thread_id not in doomed

        seeds: list[tuple[str, str | None]] = []
        for rid in reached:
            writer = self._writers.get(rid)
            if writer is None or alive(writer):
                seeds.append((rid, writer))  # a remaining thread wrote it (or nobody knows who did)
            seeds += [(rid, t) for t in self._pins.get(rid, ()) if alive(t)]
        plan = collectable(reached, seeds, self._writers.get, alive)
        gone_revisions = set(plan.revisions)
        entries = set()
        for eid in plan.entries - self._shared_entries:
            named = self._namers.get(eid)
            if named is not None and not named <= gone_revisions:
                continue  # a revision this deletion keeps names it still
            entries.add(eid)
        for eid in {reached[rid][1] for rid in gone_revisions}:
            named = self._namers.get(eid)
            if named is not None:
                named -= gone_revisions
                if not named:
                    del self._namers[eid]
        runs = [rid for rid, row in self._runs.items() if row[2] in doomed]
        for rid in runs:
            del self._runs[rid]
        self._forget_ledgers([tree_scope(sid) for sid in gone])
        for rid in plan.revisions:
            del self._revisions[rid]
            del self._revision_born[rid]
            self._writers.pop(rid, None)
        for eid in entries:
            if self._entries.pop(eid, None) is not None:
                del self._entry_born[eid]
        for rid, threads in list(self._pins.items()):
            threads -= doomed
            if not threads:
                del self._pins[rid]
        # What this deletion kept for a remaining thread is recorded where later walks see it.
        for rid, owner in plan.writers.items():
            if owner is None:
                self._writers.pop(rid, None)
            else:
                self._writers[rid] = owner
        for rid, tid in plan.pins:
            self._pins.setdefault(rid, set()).add(tid)
        for tid in gone:
            self._threads.pop(tid, None)
        sessions, turns, events = self._drop_sessions(doomed)
        timers, schedules = self._forget_sessions(doomed)
        self._forget_decisions(doomed)
        return DeletedRows(
            sessions=sessions,
            runs=len(runs),
            turns=turns,
            events=events,
            revisions=len(plan.revisions),
            entries=len(entries),
            memory_records=self._forget_threads(doomed),
            timers=timers,
            schedules=schedules,
        )

    def _head(self, thread_id: str) -> str | None:
        raw = self._threads.get(thread_id)
        return None if raw is None else ThreadState.model_validate_json(raw).history_revision_id

    def snapshot(self) -> MemorySnapshot:
        """Copies of every row, taken in one synchronous step (one consistent moment); for the exporter.

        Raises ``StoreError`` once the store is closed.
        """
        self._check_open()
        return MemorySnapshot(
            entries=list(self._entries.items()),
            revisions=list(self._revisions.items()),
            entry_numbers=list(self._entry_born.values()),
            revision_numbers=list(self._revision_born.values()),
            runs=[(rid, row[1], row[2], row[3]) for rid, row in self._runs.items()],
            threads=list(self._threads.items()),
            sessions=list(self._sessions.items()),
            turns=list(self._turns.items()),
            events={sid: list(rows) for sid, rows in self._events.items()},
            event_numbers={sid: list(numbers) for sid, numbers in self._event_born.items()},
        )

    async def close(self) -> None:
        """Mark the store closed; later calls raise ``StoreError``."""
        self._closed = True
