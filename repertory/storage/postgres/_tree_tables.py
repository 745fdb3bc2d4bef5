"""The tree tables (sessions, turns, events) of ``PostgresSessionStore``."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from pydantic import JsonValue

from repertory.core.state import ThreadState
from repertory.core.store import AcceptedTurn, DeletedRows
from repertory.core.tree import (
    OPEN_TURN_STATUSES,
    SessionEvent,
    SessionRecord,
    SessionStatus,
    TurnRecord,
    TurnStatus,
)
from repertory.errors import CommitConflict, StoreError
from repertory.storage.postgres._delete import delete_sessions
from repertory.storage.postgres.connection import PgBase
from repertory.storage.queries import SqlDialect, session_counts_query, session_page_query
from repertory.storage.readback import read_record, read_records

__all__ = [
    "PgTreeTables",
    "event_arrays",
    "merged_session",
    "merged_turn",
    "session_of",
    "write_session",
    "write_turn",
]

# What an update may change (``TreeStore.update_session`` / ``update_turn``); the rest is the row's
# place in the tree or the queue, which the store owns (a caller's stale copy must not move it).
# Merged here rather than with jsonb: jsonb refuses the NUL character a message may hold.
_SESSION_MUTABLE = ("title", "model", "cwd", "updated_at")
_TURN_MUTABLE = ("status", "error", "created_at", "updated_at")


# Records are text, not jsonb (jsonb refuses NUL), so a field is read through a json cast.
_DIALECT = SqlDialect(mark="%s", prefix="repertory.", order="ord", field="(({col})::json ->> '{key}')", find="strpos")


ACCEPT_TURN_SQL = "SELECT * FROM repertory.repertory_accept_turn(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
_SEQ_FIELD = re.compile(r'"seq":-?[0-9]+')


def event_arrays(events: Sequence[SessionEvent], session_id: str) -> list[list[Any]]:
    """Columns of ``events`` as arrays for the commit function (all must belong to ``session_id``)."""
    for event in events:
        if event.seq is None:
            raise StoreError("live-only events (seq None) are never stored")
        if event.session_id != session_id:
            raise StoreError(f"a commit on thread {session_id!r} carries an event of session {event.session_id!r}")
    return [
        [e.seq for e in events],
        [e.submission_id for e in events],
        [e.type for e in events],
        [e.at for e in events],
        [json.dumps(e.data) for e in events],
    ]


def session_of(raw: str, session_id: str) -> SessionRecord:
    """A stored session row's record (``repertory.storage.readback``: metadata that cannot be read is left out)."""
    return read_record(SessionRecord, raw, what="session", row_id=session_id, droppable=("metadata",))


def _sessions(rows: Sequence[Sequence[Any]]) -> list[SessionRecord]:
    return read_records(SessionRecord, ((r[0], r[1]) for r in rows), what="session", droppable=("metadata",))


def _turns(rows: Sequence[Sequence[Any]]) -> list[TurnRecord]:
    return read_records(TurnRecord, ((r[0], r[1]) for r in rows), what="turn")


def merged_turn(stored: str, turn: TurnRecord) -> TurnRecord:
    """The stored turn (its JSON) with ``turn``'s mutable fields: the rest is the row's place, the store's."""
    changes = {f: getattr(turn, f) for f in _TURN_MUTABLE}
    return read_record(TurnRecord, stored, what="turn", row_id=turn.submission_id).model_copy(update=changes)


def merged_session(stored: str, session: SessionRecord) -> SessionRecord:
    """The stored session (its JSON) with ``session``'s mutable fields (title, model, cwd, updated_at)."""
    changes = {f: getattr(session, f) for f in _SESSION_MUTABLE}
    return session_of(stored, session.session_id).model_copy(update=changes)


async def write_turn(conn: psycopg.AsyncConnection[Any], turn: TurnRecord) -> None:
    """Rewrite a stored turn's mutable fields inside the caller's transaction; ``StoreError`` if unknown.

    Read, changed and written back in Python (the record is ``text``: ``jsonb`` would refuse a NUL
    in a message), under the row's lock.
    """
    cur = await conn.execute(
        "SELECT record FROM repertory.turns WHERE submission_id = %s FOR UPDATE", (turn.submission_id,)
    )
    row = await cur.fetchone()
    if row is None:
        raise StoreError(f"no turn {turn.submission_id!r} to update")
    record = merged_turn(row[0], turn)
    await conn.execute(
        "UPDATE repertory.turns SET status = %s, record = %s WHERE submission_id = %s",
        (record.status, record.model_dump_json(), turn.submission_id),
    )


