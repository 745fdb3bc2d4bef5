"""``delete_sessions`` on PostgreSQL: one transaction, serialised against every writer of thread heads.

The transaction first takes ``threads`` in ``EXCLUSIVE`` mode: plain reads go on, but commits
(which lock their thread row) and session creations (which insert one) wait until it ends. Every
way a thread can come to stand on a revision goes through that table, so no commit or fork can
start using a revision between the moment this transaction decides it is unused and the moment
it is gone. Deletions are rare and short (the size of the deleted lineages), so the wait is too.
Id lists travel as arrays (``= ANY(%s)``): one statement per table, whatever the tree's size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

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
SELECT h.id, h.parent_id, h.entry_id FROM repertory.history_revisions AS h JOIN reached ON h.id = reached.id
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
    gone = [
        r[0] for r in await _rows(conn, "SELECT session_id FROM repertory.sessions WHERE session_id = ANY(%s)", wanted)
    ]
    if not gone:
        return DeletedRows()
    heads = [
        r[0]
        for r in await _rows(
            conn, "SELECT head FROM repertory.threads WHERE thread_id = ANY(%s) AND head IS NOT NULL", gone
        )
    ]
    reached = {row[0]: (row[1], row[2]) for row in await _rows(conn, _REACHED, heads)}
    ids = list(reached)
    seeds = [
        r[0]
        for r in await _rows(
            conn, "SELECT head FROM repertory.threads WHERE head = ANY(%s) AND NOT thread_id = ANY(%s)", ids, gone
        )
    ]
    seeds += [
        r[0]
        for r in await _rows(
            conn,
            "SELECT parent_id FROM repertory.history_revisions WHERE parent_id = ANY(%s) AND NOT id = ANY(%s)",
            ids,
            ids,
        )
    ]
    plan = collectable(reached, seeds)
    revisions = await _count(conn, "DELETE FROM repertory.history_revisions WHERE id = ANY(%s)", plan.revisions)
    entries = await _count(
        conn,
        "DELETE FROM repertory.history_entries AS e WHERE e.id = ANY(%s) "
        "AND NOT EXISTS (SELECT 1 FROM repertory.history_revisions AS r WHERE r.entry_id = e.id)",
        sorted(plan.entries),
    )
    counts = {
        "runs": await _count(conn, "DELETE FROM repertory.runs WHERE thread_id = ANY(%s)", gone),
        "turns": await _count(conn, "DELETE FROM repertory.turns WHERE session_id = ANY(%s)", gone),
        "events": await _count(conn, "DELETE FROM repertory.events WHERE session_id = ANY(%s)", gone),
        "memory_records": await _count(conn, "DELETE FROM repertory.memory_messages WHERE thread_id = ANY(%s)", gone),
    }
    await conn.execute("DELETE FROM repertory.threads WHERE thread_id = ANY(%s)", (gone,))
    sessions = await _count(conn, "DELETE FROM repertory.sessions WHERE session_id = ANY(%s)", gone)
    return DeletedRows(sessions=sessions, revisions=revisions, entries=entries, **counts)
