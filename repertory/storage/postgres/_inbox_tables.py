"""The decision inbox (``repertory.core.inbox``) of ``PostgresSessionStore`` (schema version 12).

A compare-and-set (a claim, a settlement) reads its row ``FOR UPDATE`` on its condition and
rewrites it in the same transaction: PostgreSQL re-checks the condition once a racing writer
commits, so of several racing claims exactly one finds the row. Read, then rewrite, rather than
``jsonb_set`` in one statement: jsonb refuses the NUL character a decision's value may hold. The
pending query walks the partial index ``decision_requests_pending`` with a ``LIMIT``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from repertory.core.inbox import DecisionOutcome, DecisionRequest, DecisionRequestStatus
from repertory.storage.decision_rows import UNREADABLE_STATUS, check_settled_status, read_request
from repertory.storage.postgres.connection import PgBase
from repertory.storage.readback import sort_records

__all__ = ["PENDING_SQL", "PgInboxTables"]

PENDING_SQL = (
    "SELECT request_id, record FROM repertory.decision_requests WHERE status = 'pending' AND claimed_until <= %s "
    "ORDER BY created_at, ord LIMIT %s"
)
"""The pending query, whose ``WHERE`` and ``ORDER BY`` match the ``decision_requests_pending`` index."""


class PgInboxTables(PgBase):
    """Decision requests and host beats."""

    async def _inbox_rows(self, action: str, sql: str, params: Sequence[Any]) -> list[Any]:
        async with self.connection(action) as conn:
            cur = await conn.execute(sql, params)
            return list(await cur.fetchall())

    async def _inbox_write(self, action: str, sql: str, params: Sequence[Any]) -> None:
        async with self.connection(action) as conn:
            await conn.execute(sql, params)

    # -- decision requests --------------------------------------------------------------------------

    async def add_decision_request(self, request: DecisionRequest) -> None:
        """Insert; a known id conflicts (the primary key)."""
        await self._inbox_write(
            "add_decision_request",
            "INSERT INTO repertory.decision_requests "
            "(request_id, session_id, status, claims, claimed_until, created_at, record) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (
                request.request_id,
                request.session_id,
                request.status,
                request.claims,
                request.claimed_until,
                request.created_at,
                request.model_dump_json(),
            ),
        )

    async def load_decision_request(self, request_id: str) -> DecisionRequest | None:
        """A copy, or ``None``; ``RecordUnreadable`` for a row that cannot be read back."""
        rows = await self._inbox_rows(
            "load_decision_request",
            "SELECT record FROM repertory.decision_requests WHERE request_id = %s",
            (request_id,),
        )
        return read_request(rows[0][0], request_id) if rows else None

    async def pending_decision_requests(self, now: int, limit: int) -> list[DecisionRequest]:
        """Pending requests whose claim ended by ``now``, oldest first (``created_at``, then insertion order).

        A row that cannot be read back is skipped, logged and taken off the pending index
        (``UNREADABLE_STATUS`` in its column; its text stays): left there, such rows would come
        first in every bounded query and crowd the others out. The query then runs again, so
        the answer holds ``limit`` readable requests when there are that many.
        """
        bound = max(limit, 0)
        while True:
            rows = await self._inbox_rows("pending_decision_requests", PENDING_SQL, (now, bound))
            found, unreadable = sort_records(DecisionRequest, rows, what="decision request")
            if not unreadable:
                return found
            await self._inbox_write(
                "pending_decision_requests",
                "UPDATE repertory.decision_requests SET status = %s WHERE request_id = ANY(%s) AND status = 'pending'",
                (UNREADABLE_STATUS, unreadable),
            )

    async def claim_decision_request(self, request_id: str, claims: int, until: int) -> bool:
        """Compare-and-set on (pending, ``claims``) under the row's lock: one claim more, held until ``until``."""
        async with self.connection("claim_decision_request") as conn, conn.transaction():
            cur = await conn.execute(
                "SELECT record FROM repertory.decision_requests "
                "WHERE request_id = %s AND status = 'pending' AND claims = %s FOR UPDATE",
                (request_id, claims),
            )
            row = await cur.fetchone()
            if row is None:
                return False
            taken = read_request(row[0], request_id).model_copy(update={"claims": claims + 1, "claimed_until": until})
            await conn.execute(
                "UPDATE repertory.decision_requests SET claims = %s, claimed_until = %s, record = %s "
                "WHERE request_id = %s",
                (taken.claims, until, taken.model_dump_json(), request_id),
            )
            return True

    async def settle_decision_request(
        self, request_id: str, status: DecisionRequestStatus, outcome: DecisionOutcome, settled_at: int
    ) -> bool:
        """Record how a pending request ended, under the row's lock; ``False`` when unknown or settled already."""
        check_settled_status(status)
        async with self.connection("settle_decision_request") as conn, conn.transaction():
            cur = await conn.execute(
                "SELECT record FROM repertory.decision_requests "
                "WHERE request_id = %s AND status = 'pending' FOR UPDATE",
                (request_id,),
            )
            row = await cur.fetchone()
            if row is None:
                return False
            done = read_request(row[0], request_id).model_copy(
                update={"status": status, "outcome": outcome, "settled_at": settled_at}
            )
            await conn.execute(
                "UPDATE repertory.decision_requests SET status = %s, record = %s WHERE request_id = %s",
                (status, done.model_dump_json(), request_id),
            )
            return True

    # -- host beats ---------------------------------------------------------------------------------

    async def beat_host(self, host_id: str, seen_at: int) -> None:
        """Insert or update the host's beat."""
        await self._inbox_write(
            "beat_host",
            "INSERT INTO repertory.host_beats (host_id, seen_at) VALUES (%s, %s) "
            "ON CONFLICT (host_id) DO UPDATE SET seen_at = excluded.seen_at",
            (host_id, seen_at),
        )

    async def live_hosts(self, since: int) -> list[str]:
        """The hosts whose last beat is at or after ``since``, by id (byte order, as the other stores sort)."""
        rows = await self._inbox_rows(
            "live_hosts",
            'SELECT host_id FROM repertory.host_beats WHERE seen_at >= %s ORDER BY host_id COLLATE "C"',
            (since,),
        )
        return [str(r[0]) for r in rows]

    async def forget_host(self, host_id: str) -> None:
        """Remove the host's beat (nothing if it has none)."""
        await self._inbox_write("forget_host", "DELETE FROM repertory.host_beats WHERE host_id = %s", (host_id,))
