"""Durable time: the rows behind timers, schedules and completion webhooks, and the ``TimeStore`` protocol.

A timer (a tool's ``repertory.sleep``), a schedule (``handle.schedule``) and a webhook delivery
(HTTP ``webhook``) are each a row with a due time, found through an index on it: a hundred
thousand armed timers cost rows, and each host runs one scheduler task that asks the store for
what is due, never a task per timer.

Every due row has ``due_at``, the next moment anyone should look at it. A host that takes a row
moves ``due_at`` forward with a compare-and-set (``claim_*``), which is a lease: of two runtimes
on one store only one takes the row, and if that one dies the lease runs out and another takes it.
Exactly-once does not rest on the lease alone: a timer wakes its run by redeeming the run's
single-use resume token, and a schedule's firing is a turn whose submission id is derived from
(schedule id, fire time), so a second attempt after a lease ran out finds the work done.
"""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from repertory.core.ids import Id, now_ms
from repertory.core.messages import ModelMessage
from repertory.core.store import TreeStore
from repertory.core.tree import NewSession, SessionRecord, TurnKind

__all__ = [
    "FIRING_PREFIX",
    "FIRING_WEBHOOK_LIKE",
    "FIRING_WEBHOOK_PREFIX",
    "FIRING_WEBHOOK_SUFFIX",
    "RESERVED_SESSION_PREFIXES",
    "FiringWebhook",
    "ScheduleRecord",
    "TimeStore",
    "TimedStore",
    "TimerRecord",
    "WebhookRecord",
    "WebhookStatus",
    "firing_session",
    "firing_submission_id",
    "firing_webhook_id",
    "is_firing_webhook",
    "is_own_firing_session",
    "is_reserved_session_id",
]

WebhookStatus = Literal["pending", "delivered", "failed"]


FIRING_PREFIX = "cron-"
"""How a firing's submission id, and a stateless firing's session id, start (``firing_submission_id``)."""

RESERVED_SESSION_PREFIXES: tuple[str, ...] = (FIRING_PREFIX,)
"""Session id prefixes only the server mints: a stateless cron's firing runs on ``cron-<schedule>-<ms>``.

A client that could create a session under such an id first would receive the firing's message
and reply (another tenant's cron), so faces that take a caller's session id refuse these
(``is_reserved_session_id``), and the firing itself checks that a session it finds under its id
is its own.
"""


def is_reserved_session_id(session_id: str) -> bool:
    """Whether ``session_id`` has a prefix only the server mints (``RESERVED_SESSION_PREFIXES``)."""
    return session_id.startswith(RESERVED_SESSION_PREFIXES)


def firing_submission_id(schedule_id: str, fire_at: int) -> str:
    """The submission id of a schedule's firing at ``fire_at``: the same in every process, so it runs once."""
    return f"{FIRING_PREFIX}{schedule_id}-{fire_at}"


FIRING_WEBHOOK_PREFIX, FIRING_WEBHOOK_SUFFIX = FIRING_PREFIX, "-webhook"
"""How every firing's delivery id starts and ends (``firing_webhook_id``), and no other delivery's does."""
FIRING_WEBHOOK_LIKE = f"{FIRING_WEBHOOK_PREFIX}%{FIRING_WEBHOOK_SUFFIX}"
"""The SQL ``LIKE`` pattern of a firing's delivery id (the prefix and suffix hold no wildcard)."""


def is_firing_webhook(delivery_id: str) -> bool:
    """Whether ``delivery_id`` is a schedule firing's (``firing_webhook_id``'s form)."""
    return delivery_id.startswith(FIRING_WEBHOOK_PREFIX) and delivery_id.endswith(FIRING_WEBHOOK_SUFFIX)


def firing_webhook_id(schedule_id: str, fire_at: int) -> str:
    """The delivery id of a firing's completion webhook: derived like its submission id, so it is written once."""
    return f"{firing_submission_id(schedule_id, fire_at)}{FIRING_WEBHOOK_SUFFIX}"