async def write_session(conn: psycopg.AsyncConnection[Any], session: SessionRecord) -> None:
    """Rewrite a stored session's title, model, cwd and updated_at inside the caller's transaction."""
    cur = await conn.execute(
        "SELECT record FROM repertory.sessions WHERE session_id = %s FOR UPDATE", (session.session_id,)
    )
    row = await cur.fetchone()
    if row is None:
        raise StoreError(f"no session {session.session_id!r} to update")
    await conn.execute(
        "UPDATE repertory.sessions SET record = %s WHERE session_id = %s",
        (merged_session(row[0], session).model_dump_json(), session.session_id),
    )


async def _insert_events(conn: psycopg.AsyncConnection[Any], events: Sequence[SessionEvent]) -> None:
    """Insert gap-free events inside the caller's transaction (a repeated seq or a gap is ``CommitConflict``)."""
    by_session: dict[str, list[SessionEvent]] = {}
    for event in events:
        if event.seq is None:
            raise StoreError("live-only events (seq None) are never stored")
        by_session.setdefault(event.session_id, []).append(event)
    for sid, batch in by_session.items():
        cur = await conn.execute("SELECT COALESCE(MAX(seq), 0) FROM repertory.events WHERE session_id = %s", (sid,))
        row = await cur.fetchone()
        last = int(row[0] if row else 0)
        for i, event in enumerate(batch, start=1):
            if event.seq != last + i:
                raise CommitConflict(f"event seq {event.seq} of session {sid!r} is not the next one ({last + i})")
        async with conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO repertory.events (session_id, seq, submission_id, type, at, data) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                [(sid, e.seq, e.submission_id, e.type, e.at, json.dumps(e.data)) for e in batch],
            )


def _event(row: Sequence[Any]) -> SessionEvent:
    return SessionEvent(
        session_id=row[0], seq=row[1], submission_id=row[2], type=row[3], at=row[4], data=json.loads(row[5])
    )


