"""The decision inbox (``repertory.core.inbox``) of ``InMemorySessionStore``: decision requests and host beats.

The conformance reference, not a fast path: the pending query reads every request, where the
database stores walk an index. A request is kept as its session id beside its JSON text, as the
database stores keep the session in a column of its own: deleting a session then removes its
requests even when one cannot be read back. Tables are created on first use, which keeps the
store's constructor untouched.
"""

from __future__ import annotations

from repertory.core.inbox import DecisionOutcome, DecisionRequest, DecisionRequestStatus
from repertory.errors import CommitConflict, StoreError
from repertory.storage.decision_rows import check_settled_status, read_request
from repertory.storage.readback import read_records

__all__ = ["MemoryInboxTables"]


class _Tables:
    def __init__(self) -> None:
        self.requests: dict[str, tuple[str, str]] = {}  # request_id -> (session_id, DecisionRequest JSON)
        self.beats: dict[str, int] = {}  # host_id -> seen_at


class MemoryInboxTables:
    """Mixin: the decision inbox of the in-memory store."""

    _closed: bool

    def _inbox(self) -> _Tables:
        if self._closed:
            raise StoreError("store is closed")
        tables: _Tables | None = getattr(self, "_inbox_tables", None)
        if tables is None:
            tables = _Tables()
            self._inbox_tables = tables
        return tables

    def _forget_decisions(self, doomed: set[str]) -> None:
        """Drop the decision requests of deleted sessions (``delete_sessions``; ``DeletedRows`` does not count them)."""
        tables: _Tables | None = getattr(self, "_inbox_tables", None)
        if tables is None:
            return
        for rid in [rid for rid, (session_id, _) in tables.requests.items() if session_id in doomed]:
            del tables.requests[rid]

    def _replace_request(self, request_id: str, raw: str) -> None:
        """New text for a request, same session (``InMemorySessionStore.replace_record``); ``KeyError`` if unknown."""
        requests = self._inbox().requests
        session_id, _ = requests[request_id]
        requests[request_id] = (session_id, raw)

    # -- decision requests --------------------------------------------------------------------------

    async def add_decision_request(self, request: DecisionRequest) -> None:
        """Insert; a known id conflicts."""
        requests = self._inbox().requests
        if request.request_id in requests:
            raise CommitConflict(f"decision request {request.request_id!r} already exists")
        requests[request.request_id] = (request.session_id, request.model_dump_json())

    async def load_decision_request(self, request_id: str) -> DecisionRequest | None:
        """A copy, or ``None``; ``RecordUnreadable`` for a row that cannot be read back."""
        row = self._inbox().requests.get(request_id)
        return None if row is None else read_request(row[1], request_id)

    async def pending_decision_requests(self, now: int, limit: int) -> list[DecisionRequest]:
        """Pending requests whose claim ended by ``now``, oldest first (``created_at``, then insertion order).

        A row that cannot be read back is skipped and logged (``repertory.storage.readback``).
        """
        rows = ((rid, raw) for rid, (_, raw) in self._inbox().requests.items())
        found = read_records(DecisionRequest, rows, what="decision request")
        due = [r for r in found if r.status == "pending" and r.claimed_until <= now]
        due.sort(key=lambda r: r.created_at)  # stable: insertion order among equals
        return due[: max(limit, 0)]

    async def claim_decision_request(self, request_id: str, claims: int, until: int) -> bool:
        """Compare-and-set on (pending, ``claims``): one claim more, held until ``until``."""
        requests = self._inbox().requests
        row = requests.get(request_id)
        if row is None:
            return False
        request = read_request(row[1], request_id)
        if request.status != "pending" or request.claims != claims:
            return False
        taken = request.model_copy(update={"claims": claims + 1, "claimed_until": until})
        requests[request_id] = (row[0], taken.model_dump_json())
        return True

    async def settle_decision_request(
        self, request_id: str, status: DecisionRequestStatus, outcome: DecisionOutcome, settled_at: int
    ) -> bool:
        """Record how a pending request ended; ``False`` when it is unknown or settled already."""
        check_settled_status(status)
        requests = self._inbox().requests
        row = requests.get(request_id)
        if row is None:
            return False
        request = read_request(row[1], request_id)
        if request.status != "pending":
            return False
        done = request.model_copy(update={"status": status, "outcome": outcome, "settled_at": settled_at})
        requests[request_id] = (row[0], done.model_dump_json())
        return True

    # -- host beats ---------------------------------------------------------------------------------

    async def beat_host(self, host_id: str, seen_at: int) -> None:
        """Insert or update the host's beat."""
        self._inbox().beats[host_id] = seen_at

    async def live_hosts(self, since: int) -> list[str]:
        """The hosts whose last beat is at or after ``since``, by id."""
        return sorted(h for h, seen_at in self._inbox().beats.items() if seen_at >= since)

    async def forget_host(self, host_id: str) -> None:
        """Remove the host's beat (nothing if it has none)."""
        self._inbox().beats.pop(host_id, None)