class FiringWebhook(BaseModel):
    """A completion webhook for every firing of a schedule (the HTTP server's cron ``webhook``).

    The host that fires the schedule writes each firing's ``WebhookRecord`` (``url``, ``metadata``
    copied as they are) after its turn is queued and before the schedule moves on, under
    ``firing_webhook_id``: a firing tried again after a crash writes it at most once. The HTTP
    server delivers it as it delivers a run's webhook.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    url: str
    metadata: dict[str, JsonValue] = Field(default_factory=dict)


def firing_session(schedule: ScheduleRecord, fire_at: int) -> NewSession:
    """The session a stateless schedule's firing at ``fire_at`` runs on: the firing's id, the schedule's owner.

    Its metadata names the schedule, which is how a second attempt of the firing (after a crash,
    or on another host) knows the session it finds under that id as its own
    (``is_own_firing_session``).
    """
    return NewSession(
        agent=schedule.agent,
        session_id=firing_submission_id(schedule.schedule_id, fire_at),
        metadata={"schedule_id": schedule.schedule_id},
        owner=schedule.owner,
    )


def is_own_firing_session(session: SessionRecord, schedule: ScheduleRecord) -> bool:
    """Whether ``session``, found under a firing's id, is one ``schedule`` made (``firing_session``).

    The same schedule in its metadata, the same owner and agent: a session someone else made under
    that id (another tenant who guessed it, before ids were reserved) is none of those, and a
    firing never sends into it. Only the schedule's own owner could forge the metadata, and would
    send into a session of their own.
    """
    return (
        session.metadata.get("schedule_id") == schedule.schedule_id
        and session.owner == schedule.owner
        and session.agent == schedule.agent
    )


class TimerRecord(BaseModel):
    """An armed timer: wake run ``run_id`` (of session ``session_id``) by redeeming ``token`` at ``wake_at``.

    One row per run (a run has one live token at a time); ``due_at`` starts at ``wake_at`` and a
    claim moves it to the end of the claimer's lease.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    run_id: Id
    session_id: Id
    token: str
    wake_at: int
    due_at: int


class ScheduleRecord(BaseModel):
    """A cron schedule: each fire time enqueues ``message`` as one turn of ``session_id``.

    ``next_at`` is the next fire time (epoch ms; ``None`` once ``end_at`` has passed). With
    ``session_id=None`` each firing runs on a new session of ``agent`` whose id is derived from the
    firing (LangGraph's stateless crons). ``metadata`` is free-form JSON (the HTTP server keeps a
    cron's payload there). ``owner`` is who the sessions of a stateless schedule belong to (the
    HTTP server's tenancy: the owner of the key that made the cron); a session schedule's turns
    go to a session that has its own.
    """

    model_config = ConfigDict(extra="forbid")
    schedule_id: Id
    session_id: Id | None
    agent: str
    owner: str | None = None
    cron: str
    tz: str = "UTC"
    message: ModelMessage
    kind: TurnKind = "message"
    next_at: int | None
    end_at: int | None = None
    enabled: bool = True
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    webhook: FiringWebhook | None = None
    created_at: int = Field(default_factory=now_ms)
    updated_at: int = Field(default_factory=now_ms)


class WebhookRecord(BaseModel):
    """One promised POST of a run's final state to ``url`` when its turn comes to rest.

    ``status`` is ``pending`` until a 2xx answer (``delivered``) or the last retry (``failed``);
    ``attempts`` counts the POSTs tried and ``due_at`` is when the next may start (a claim's lease).
    """

    model_config = ConfigDict(extra="forbid")
    delivery_id: Id
    session_id: Id
    submission_id: str
    run_id: Id
    url: str
    status: WebhookStatus = "pending"
    attempts: int = 0
    due_at: int = 0
    last_error: str | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    created_at: int = Field(default_factory=now_ms)
    updated_at: int = Field(default_factory=now_ms)


