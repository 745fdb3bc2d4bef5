"""The tree tables (sessions, turns, events) of ``SqliteSessionStore``.

Short writes go through the store's writer like the rest of the store (group commit); listings
that grow with the data run on a reader connection off the event loop. Events are also written by
``commit_session`` in the same transaction as the checkpoint they describe (``insert_events``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

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
from repertory.errors import CommitConflict, StoreError
from repertory.storage.queries import SqlDialect, owner_counts_query, session_counts_query, session_page_query
from repertory.storage.readback import read_record, read_records
from repertory.storage.sqlite.connection import SqliteBase, db_errors

__all__ = [
    "INSERT_PIN",
    "SqliteTreeTables",
    "insert_events",
    "insert_rows",
    "session_of",
    "sessions_of",
    "turns_of",
    "write_session",
    "write_turn",
]

INSERT_PIN = "INSERT OR IGNORE INTO history_pins (revision_id, thread_id) VALUES (?, ?)"
"""Where a thread's lineage joins history it did not write (``repertory.storage.history_gc``)."""

# What an update may change (``TreeStore.update_session`` / ``update_turn``); the rest is the row's
# place in the tree or the queue, which the store owns (a caller's stale copy must not move it).
_SESSION_MUTABLE = ("title", "model", "cwd", "updated_at")
_TURN_MUTABLE = ("status", "error", "created_at", "updated_at")


ADD_TURN = (
    "INSERT INTO turns (submission_id, session_id, seq, status, record) "
    "SELECT ?, ?, n, ?, json_set(?, '$.seq', n) "
    "FROM (SELECT COALESCE(MAX(seq), 0) + 1 AS n FROM turns WHERE session_id = ?) "
    "RETURNING seq"
)
"""Accepting a turn is this one statement: the next seq, the row, and the seq back; a known id
fails on the primary key (``CommitConflict``), so no read comes first."""

ACCEPT_TURN = (
    ADD_TURN + ", (SELECT head FROM threads WHERE thread_id = ?), (SELECT created_at FROM threads WHERE thread_id = ?),"
    " (SELECT updated_at FROM threads WHERE thread_id = ?)"
)
"""``ADD_TURN`` that also returns the session's thread row (three primary-key lookups in its
``RETURNING``; ``created_at`` is never NULL in a stored thread, so NULL there is no thread)."""

_FEW_SESSIONS = 1_000
"""Up to this many sessions an owner's counts are read from its sessions, not from every resting run."""
_OWNED_UP_TO = "SELECT COUNT(*) FROM (SELECT 1 FROM sessions WHERE owner = ? LIMIT ?)"
_DIALECT = SqlDialect(mark="?", prefix="", order="rowid", field="json_extract({col}, '$.{key}')", find="instr")


_CHUNK = 400
"""Rows per multi-row statement: one statement per write however many rows, well under SQLite's
32,766 bound variables (a commit of a long tool loop can carry hundreds of events)."""


def values_marks(width: int, rows: int) -> str:
    """``(?, ?), (?, ?)`` for ``rows`` rows of ``width`` columns: a multi-row ``VALUES`` list."""
    one = "(" + ", ".join("?" * width) + ")"
    return ", ".join([one] * rows)


def insert_rows(conn: sqlite3.Connection, head: str, width: int, rows: Sequence[Sequence[Any]]) -> int:
    """``head VALUES (...), (...)`` in statements of up to ``_CHUNK`` rows; returns the rows it changed.

    One statement for a step's rows instead of one per row: a turn's cost is counted in
    statements (``tests/runtime/test_turn_cost.py``), and each costs a parse and a VM run.
    """
    changed = 0
    for at in range(0, len(rows), _CHUNK):
        chunk = rows[at : at + _CHUNK]
        flat = [value for row in chunk for value in row]
        changed += conn.execute(f"{head} VALUES {values_marks(width, len(chunk))}", flat).rowcount
    return changed


