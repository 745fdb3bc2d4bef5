"""What every store's decision inbox (``repertory.core.inbox``) decides before it touches a row.

Reading a request back and refusing a settlement that would leave it pending are the same in the
three stores, so they live here once; a store adds only its statements.
"""

from __future__ import annotations

from repertory.core.inbox import DecisionRequest, DecisionRequestStatus
from repertory.storage.readback import read_record

__all__ = ["UNREADABLE_STATUS", "check_settled_status", "read_request"]

UNREADABLE_STATUS = "unreadable"
"""What a database store writes in a request's ``status`` column (never in its record) when the
record cannot be read back: the row leaves the pending index, so it cannot crowd the bounded
pending query, and stays in place for ``load_decision_request`` to report and ``delete_sessions``
to remove."""


def read_request(raw: str | bytes, request_id: str) -> DecisionRequest:
    """The stored request (``repertory.storage.readback``); ``RecordUnreadable`` when it cannot be read.

    Nothing is droppable: a request without its decision or its principal means nothing.
    """
    return read_record(DecisionRequest, raw, what="decision request", row_id=request_id)


def check_settled_status(status: DecisionRequestStatus) -> None:
    """``ValueError`` for ``pending``: settling is how a request stops being pending (``applied`` or ``refused``)."""
    if status == "pending":
        raise ValueError("a decision request is settled as 'applied' or 'refused', not 'pending'")