@runtime_checkable
class TimeStore(Protocol):
    """The timer, schedule and webhook tables every built-in store keeps beside its sessions.

    ``repertory.testing.conformance.TimeConformance`` is the contract. Compare-and-set methods
    return whether this caller won; they never raise for losing.
    """

    # -- timers -------------------------------------------------------------------------------------

    async def arm_timer(self, timer: TimerRecord) -> None:
        """Insert or replace the run's timer (one per run)."""

    async def due_timers(self, now: int, limit: int) -> list[TimerRecord]:
        """Timers with ``due_at <= now``, earliest first, at most ``limit``."""

    async def next_timer_due(self) -> int | None:
        """The smallest ``due_at`` of any timer, or ``None`` when none is armed."""

    async def claim_timer(self, run_id: str, token: str, due_at: int, until: int) -> bool:
        """Move the timer's ``due_at`` from ``due_at`` to ``until`` if it still holds ``token`` and ``due_at``."""

    async def delete_timer(self, run_id: str, token: str) -> None:
        """Remove the run's timer if it still holds ``token`` (a newer timer of the run stays)."""

    async def list_timers(self, session_id: str | None = None, limit: int | None = None) -> list[TimerRecord]:
        """Armed timers (of one session), earliest ``wake_at`` first."""

    # -- schedules ----------------------------------------------------------------------------------

    async def add_schedule(self, schedule: ScheduleRecord) -> None:
        """Insert a schedule; a known id is ``CommitConflict`` and nothing is written."""

    async def load_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        """A copy of the schedule, or ``None``."""

    async def list_schedules(self, session_id: str | None = None, *, owner: str | None = None) -> list[ScheduleRecord]:
        """Schedules (of one session, of one owner: ``None`` is no filter), oldest first.

        An owner's are read through an index on the owner, so one tenant's cron listing never
        reads another's rows.
        """

    async def count_schedules(self, owner: str | None) -> int:
        """How many schedules ``owner`` has (``None``: those of no owner), through an index on the owner.

        What the HTTP server's per-owner cron quota counts, so one tenant's count never reads
        another's rows.
        """

    async def update_schedule(self, schedule: ScheduleRecord) -> bool:
        """Rewrite a schedule's fields (its id stays); whether it existed."""

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Remove a schedule; whether it existed."""

    async def due_schedules(self, now: int, limit: int) -> list[ScheduleRecord]:
        """Enabled schedules with ``next_at <= now``, earliest first, at most ``limit``."""

    async def next_schedule_due(self) -> int | None:
        """The smallest ``next_at`` of any enabled schedule, or ``None``."""

    async def advance_schedule(self, schedule_id: str, next_at: int, to: int | None, updated_at: int) -> bool:
        """Move ``next_at`` from ``next_at`` to ``to`` (``None``: no more firings) if nobody moved it first."""

    # -- webhooks -----------------------------------------------------------------------------------

    async def add_webhook(self, webhook: WebhookRecord) -> None:
        """Insert a webhook delivery; a known id is ``CommitConflict``."""

    async def load_webhook(self, delivery_id: str) -> WebhookRecord | None:
        """A copy of the delivery, or ``None``."""

    async def list_webhooks(
        self, status: WebhookStatus | None = None, submission_id: str | None = None, *, firings: bool = False
    ) -> list[WebhookRecord]:
        """Deliveries (in one status, of one turn; ``firings``: only schedule firings'), oldest first.

        A firing's delivery id is ``firing_webhook_id``'s (``FIRING_WEBHOOK_PREFIX`` ...
        ``FIRING_WEBHOOK_SUFFIX``): what the HTTP server looks for, since another process wrote it.
        """

    async def claim_webhook(self, delivery_id: str, attempts: int, now: int, until: int) -> bool:
        """Take the next attempt: if it is ``pending`` with ``attempts`` tries and ``due_at <= now``, count one more
        and set ``due_at = until``."""

    async def finish_webhook(
        self, delivery_id: str, status: WebhookStatus, due_at: int, last_error: str | None, updated_at: int
    ) -> None:
        """Record an attempt's outcome: ``delivered``, ``failed``, or ``pending`` again from ``due_at``."""


@runtime_checkable
class TimedStore(TreeStore, TimeStore, Protocol):
    """A ``TreeStore`` that keeps time too: what a runtime with timers and schedules runs on (every built-in store)."""