def insert_events(conn: sqlite3.Connection, events: Sequence[SessionEvent]) -> None:
    """Insert events inside the caller's transaction, refusing a gap or a repeated seq.

    Gap-free without a read first: each session's events go in one ``INSERT ... SELECT`` that
    inserts nothing unless the stored ``MAX(seq)`` is the one just before the first (SQLite reads
    the guard before writing, since the statement reads the table it fills); nothing inserted is
    the conflict, and only then is the log read, to say why.
    """
    by_session: dict[str, list[SessionEvent]] = {}
    for event in events:
        if event.seq is None:
            raise StoreError("live-only events (seq None) are never stored")
        run = by_session.setdefault(event.session_id, [])
        if run and event.seq != (run[-1].seq or 0) + 1:
            raise CommitConflict(
                f"event seq {event.seq} of session {event.session_id!r} is not the next one ({(run[-1].seq or 0) + 1})"
            )
        run.append(event)
    for sid, run in by_session.items():
        first = run[0].seq or 0
        for at in range(0, len(run), _CHUNK):
            chunk = run[at : at + _CHUNK]
            flat: list[Any] = []
            for e in chunk:
                flat += (sid, e.seq, e.submission_id, e.type, e.at, json.dumps(e.data))
            after = first - 1 + at
            inserted = conn.execute(
                "INSERT INTO events (session_id, seq, submission_id, type, at, data) "
                "SELECT column1, column2, column3, column4, column5, column6 "
                f"FROM (VALUES {values_marks(6, len(chunk))}) "
                "WHERE (SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?) = ?",
                (*flat, sid, after),
            ).rowcount
            if inserted != len(chunk):
                row = conn.execute("SELECT MAX(seq) FROM events WHERE session_id = ?", (sid,)).fetchone()
                expected = (row[0] or 0) + 1
                raise CommitConflict(f"event seq {after + 1} of session {sid!r} is not the next one ({expected})")


UPDATE_TURN = (
    "UPDATE turns SET status = ?, record = json_set(record, '$.status', ?, '$.error', json(?), "
    "'$.created_at', ?, '$.updated_at', ?) WHERE submission_id = ?"
)
"""A turn's mutable fields (``_TURN_MUTABLE``) rewritten inside the stored record: one statement,
no read, and the row's place in the queue (its seq, its session) stays the store's."""

UPDATE_SESSION = (
    "UPDATE sessions SET record = json_set(record, '$.title', ?, '$.model', ?, '$.cwd', ?, '$.updated_at', ?) "
    "WHERE session_id = ?"
)
"""A session's mutable fields (``_SESSION_MUTABLE``) rewritten inside the stored record, likewise."""


def write_turn(conn: sqlite3.Connection, turn: TurnRecord) -> None:
    """Rewrite a stored turn's status, error and times in the caller's transaction; ``StoreError`` if unknown."""
    error = "null" if turn.error is None else turn.error.model_dump_json()
    params = (turn.status, turn.status, error, turn.created_at, turn.updated_at, turn.submission_id)
    if conn.execute(UPDATE_TURN, params).rowcount == 0:
        raise StoreError(f"no turn {turn.submission_id!r} to update")


def write_session(conn: sqlite3.Connection, session: SessionRecord) -> None:
    """Rewrite a stored session's title, model, cwd and updated_at in the caller's transaction."""
    params = (session.title, session.model, session.cwd, session.updated_at, session.session_id)
    if conn.execute(UPDATE_SESSION, params).rowcount == 0:
        raise StoreError(f"no session {session.session_id!r} to update")


def session_of(raw: str, session_id: str) -> SessionRecord:
    """A stored session row's record (``repertory.storage.readback``: metadata that cannot be read is left out)."""
    return read_record(SessionRecord, raw, what="session", row_id=session_id, droppable=("metadata",))


def sessions_of(rows: Sequence[Sequence[Any]]) -> list[SessionRecord]:
    """The records of ``(session_id, record)`` rows; one that cannot be read back is skipped and logged."""
    return read_records(SessionRecord, ((r[0], r[1]) for r in rows), what="session", droppable=("metadata",))


def turns_of(rows: Sequence[Sequence[Any]]) -> list[TurnRecord]:
    """The records of ``(submission_id, record)`` rows; one that cannot be read back is skipped and logged."""
    return read_records(TurnRecord, ((r[0], r[1]) for r in rows), what="turn")


def _event(row: Sequence[Any]) -> SessionEvent:
    return SessionEvent(
        session_id=row[0], seq=row[1], submission_id=row[2], type=row[3], at=row[4], data=json.loads(row[5])
    )


