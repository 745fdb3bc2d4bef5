"""The decision inbox (``repertory.core.inbox``) of ``SqliteSessionStore``: decision requests and host beats.

Every write is a short statement, or a compare-and-set read-then-write inside one transaction,
through the store's writer (one writer serialises them, so of several racing claims exactly one
sees its row as it last read it). The pending query is a bounded walk of the partial index
``decision_requests_pending`` (schema version 12) and runs inline, like the due queries of the
time tables; so do single-row loads and the host listing, which holds a row per serving host.
"""

from __future__ import annotations

import sqlite3

from repertory.core.inbox import DecisionOutcome, DecisionRequest, DecisionRequestStatus
from repertory.errors import CommitConflict
from repertory.storage.decision_rows import UNREADABLE_STATUS, check_settled_status, read_request
from repertory.storage.readback import sort_records
from repertory.storage.sqlite.connection import SqliteBase, db_errors

__all__ = ["PENDING_SQL", "SqliteInboxTables"]

PENDING_SQL = (
    "SELECT request_id, record FROM decision_requests WHERE status = 'pending' AND claimed_until <= ? "
    "ORDER BY created_at, rowid LIMIT ?"
)
"""The pending query, whose ``WHERE`` and ``ORDER BY`` match the ``decision_requests_pending`` index."""


class SqliteInboxTables(SqliteBase):
    """Decision requests and host beats; connection plumbing comes from ``SqliteBase``."""

    # -- decision requests --------------------------------------------------------------------------

    async def add_decision_request(self, request: DecisionRequest) -> None:
        """Insert; a known id conflicts."""
        row = (
            request.request_id,
            request.session_id,
            request.status,
            request.claims,
            request.claimed_until,
            request.created_at,
            request.model_dump_json(),
        )

        def write(conn: sqlite3.Connection) -> None:
            if conn.execute("SELECT 1 FROM decision_requests WHERE request_id = ?", (request.request_id,)).fetchone():
                raise CommitConflict(f"decision request {request.request_id!r} already exists")
            conn.execute(
                "INSERT INTO decision_requests "
                "(request_id, session_id, status, claims, claimed_until, created_at, record) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                row,
            )

        await self._write("add_decision_request", write)

    async def load_decision_request(self, request_id: str) -> DecisionRequest | None:
        """A copy, or ``None``; ``RecordUnreadable`` for a row that cannot be read back."""
        self._check_open()
        with db_errors("load_decision_request"):
            row = self._writer.execute(
                "SELECT record FROM decision_requests WHERE request_id = ?", (request_id,)
            ).fetchone()
        return None if row is None else read_request(row[0], request_id)

    async def pending_decision_requests(self, now: int, limit: int) -> list[DecisionRequest]:
        """Pending requests whose claim ended by ``now``, oldest first (``created_at``, then insertion order).

        A row that cannot be read back is skipped, logged and taken off the pending index
        (``UNREADABLE_STATUS`` in its column; its text stays): left there, such rows would come
        first in every bounded query and crowd the others out. The query then runs again, so
        the answer holds ``limit`` readable requests when there are that many.
        """
        bound = max(limit, 0)
        while True:
            self._check_open()
            with db_errors("pending_decision_requests"):
                rows = self._writer.execute(PENDING_SQL, (now, bound)).fetchall()
            found, unreadable = sort_records(DecisionRequest, rows, what="decision request")
            if not unreadable:
                return found
            await self._take_off(unreadable)

    async def _take_off(self, request_ids: list[str]) -> None:
        """Move unreadable pending rows out of the pending index (the column only)."""
        params = [(UNREADABLE_STATUS, i) for i in request_ids]
        await self._write(
            "pending_decision_requests",
            lambda conn: conn.executemany(
                "UPDATE decision_requests SET status = ? WHERE request_id = ? AND status = 'pending'", params
            ),
        )

    async def claim_decision_request(self, request_id: str, claims: int, until: int) -> bool:
        """Compare-and-set on (pending, ``claims``): one claim more, held until ``until``."""

        def write(conn: sqlite3.Connection) -> bool:
            row = conn.execute(
                "SELECT record FROM decision_requests WHERE request_id = ? AND status = 'pending' AND claims = ?",
                (request_id, claims),
            ).fetchone()
            if row is None:
                return False
            taken = read_request(row[0], request_id).model_copy(update={"claims": claims + 1, "claimed_until": until})
            conn.execute(
                "UPDATE decision_requests SET claims = ?, claimed_until = ?, record = ? WHERE request_id = ?",
                (taken.claims, until, taken.model_dump_json(), request_id),
            )
            return True

        return await self._write("claim_decision_request", write)

    async def settle_decision_request(
        self, request_id: str, status: DecisionRequestStatus, outcome: DecisionOutcome, settled_at: int
    ) -> bool:
        """Record how a pending request ended; ``False`` when it is unknown or settled already."""
        check_settled_status(status)

        def write(conn: sqlite3.Connection) -> bool:
            row = conn.execute(
                "SELECT record FROM decision_requests WHERE request_id = ? AND status = 'pending'", (request_id,)
            ).fetchone()
            if row is None:
                return False
            done = read_request(row[0], request_id).model_copy(
                update={"status": status, "outcome": outcome, "settled_at": settled_at}
            )
            conn.execute(
                "UPDATE decision_requests SET status = ?, record = ? WHERE request_id = ?",
                (status, done.model_dump_json(), request_id),
            )
            return True

        return await self._write("settle_decision_request", write)

    # -- host beats ---------------------------------------------------------------------------------

    async def beat_host(self, host_id: str, seen_at: int) -> None:
        """Insert or update the host's beat."""
        await self._write(
            "beat_host",
            lambda conn: conn.execute(
                "INSERT INTO host_beats (host_id, seen_at) VALUES (?, ?) "
                "ON CONFLICT (host_id) DO UPDATE SET seen_at = excluded.seen_at",
                (host_id, seen_at),
            ),
            atomic=False,
        )

    async def live_hosts(self, since: int) -> list[str]:
        """The hosts whose last beat is at or after ``since``, by id."""
        self._check_open()
        with db_errors("live_hosts"):
            rows = self._writer.execute(
                "SELECT host_id FROM host_beats WHERE seen_at >= ? ORDER BY host_id", (since,)
            ).fetchall()
        return [str(r[0]) for r in rows]

    async def forget_host(self, host_id: str) -> None:
        """Remove the host's beat (nothing if it has none)."""
        sql = "DELETE FROM host_beats WHERE host_id = ?"
        await self._write("forget_host", lambda conn: conn.execute(sql, (host_id,)), atomic=False)
