"""``delete_sessions`` on SQLite: one write transaction (``BEGIN IMMEDIATE`` holds every other writer off).

Which history stays follows ``repertory.storage.history_gc`` (where a message is kept:
``_history``): one recursive walk up from the deleted heads and the deleted threads' pins (by
primary key), then the writers of what it reached (thread rows, by primary key) and the pins on
it (``history_pins``, by primary key). Id lists travel as one JSON array parameter each
(``json_each``), so a tree of any size is one statement per table, never one per row nor a list
of placeholders past SQLite's limit.

A deletion that takes a table's newest rows lowers its largest rowid, and SQLite numbers the next
row from there: for the tables an export scans by rowid, the rowid each fell back to is recorded
in ``rowid_fallbacks`` (schema version 8), so an export resumes below it. Two reads of a table's
largest rowid each (the end of its rowid index) and a row only when it did fall back.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from repertory.core.budget import tree_scope
from repertory.core.store import DeletedRows
from repertory.storage.history_gc import collectable
from repertory.storage.sqlite._tree_tables import INSERT_PIN
from repertory.storage.sqlite.schema import ROWID_SCANNED, ROWID_TOPS

__all__ = ["delete_sessions"]

_IDS = "(SELECT value FROM json_each(?))"


# UNION, not UNION ALL: deleted threads that share a prefix walk it once.
_REACHED = """
WITH RECURSIVE reached(id) AS (
    SELECT value FROM json_each(?)
    UNION
    SELECT r.parent_id FROM history_revisions AS r JOIN reached ON r.id = reached.id WHERE r.parent_id IS NOT NULL
)
SELECT h.id, h.parent_id, h.entry_id, h.thread_id, h.message IS NOT NULL, h.rowid
FROM history_revisions AS h JOIN reached ON h.id = reached.id
"""


def _count(conn: sqlite3.Connection, sql: str, *params: object) -> int:
    return conn.execute(sql, params).rowcount


def delete_sessions(conn: sqlite3.Connection, session_ids: Sequence[str]) -> DeletedRows:
    """Delete inside the caller's transaction; see ``TreeStore.delete_sessions``."""
    wanted = json.dumps(list(dict.fromkeys(session_ids)))
    gone = [r[0] for r in conn.execute(f"SELECT session_id FROM sessions WHERE session_id IN {_IDS}", (wanted,))]
    if not gone:
        return DeletedRows()
    ids = json.dumps(gone)
    tops = conn.execute(ROWID_TOPS).fetchone()
    # From the heads and from whatever the threads pinned: a head they left (``commit_pins``) goes
    # with them, and a remaining thread's pin on it is seen.
    starts = [
        r[0]
        for r in conn.execute(
            f"SELECT head FROM threads WHERE thread_id IN {_IDS} AND head IS NOT NULL "
            f"UNION SELECT revision_id FROM history_pins WHERE thread_id IN {_IDS}",
            (ids, ids),
        )
    ]
    rows = conn.execute(_REACHED, (json.dumps(starts),)).fetchall()
    reached = {row[0]: (row[1], row[2]) for row in rows}
    writers = sorted({row[3] for row in rows if row[3] is not None})
    alive = {
        r[0]
        for r in conn.execute(
            f"SELECT thread_id FROM threads WHERE thread_id IN {_IDS} AND thread_id NOT IN {_IDS}",
            (json.dumps(writers), ids),
        )
    }
    pins = conn.execute(
        f"SELECT revision_id, thread_id FROM history_pins WHERE revision_id IN {_IDS} AND thread_id NOT IN {_IDS}",
        (json.dumps(list(reached)), ids),
    ).fetchall()
    # A revision with no writer predates the bookkeeping: nobody knows who needs it, so it stays.
    seeds: list[tuple[str, str | None]] = [(row[0], row[3]) for row in rows if row[3] is None or row[3] in alive]
    seeds += [(revision, thread) for revision, thread in pins]
    writer_of = {row[0]: row[3] for row in rows}
    plan = collectable(reached, seeds, writer_of.__getitem__, alive.__contains__)
    # A message lives with its revision (``_history``) or, once a second revision named its
    # entry, in ``history_entry_rows``: that row goes only when a collected revision relied on it
    # (one without its own message) and it is not marked shared. A kept copy of a collected
    # revision's message is no longer a copy (an export then writes it).
    doomed = set(plan.revisions)
    # An entry a compaction added again goes with the last revision naming it (its namers).
    candidates = json.dumps(sorted(plan.entries))
    named = {
        r[0]: bool(r[1])
        for r in conn.execute(
            f"SELECT entry_id, max(revision_id NOT IN {_IDS}) FROM history_entry_namers "
            f"WHERE entry_id IN {_IDS} GROUP BY entry_id",
            (json.dumps(plan.revisions), candidates),
        )
    }
    deletable = {e for e in plan.entries if not named.get(e, False)}
    relied = {row[2] for row in rows if row[0] in doomed and not row[4]} | set(named)
    inline = {row[2] for row in rows if row[0] in doomed and row[4]} & deletable
    held_rows: set[str] = set()
    if inline:
        held_rows = {
            r[0]
            for r in conn.execute(
                f"SELECT id FROM history_entry_rows WHERE id IN {_IDS}", (json.dumps(sorted(inline)),)
            )
        }
    gone_rowids = [row[5] for row in rows if row[0] in doomed and row[4]]
    if gone_rowids:
        conn.execute(
            f"UPDATE history_entry_rows SET copy_of = NULL WHERE copy_of IN {_IDS}", (json.dumps(gone_rowids),)
        )
    revisions = _count(conn, f"DELETE FROM history_revisions WHERE id IN {_IDS}", json.dumps(plan.revisions))
    entries = len(inline - held_rows) + _count(
        conn,
        f"DELETE FROM history_entry_rows WHERE id IN {_IDS} "
        "AND id NOT IN (SELECT entry_id FROM history_shared_entries)",
        json.dumps(sorted(deletable & relied)),
    )
    conn.execute(f"DELETE FROM history_entry_namers WHERE revision_id IN {_IDS}", (json.dumps(plan.revisions),))
    conn.execute(f"DELETE FROM history_pins WHERE thread_id IN {_IDS}", (ids,))
    # What was kept for a remaining thread is recorded where later walks see it (``Collectable``).
    if plan.writers:
        conn.executemany(
            "UPDATE history_revisions SET thread_id = ? WHERE id = ?", [(t, r) for r, t in plan.writers.items()]
        )
    if plan.pins:
        conn.executemany(INSERT_PIN, plan.pins)
    counts = {
        "runs": _count(conn, f"DELETE FROM runs WHERE thread_id IN {_IDS}", ids),
        "turns": _count(conn, f"DELETE FROM turns WHERE session_id IN {_IDS}", ids),
        "events": _count(conn, f"DELETE FROM events WHERE session_id IN {_IDS}", ids),
        "memory_records": _count(conn, f"DELETE FROM memory_messages WHERE thread_id IN {_IDS}", ids),
        "timers": _count(conn, f"DELETE FROM timers WHERE session_id IN {_IDS}", ids),
        "schedules": _count(conn, f"DELETE FROM schedules WHERE session_id IN {_IDS}", ids),
    }
    conn.execute(f"DELETE FROM decision_requests WHERE session_id IN {_IDS}", (ids,))  # not counted
    # A deleted root's tree ledger goes with it (``core.budget``; not counted): an owner's stays.
    conn.execute(f"DELETE FROM ledgers WHERE scope IN {_IDS}", (json.dumps([tree_scope(s) for s in gone]),))
    conn.execute(f"DELETE FROM threads WHERE thread_id IN {_IDS}", (ids,))
    sessions = _count(conn, f"DELETE FROM sessions WHERE session_id IN {_IDS}", ids)
    fell = [
        (t, after)
        for t, before, after in zip(ROWID_SCANNED, tops, conn.execute(ROWID_TOPS).fetchone(), strict=True)
        if after < before
    ]
    if fell:
        conn.executemany("INSERT INTO rowid_fallbacks (tbl, fell_to) VALUES (?, ?)", fell)
    return DeletedRows(sessions=sessions, revisions=revisions, entries=entries, **counts)
