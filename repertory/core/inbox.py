"""Decisions taken in one process for a session another process drives, and who is alive to apply them.

The local backend's rule is that one process drives a session and any other may only read: two
drivers would each hold the session's state in memory and the second commit would conflict. A
decision taken elsewhere (``repertory approvals approve`` beside a running ``repertory serve``)
therefore does not touch the session: it is written as a ``DecisionRequest`` row, and the process
that drives the session applies it through its own mailbox, exactly as a decision from its own
HTTP routes, then records the outcome on the row for the decider to read.

Who drives: every host that keeps time on a store (a serving process) beats a ``HostBeat`` row
every few seconds. A decider that finds a beat younger than ``HOST_ALIVE_MS`` leaves the request
to the hosts; one that finds none (nothing serves the store, or the server died) claims the
request itself and applies it through a runtime of its own, which then is the one driver. Claims
are compare-and-set leases, and a decision redeems a single-use token in the transaction that
records it, so however the request travels it is applied exactly once.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from repertory.core.decisions import Approve, Reject, Resume
from repertory.core.principal import Principal
from repertory.core.state import RunStatus

__all__ = [
    "HOST_ALIVE_MS",
    "HOST_BEAT_MS",
    "DecisionInbox",
    "DecisionOutcome",
    "DecisionRequest",
    "DecisionRequestStatus",
]

HOST_BEAT_MS = 2_000
"""How often a serving host writes its beat."""
HOST_ALIVE_MS = 10_000
"""A host whose last beat is younger than this is alive: it applies the requests of its sessions."""

DecisionRequestStatus = Literal["pending", "applied", "refused"]


class DecisionOutcome(BaseModel):
    """How a request ended: the run's status after the decision, or the error that refused it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    run_id: str | None = None
    status: RunStatus | None = None
    text: str | None = None
    error_type: str | None = None
    error: str | None = None


class DecisionRequest(BaseModel):
    """One decision waiting for the process that drives its session (or for its decider, if none does)."""

    model_config = ConfigDict(extra="forbid")
    request_id: str
    session_id: str
    decision: Annotated[Approve | Reject | Resume, Field(discriminator="kind")]
    principal: Principal
    created_at: int
    status: DecisionRequestStatus = "pending"
    claims: int = 0
    claimed_until: int = 0
    outcome: DecisionOutcome | None = None
    settled_at: int | None = None

    def public(self) -> dict[str, Any]:
        """The request without its token (what a log line or an error message may show)."""
        data = self.model_dump(mode="json", exclude={"decision"})
        data["decision"] = self.decision.kind
        return data


@runtime_checkable
class DecisionInbox(Protocol):
    """The rows of cross-process decisions and of host beats; every ``TreeStore`` of this package has them."""

    async def add_decision_request(self, request: DecisionRequest) -> None:
        """Write a new request; ``CommitConflict`` when its id is known."""
        ...

    async def load_decision_request(self, request_id: str) -> DecisionRequest | None:
        """A copy, or ``None``."""
        ...

    async def pending_decision_requests(self, now: int, limit: int) -> list[DecisionRequest]:
        """Pending requests whose claim (if any) ended by ``now``, oldest first, at most ``limit``."""
        ...

    async def claim_decision_request(self, request_id: str, claims: int, until: int) -> bool:
        """Compare-and-set: take a pending request last seen with ``claims`` claims, until ``until``."""
        ...

    async def settle_decision_request(
        self, request_id: str, status: DecisionRequestStatus, outcome: DecisionOutcome, settled_at: int
    ) -> bool:
        """Record how a pending request ended (``applied`` or ``refused``); False when unknown or settled already.

        ``ValueError`` for ``pending``: settling is how a request stops being pending.
        """
        ...

    async def beat_host(self, host_id: str, seen_at: int) -> None:
        """Record that ``host_id`` is alive at ``seen_at`` (insert or update)."""
        ...

    async def live_hosts(self, since: int) -> list[str]:
        """The hosts whose last beat is at or after ``since``, by id."""
        ...

    async def forget_host(self, host_id: str) -> None:
        """A host stopped cleanly: its beat is removed at once (a crashed one's simply ages out)."""
        ...