class PgTreeTables(PgBase):
    """Sessions, turns and events; every multi-statement write is one transaction."""

    async def create_session(self, session: SessionRecord, *, head: str | None = None) -> None:
        """Insert the session row and its thread row in one transaction (duplicates conflict)."""
        async with self.connection("create_session") as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO repertory.sessions (session_id, parent_id, created_at, record, owner) "
                "VALUES (%s, %s, %s, %s, %s)",
                (
                    session.session_id,
                    session.lineage.parent_id,
                    session.created_at,
                    session.model_dump_json(),
                    session.owner,
                ),
            )
            await conn.execute(
                "INSERT INTO repertory.threads (thread_id, head, created_at, updated_at) VALUES (%s, %s, %s, %s)",
                (session.session_id, head, session.created_at, session.created_at),
            )
            if head is not None:  # a fork: its lineage is another thread's up to here (``history_gc``)
                await conn.execute(
                    "INSERT INTO repertory.history_pins (revision_id, thread_id) VALUES (%s, %s) "
                    "ON CONFLICT DO NOTHING",
                    (head, session.session_id),
                )

    async def load_session(self, session_id: str) -> SessionRecord | None:
        """A copy of the session row."""
        async with self.connection("load_session") as conn:
            cur = await conn.execute("SELECT record FROM repertory.sessions WHERE session_id = %s", (session_id,))
            row = await cur.fetchone()
        return None if row is None else session_of(row[0], session_id)

    async def update_session(self, session: SessionRecord) -> None:
        """Rewrite the session's title, model, cwd and updated_at (it must exist)."""
        async with self.connection("update_session") as conn, conn.transaction():
            await write_session(conn, session)

    async def amend_session(
        self, session_id: str, *, agent: str | None = None, metadata: Mapping[str, JsonValue] | None = None
    ) -> SessionRecord:
        """Rewrite the session's agent and/or metadata (it must exist), in one transaction."""
        changes: dict[str, object] = {}
        if agent is not None:
            changes["agent"] = agent
        if metadata is not None:
            changes["metadata"] = dict(metadata)
        async with self.connection("amend_session") as conn, conn.transaction():
            cur = await conn.execute(
                "SELECT record FROM repertory.sessions WHERE session_id = %s FOR UPDATE", (session_id,)
            )
            row = await cur.fetchone()
            if row is None:
                raise StoreError(f"no session {session_id!r} to amend")
            stored = session_of(row[0], session_id)
            record = SessionRecord.model_validate({**stored.model_dump(), **changes})
            await conn.execute(
                "UPDATE repertory.sessions SET record = %s WHERE session_id = %s",
                (record.model_dump_json(), session_id),
            )
        return record

    async def delete_sessions(self, session_ids: Sequence[str]) -> DeletedRows:
        """Delete sessions and what is theirs alone, in one transaction (``TreeStore.delete_sessions``)."""
        if not session_ids:
            return DeletedRows()
        async with self.connection("delete_sessions") as conn, conn.transaction():
            return await delete_sessions(conn, session_ids)

    async def list_children(self, parent_id: str) -> list[SessionRecord]:
        """Children oldest first."""
        async with self.connection("list_children") as conn:
            cur = await conn.execute(
                "SELECT session_id, record FROM repertory.sessions WHERE parent_id = %s ORDER BY ord",
                (parent_id,),
            )
            rows = await cur.fetchall()
        return _sessions(rows)

    async def list_sessions(self, *, roots_only: bool = False, limit: int | None = None) -> list[SessionRecord]:
        """Sessions oldest first, optionally only roots, capped."""
        sql = "SELECT session_id, record FROM repertory.sessions" + (" WHERE parent_id IS NULL" if roots_only else "")
        sql += " ORDER BY ord LIMIT %s"
        async with self.connection("list_sessions") as conn:
            cur = await conn.execute(sql, (limit,))
            rows = await cur.fetchall()
        return _sessions(rows)

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
        """Newest first from the ``ord`` before ``before``'s (a backward scan of its index, no offset)."""
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
        async with self.connection("page_sessions") as conn:
            cur = await conn.execute(sql, params)
            rows = await cur.fetchall()
        return _sessions(rows)

    async def session_counts(self, *, owner: str | None = None) -> dict[SessionStatus, int]:
        """Running, suspended and error counts from the open-turn and resting-run partial indexes (of ``owner``'s)."""
        async with self.connection("session_counts") as conn:
            sql, params = session_counts_query(_DIALECT, owner)
            cur = await conn.execute(sql, params)
            row = await cur.fetchone()
        assert row is not None
        return {"running": int(row[0]), "suspended": int(row[1]), "error": int(row[2])}

    async def add_turn(self, turn: TurnRecord, *, events: Sequence[SessionEvent] = ()) -> TurnRecord:
        """Queue a turn with the next per-session seq (racing adders serialise on the session row), with ``events``."""
        return (await self.accept_turn(turn, events=events)).turn

    async def accept_turn(self, turn: TurnRecord, *, events: Sequence[SessionEvent] = ()) -> AcceptedTurn:
        """``add_turn`` in one round trip (``repertory_accept_turn``), the session's thread row coming back with it.

        Events of another session (which ``add_turn`` allows, as ``append_events`` does) take the
        statements one by one, in one transaction.
        """
        sid = turn.session_id
        if any(e.session_id != sid for e in events):
            return await self._accept_apart(turn, events)
        record = turn.model_dump_json()
        # The first ``"seq":`` is the top-level field: the only fields before it are two JSON strings,
        # in which a quote is always escaped.
        found = _SEQ_FIELD.search(record)
        if found is None:
            raise StoreError(f"turn {turn.submission_id!r}: its record has no seq field")
        head, tail = record[: found.start() + len('"seq":')], record[found.end() :]
        async with self.connection("add_turn") as conn:
            cur = await conn.execute(
                ACCEPT_TURN_SQL, (turn.submission_id, sid, turn.status, head, tail, *event_arrays(events, sid))
            )
            row = await cur.fetchone()
        assert row is not None
        seq, at, created_at, updated_at = row
        thread = (
            None
            if created_at is None
            else ThreadState(thread_id=sid, history_revision_id=at, created_at=created_at, updated_at=updated_at)
        )
        return AcceptedTurn(turn.model_copy(update={"seq": int(seq)}), thread)

    async def _accept_apart(self, turn: TurnRecord, events: Sequence[SessionEvent]) -> AcceptedTurn:
        async with self.connection("add_turn") as conn, conn.transaction():
            await _insert_events(conn, events)
            await conn.execute("SELECT 1 FROM repertory.sessions WHERE session_id = %s FOR UPDATE", (turn.session_id,))
            cur = await conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM repertory.turns WHERE session_id = %s", (turn.session_id,)
            )
            row = await cur.fetchone()
            stored = turn.model_copy(update={"seq": int(row[0] if row else 0) + 1})
            await conn.execute(
                "INSERT INTO repertory.turns (submission_id, session_id, seq, status, record) "
                "VALUES (%s, %s, %s, %s, %s)",
                (stored.submission_id, stored.session_id, stored.seq, stored.status, stored.model_dump_json()),
            )
            cur = await conn.execute(
                "SELECT head, created_at, updated_at FROM repertory.threads WHERE thread_id = %s", (turn.session_id,)
            )
            found = await cur.fetchone()
        thread = (
            None
            if found is None
            else ThreadState(
                thread_id=turn.session_id, history_revision_id=found[0], created_at=found[1], updated_at=found[2]
            )
        )
        return AcceptedTurn(stored, thread)

    async def update_turn(self, turn: TurnRecord, *, events: Sequence[SessionEvent] = ()) -> None:
        """Rewrite the turn's status, error and times (it must exist), with ``events``, in one transaction."""
        async with self.connection("update_turn") as conn, conn.transaction():
            await write_turn(conn, turn)
            if events:
                await _insert_events(conn, events)

    async def load_turn(self, submission_id: str) -> TurnRecord | None:
        """A copy of the turn."""
        async with self.connection("load_turn") as conn:
            cur = await conn.execute("SELECT record FROM repertory.turns WHERE submission_id = %s", (submission_id,))
            row = await cur.fetchone()
        return None if row is None else read_record(TurnRecord, row[0], what="turn", row_id=submission_id)

    async def list_turns(self, session_id: str, statuses: Sequence[TurnStatus] | None = None) -> list[TurnRecord]:
        """Turns in queue order; with ``statuses``, only those."""
        async with self.connection("list_turns") as conn:
            if statuses is None:
                cur = await conn.execute(
                    "SELECT submission_id, record FROM repertory.turns WHERE session_id = %s ORDER BY seq",
                    (session_id,),
                )
            else:
                cur = await conn.execute(
                    "SELECT submission_id, record FROM repertory.turns WHERE session_id = %s AND status = ANY(%s) "
                    "ORDER BY seq",
                    (session_id, list(statuses)),
                )
            rows = await cur.fetchall()
        return _turns(rows)

    async def list_open_turns(self) -> list[TurnRecord]:
        """Queued and running turns of every session (uses the partial index)."""
        async with self.connection("list_open_turns") as conn:
            cur = await conn.execute(
                "SELECT submission_id, record FROM repertory.turns WHERE status = ANY(%s) ORDER BY session_id, seq",
                (list(OPEN_TURN_STATUSES),),
            )
            rows = await cur.fetchall()
        return _turns(rows)

    async def append_events(self, events: Sequence[SessionEvent]) -> None:
        """Append gap-free events in one transaction (a repeated seq is ``CommitConflict``)."""
        if not events:
            return
        async with self.connection("append_events") as conn, conn.transaction():
            await _insert_events(conn, events)

    async def load_events(self, session_id: str, after_seq: int = 0, limit: int | None = None) -> list[SessionEvent]:
        """Stored events after ``after_seq``."""
        async with self.connection("load_events") as conn:
            cur = await conn.execute(
                "SELECT session_id, seq, submission_id, type, at, data FROM repertory.events "
                "WHERE session_id = %s AND seq > %s ORDER BY seq LIMIT %s",
                (session_id, after_seq, limit),
            )
            rows = await cur.fetchall()
        return [_event(r) for r in rows]

    async def last_event_seq(self, session_id: str) -> int:
        """Highest stored seq, 0 when none."""
        async with self.connection("last_event_seq") as conn:
            cur = await conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM repertory.events WHERE session_id = %s", (session_id,)
            )
            row = await cur.fetchone()
        return int(row[0] if row else 0)
