"""``delete_sessions`` on PostgreSQL: one transaction, serialised against every writer of thread heads.

Which history stays follows ``repertory.storage.history_gc``: one recursive walk up from the
deleted heads and the deleted threads' pins (by primary key), the writers of what it reached and
the pins on it (by primary key). The transaction first takes ``threads`` in ``EXCLUSIVE`` mode:
plain reads go on, but commits (which lock their thread row) and session creations (which insert
one) wait until it ends. Every way a thread comes to stand on a revision (a commit, a fork)
writes that table, so no commit or fork can start using a revision between the moment this
transaction decides it is unused and the moment it is gone. Deletions are rare and short (the
size of the deleted lineages), so the wait is too. Id lists travel as arrays (``= ANY(%s)``): one statement per
table, whatever the tree's size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from repertory.core.budget import tree_scope
from repertory.core.store import DeletedRows
from repertory.storage.history_gc import collectable

__all__ = ["delete_sessions"]

_REACHED = """
WITH RECURSIVE reached(id) AS (
    SELECT unnest(%s::text[])
    UNION
    SELECT r.parent_id FROM repertory.history_revisions AS r JOIN reached ON r.id = reached.id
    WHERE r.parent_id IS NOT NULL
)
SELECT h.id, h.parent_id, h.entry_id, h.thread_id
FROM repertory.history_revisions AS h JOIN reached ON h.id = reached.id
"""


async def _rows(conn: psycopg.AsyncConnection[Any], sql: str, *params: object) -> list[tuple[Any, ...]]:
    cur = await conn.execute(sql, params)
    return list(await cur.fetchall())


async def _count(conn: psycopg.AsyncConnection[Any], sql: str, *params: object) -> int:
    cur = await conn.execute(sql, params)
    return max(cur.rowcount, 0)


async def delete_sessions(conn: psycopg.AsyncConnection[Any], session_ids: Sequence[str]) -> DeletedRows:
    """Delete inside the caller's transaction; see ``TreeStore.delete_sessions``."""
    await conn.execute("LOCK TABLE repertory.threads IN EXCLUSIVE MODE")
    wanted = list(dict.fromkeys(session_ids))
    found = await _rows(conn, "SELECT session_id FROM repertory.sessions WHERE session_id = ANY(%s)", wanted)
    gone = [r[0] for r in found]
    if not gone:
        return DeletedRows()
    # From the heads and from whatever the threads pinned: a head they left (``commit_pins``) goes
    # with them, and a remaining thread's pin on it is seen.
    starts = await _rows(
        conn,
        "SELECT head FROM repertory.threads WHERE thread_id = ANY(%s) AND head IS NOT NULL "
        "UNION SELECT revision_id FROM repertory.history_pins WHERE thread_id = ANY(%s)",
        gone,
        gone,
    )
    rows = await _rows(conn, _REACHED, [r[0] for r in starts])
    reached = {row[0]: (row[1], row[2]) for row in rows}
    writers = sorted({row[3] for row in rows if row[3] is not None})
    alive_rows = await _rows(
        conn,
        "SELECT thread_id FROM repertory.threads WHERE thread_id = ANY(%s) AND NOT thread_id = ANY(%s)",
        writers,
        gone,
    )
    pins = await _rows(
        conn,
        "SELECT revision_id, thread_id FROM repertory.history_pins "
        "WHERE revision_id = ANY(%s) AND NOT thread_id = ANY(%s)",
        list(reached),
        gone,
    )
    alive = {r[0] for r in alive_rows}
    # A revision with no writer predates the bookkeeping: nobody knows who needs it, so it stays.
    seeds: list[tuple[str, str | None]] = [(row[0], row[3]) for row in rows if row[3] is None or row[3] in alive]
    seeds += [(revision, thread) for revision, thread in pins]
    writer_of = {row[0]: row[3] for row in rows}
    plan = collectable(reached, seeds, writer_of.__getitem__, alive.__contains__)
    revisions = await _count(conn, "DELETE FROM repertory.history_revisions WHERE id = ANY(%s)", plan.revisions)
    # An entry a compaction added again goes with the last revision naming it (its namers).
    entries = await _count(
        conn,
        "DELETE FROM repertory.history_entries AS e WHERE e.id = ANY(%s) "
        "AND NOT EXISTS (SELECT 1 FROM repertory.history_shared_entries AS s WHERE s.entry_id = e.id) "
        "AND NOT EXISTS (SELECT 1 FROM repertory.history_entry_namers AS n "
        "WHERE n.entry_id = e.id AND NOT n.revision_id = ANY(%s))",
        sorted(plan.entries),
        plan.revisions,
    )
    await conn.execute("DELETE FROM repertory.history_entry_namers WHERE revision_id = ANY(%s)", (plan.revisions,))
    await conn.execute("DELETE FROM repertory.history_pins WHERE thread_id = ANY(%s)", (gone,))
    # What was kept for a remaining thread is recorded where later walks see it (``Collectable``).
    if plan.writers:
        await conn.execute(
            "UPDATE repertory.history_revisions AS h SET thread_id = w.thread_id "
            "FROM unnest(%s::text[], %s::text[]) AS w(id, thread_id) WHERE h.id = w.id",
            (list(plan.writers), list(plan.writers.values())),
        )
    if plan.pins:
        await conn.execute(
            "INSERT INTO repertory.history_pins (revision_id, thread_id) "
            "SELECT * FROM unnest(%s::text[], %s::text[]) ON CONFLICT DO NOTHING",
            ([r for r, _ in plan.pins], [t for _, t in plan.pins]),
        )
    counts = {
        "runs": await _count(conn, "DELETE FROM repertory.runs WHERE thread_id = ANY(%s)", gone),
        "turns": await _count(conn, "DELETE FROM repertory.turns WHERE session_id = ANY(%s)", gone),
        "events": await _count(conn, "DELETE FROM repertory.events WHERE session_id = ANY(%s)", gone),
        "memory_records": await _count(conn, "DELETE FROM repertory.memory_messages WHERE thread_id = ANY(%s)", gone),
        "timers": await _count(conn, "DELETE FROM repertory.timers WHERE session_id = ANY(%s)", gone),
        "schedules": await _count(conn, "DELETE FROM repertory.schedules WHERE session_id = ANY(%s)", gone),
    }
    await conn.execute("DELETE FROM repertory.decision_requests WHERE session_id = ANY(%s)", (gone,))  # not counted
    # A deleted root's tree ledger goes with it (``core.budget``; not counted): an owner's stays.
    await conn.execute("DELETE FROM repertory.ledgers WHERE scope = ANY(%s)", ([tree_scope(s) for s in gone],))
    await conn.execute("DELETE FROM repertory.threads WHERE thread_id = ANY(%s)", (gone,))
    sessions = await _count(conn, "DELETE FROM repertory.sessions WHERE session_id = ANY(%s)", gone)
    return DeletedRows(sessions=sessions, revisions=revisions, entries=entries, **counts)