class SqliteTreeTables(SqliteBase):
    """The tree tables; connection plumbing comes from ``SqliteBase``."""

    async def create_session(self, session: SessionRecord, *, head: str | None = None) -> None:
        """Insert the session row and its thread row in one transaction."""
        self._check_open()
        record = session.model_dump_json()

        def write(conn: sqlite3.Connection) -> None:
            exists = conn.execute(
                "SELECT 1 FROM sessions WHERE session_id = ? UNION ALL SELECT 1 FROM threads WHERE thread_id = ?",
                (session.session_id, session.session_id),
            ).fetchone()
            if exists:
                raise CommitConflict(f"session {session.session_id!r} already exists", session_id=session.session_id)
            conn.execute(
                "INSERT INTO sessions (session_id, parent_id, created_at, record, owner) VALUES (?, ?, ?, ?, ?)",
                (session.session_id, session.lineage.parent_id, session.created_at, record, session.owner),
            )
            conn.execute(
                "INSERT INTO threads (thread_id, head, created_at, updated_at) VALUES (?, ?, ?, ?)",
                (session.session_id, head, session.created_at, session.created_at),
            )
            if head is not None:  # a fork: its lineage is another thread's up to here
                conn.execute(INSERT_PIN, (head, session.session_id))

        await self._write("create_session", write)

    async def load_session(self, session_id: str) -> SessionRecord | None:
        """A copy of the session row."""
        self._check_open()
        row = self._writer.execute("SELECT record FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
        return None if row is None else session_of(row[0], session_id)

    async def update_session(self, session: SessionRecord) -> None:
        """Rewrite the session's title, model, cwd and updated_at (it must exist), in one statement."""
        self._check_open()
        await self._write("update_session", lambda conn: write_session(conn, session), atomic=False)

    async def amend_session(
        self, session_id: str, *, agent: str | None = None, metadata: Mapping[str, JsonValue] | None = None
    ) -> SessionRecord:
        """Rewrite the session's agent and/or metadata (it must exist), in one transaction."""
        self._check_open()
        changes: dict[str, object] = {}
        if agent is not None:
            changes["agent"] = agent
        if metadata is not None:
            changes["metadata"] = dict(metadata)

        def write(conn: sqlite3.Connection) -> SessionRecord:
            row = conn.execute("SELECT record FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
            if row is None:
                raise StoreError(f"no session {session_id!r} to amend")
            stored = session_of(row[0], session_id)
            record = SessionRecord.model_validate({**stored.model_dump(), **changes})
            conn.execute("UPDATE sessions SET record = ? WHERE session_id = ?", (record.model_dump_json(), session_id))
            return record

        return await self._write("amend_session", write)

    async def list_children(self, parent_id: str) -> list[SessionRecord]:
        """Children oldest first."""
        rows = await self.read(
            "list_children",
            lambda c: c.execute(
                "SELECT session_id, record FROM sessions WHERE parent_id = ? ORDER BY rowid", (parent_id,)
            ).fetchall(),
        )
        return sessions_of(rows)

    async def list_sessions(self, *, roots_only: bool = False, limit: int | None = None) -> list[SessionRecord]:
        """Sessions oldest first, optionally only roots, capped."""
        sql = "SELECT session_id, record FROM sessions" + (" WHERE parent_id IS NULL" if roots_only else "")
        sql += " ORDER BY rowid"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = await self.read("list_sessions", lambda c: c.execute(sql).fetchall())
        return sessions_of(rows)

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
        """Newest first from the rowid before ``before``'s (a rowid range scan: no sort, no offset)."""
        sql, params = session_page_query(
            _DIALECT,
            before=before,
            limit=limit,
            roots_only=roots_only,
            agent=agent,
            status=status,
            search=search,
            owner=owner,
        )
        rows = await self.read("page_sessions", lambda c: c.execute(sql, params).fetchall())
        return sessions_of(rows)

    async def session_counts(self, *, owner: str | None = None) -> dict[SessionStatus, int]:
        """Running, suspended and error counts from the open-turn and resting-run partial indexes (of ``owner``'s).

        An owner with fewer than ``_FEW_SESSIONS`` sessions is counted from its own sessions
        (``owner_counts_query``): 0.04 against 26 ms with 10,000 resting sessions in the store
        (``benchmarks.tenancy``); a larger one from the resting runs, which then costs less.
        """

        def count(c: sqlite3.Connection) -> tuple[int, int, int]:
            if owner is not None and c.execute(_OWNED_UP_TO, (owner, _FEW_SESSIONS)).fetchone()[0] < _FEW_SESSIONS:
                sql, params = owner_counts_query(_DIALECT, owner)
            else:
                sql, params = session_counts_query(_DIALECT, owner)
            row: tuple[int, int, int] = c.execute(sql, params).fetchone()
            return row

        row = await self.read("session_counts", count)
        return {"running": int(row[0]), "suspended": int(row[1]), "error": int(row[2])}

    async def add_turn(self, turn: TurnRecord, *, events: Sequence[SessionEvent] = ()) -> TurnRecord:
        """Queue a turn with the next per-session seq in one statement; ``events`` in its transaction."""
        return (await self.accept_turn(turn, events=events)).turn

    async def accept_turn(self, turn: TurnRecord, *, events: Sequence[SessionEvent] = ()) -> AcceptedTurn:
        """``add_turn`` whose one statement also returns the session's thread (``ACCEPT_TURN``)."""
        self._check_open()
        record = turn.model_dump_json()
        sid = turn.session_id

        def write(conn: sqlite3.Connection) -> AcceptedTurn:
            if events:
                insert_events(conn, events)
            try:
                # fetchall: the statement runs to its end, so an autocommit write commits here.
                (row,) = conn.execute(
                    ACCEPT_TURN, (turn.submission_id, sid, turn.status, record, sid, sid, sid, sid)
                ).fetchall()
            except sqlite3.IntegrityError:
                raise CommitConflict(f"turn {turn.submission_id!r} already exists") from None
            seq, head, created_at, updated_at = row
            thread = (
                None
                if created_at is None
                else ThreadState(thread_id=sid, history_revision_id=head, created_at=created_at, updated_at=updated_at)
            )
            return AcceptedTurn(turn.model_copy(update={"seq": int(seq)}), thread)

        return await self._write("accept_turn", write, atomic=bool(events))

    async def update_turn(self, turn: TurnRecord, *, events: Sequence[SessionEvent] = ()) -> None:
        """Rewrite the turn's status, error and times (it must exist) in one statement; ``events`` join it."""
        self._check_open()

        def write(conn: sqlite3.Connection) -> None:
            write_turn(conn, turn)
            if events:
                insert_events(conn, events)

        await self._write("update_turn", write, atomic=bool(events))

    async def load_turn(self, submission_id: str) -> TurnRecord | None:
        """A copy of the turn."""
        self._check_open()
        row = self._writer.execute("SELECT record FROM turns WHERE submission_id = ?", (submission_id,)).fetchone()
        return None if row is None else read_record(TurnRecord, row[0], what="turn", row_id=submission_id)

    async def list_turns(self, session_id: str, statuses: Sequence[TurnStatus] | None = None) -> list[TurnRecord]:
        """Turns in queue order; with ``statuses``, only those (a small, inline query)."""
        if statuses is not None:
            self._check_open()
            marks = ", ".join("?" for _ in statuses) or "NULL"
            sql = f"SELECT submission_id, record FROM turns WHERE session_id = ? AND status IN ({marks}) ORDER BY seq"
            with db_errors("list_turns"):
                rows = self._writer.execute(
                    sql,
                    (session_id, *statuses),
                ).fetchall()
            return turns_of(rows)
        rows = await self.read(
            "list_turns",
            lambda c: c.execute(
                "SELECT submission_id, record FROM turns WHERE session_id = ? ORDER BY seq", (session_id,)
            ).fetchall(),
        )
        return turns_of(rows)

    async def list_open_turns(self) -> list[TurnRecord]:
        """Queued and running turns of every session (uses the partial index)."""
        marks = ", ".join("?" for _ in OPEN_TURN_STATUSES)
        rows = await self.read(
            "list_open_turns",
            lambda c: c.execute(
                f"SELECT submission_id, record FROM turns WHERE status IN ({marks}) ORDER BY session_id, seq",
                OPEN_TURN_STATUSES,
            ).fetchall(),
        )
        return turns_of(rows)

    async def append_events(self, events: Sequence[SessionEvent]) -> None:
        """Append gap-free events in one transaction."""
        self._check_open()
        if events:
            await self._write("append_events", lambda conn: insert_events(conn, events))

    async def load_events(self, session_id: str, after_seq: int = 0, limit: int | None = None) -> list[SessionEvent]:
        """Stored events after ``after_seq``."""
        sql = "SELECT session_id, seq, submission_id, type, at, data FROM events WHERE session_id = ? AND seq > ? "
        sql += "ORDER BY seq" + ("" if limit is None else f" LIMIT {int(limit)}")
        rows = await self.read("load_events", lambda c: c.execute(sql, (session_id, after_seq)).fetchall())
        return [_event(r) for r in rows]

    async def last_event_seq(self, session_id: str) -> int:
        """Highest stored seq, 0 when none."""
        self._check_open()
        row = self._writer.execute("SELECT MAX(seq) FROM events WHERE session_id = ?", (session_id,)).fetchone()
        return int(row[0] or 0)
