"""``Schedule``: a cron schedule on a session, as a caller holds it (``handle.schedule``, ``rt.schedules``).

A schedule is a row (``repertory.core.timing.ScheduleRecord``); every host's scheduler fires the
schedules of the sessions it owns, each fire time as one durable turn whose submission id is
derived from (schedule id, fire time), so a firing runs at most once across restarts and
runtimes. Firings missed while nothing ran are caught up once, at the earliest missed fire time,
and the schedule then goes on from the first fire time after now. A handle here is a snapshot
(``next_at`` as read); ``refresh()`` reads the row again.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import EllipsisType
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from repertory.core.ids import new_id
from repertory.core.messages import ModelMessage
from repertory.core.principal import Message, Principal, to_model_message
from repertory.core.timing import FiringWebhook, ScheduleRecord, TimedStore
from repertory.core.tree import TurnKind
from repertory.errors import ScheduleNotFound, StoreError
from repertory.runtime.cron import next_fire

if TYPE_CHECKING:
    from repertory.tree.runtime import Runtime

__all__ = ["Schedule", "changed_schedule", "new_schedule", "time_store"]


def time_store(runtime: Runtime) -> TimedStore:
    """The runtime's store as a ``TimedStore``; ``StoreError`` for a store that keeps no time."""
    store = runtime.store
    if not isinstance(store, TimedStore):
        raise StoreError(f"{type(store).__name__} keeps no schedules or timers (a TimeStore)")
    return store


def _first_fire(cron: str, tz: str, now: int, end_at: int | None) -> int:
    """The first fire time after ``now``; ``ValueError`` for an empty or bad expression or zone, or an end before it."""
    if not isinstance(cron, str) or not cron.strip():
        raise ValueError("a schedule needs a cron expression such as '0 9 * * MON'")
    first = next_fire(cron, tz, now)
    if end_at is not None and end_at < first:
        raise ValueError("end_at is before the schedule's next fire time: it would never fire")
    return first


def new_schedule(
    *,
    now: int,
    session_id: str | None,
    agent: str,
    cron: str,
    message: ModelMessage,
    kind: TurnKind,
    tz: str = "UTC",
    end_at: int | None = None,
    enabled: bool = True,
    metadata: dict[str, JsonValue] | None = None,
    schedule_id: str | None = None,
    owner: str | None = None,
    webhook: FiringWebhook | None = None,
) -> ScheduleRecord:
    """A validated schedule row whose first fire time is the first after ``now``.

    A malformed cron expression, an unknown time zone, or an ``end_at`` before the first firing
    raises ``ValueError`` saying which.
    """
    first = _first_fire(cron, tz, now, end_at)
    return ScheduleRecord(
        schedule_id=schedule_id or new_id(),
        session_id=session_id,
        agent=agent,
        owner=owner,
        cron=cron,
        tz=tz,
        message=message,
        kind=kind,
        next_at=first,
        end_at=end_at,
        enabled=enabled,
        metadata=dict(metadata or {}),
        webhook=webhook,
        created_at=now,
        updated_at=now,
    )


def changed_schedule(
    record: ScheduleRecord,
    *,
    now: int,
    cron: str | None = None,
    tz: str | None = None,
    said: tuple[ModelMessage, TurnKind] | None = None,
    end_at: int | EllipsisType | None = ...,
    enabled: bool | None = None,
    metadata: Mapping[str, JsonValue] | None = None,
    webhook: FiringWebhook | EllipsisType | None = ...,
) -> ScheduleRecord:
    """``record`` with the given fields changed (``None``, ``...``: kept), validated and re-timed.

    What ``Schedule.update`` writes, and ``repertory schedules enable/disable``: a change to when it
    fires (``cron``, ``tz``, ``end_at``, or enabling it again) moves ``next_at`` to the first fire
    time after ``now``. ``said`` is the new message and its turn kind. A bad expression or time zone,
    or an ``end_at`` before that fire time, raises ``ValueError``.
    """
    changes: dict[str, Any] = {"updated_at": now}
    if cron is not None:
        changes["cron"] = cron
    if tz is not None:
        changes["tz"] = tz
    if said is not None:
        changes["message"], changes["kind"] = said
    if not isinstance(end_at, EllipsisType):
        changes["end_at"] = end_at
    if enabled is not None:
        changes["enabled"] = enabled
    if metadata is not None:
        changes["metadata"] = dict(metadata)
    if not isinstance(webhook, EllipsisType):
        changes["webhook"] = webhook
    if {"cron", "tz", "end_at"} & changes.keys() or (enabled is True and not record.enabled):
        ends = changes.get("end_at", record.end_at)
        changes["next_at"] = _first_fire(changes.get("cron", record.cron), changes.get("tz", record.tz), now, ends)
    return ScheduleRecord.model_validate({**record.model_dump(), **changes})


class Schedule:
    """One schedule: ``id``, ``cron``, ``tz``, ``next_at`` (epoch ms, ``None`` once ended); ``update``, ``cancel``."""

    def __init__(self, runtime: Runtime, record: ScheduleRecord) -> None:
        self._rt = runtime
        self._record = record

    @property
    def id(self) -> str:
        """The schedule id."""
        return self._record.schedule_id

    @property
    def cron(self) -> str:
        """The cron expression (five fields, cronsim's syntax)."""
        return self._record.cron

    @property
    def tz(self) -> str:
        """The IANA time zone the expression is read in."""
        return self._record.tz

    @property
    def next_at(self) -> int | None:
        """The next fire time in epoch milliseconds, as last read (``None``: no more firings)."""
        return self._record.next_at

    @property
    def session_id(self) -> str | None:
        """The session each firing runs on (``None``: a new session per firing)."""
        return self._record.session_id

    @property
    def record(self) -> ScheduleRecord:
        """A copy of the stored row as last read."""
        return self._record.model_copy(deep=True)

    async def refresh(self) -> Schedule:
        """Read the row again (``next_at`` moves as the schedule fires); ``ScheduleNotFound`` once cancelled."""
        record = await time_store(self._rt).load_schedule(self.id)
        if record is None:
            raise ScheduleNotFound(f"no schedule {self.id!r}", schedule_id=self.id)
        self._record = record
        return self

    async def update(
        self,
        *,
        cron: str | None = None,
        tz: str | None = None,
        message: Message | None = None,
        principal: Principal | None = None,
        end_at: int | EllipsisType | None = ...,
        enabled: bool | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
        webhook: FiringWebhook | EllipsisType | None = ...,
    ) -> Schedule:
        """Change the schedule in place: its id, its session and what it fired so far stay.

        ``None`` (and ``end_at=...``) leaves a field as it is; ``end_at=None`` removes the end.
        ``message`` replaces what each firing sends, stamped by ``principal`` (default: the user);
        ``metadata`` replaces the free-form JSON; ``webhook`` the firings' completion webhook
        (``None``: none). A change to when it fires (``cron``, ``tz``,
        ``end_at``, or enabling it again) times it anew from now: its next fire time is the first
        after now, and firings missed while it was disabled are not caught up. A bad expression or
        time zone, or an ``end_at`` before that next fire time, raises ``ValueError`` and writes
        nothing; ``ScheduleNotFound`` once it was cancelled.
        """
        store = time_store(self._rt)
        record = await store.load_schedule(self.id)
        if record is None:
            raise ScheduleNotFound(f"no schedule {self.id!r}", schedule_id=self.id)
        said = None if message is None else to_model_message(message, principal or Principal.user())
        updated = changed_schedule(
            record,
            now=self._rt.clock.now_ms(),
            cron=cron,
            tz=tz,
            said=said,
            end_at=end_at,
            enabled=enabled,
            metadata=metadata,
            webhook=webhook,
        )
        if not await store.update_schedule(updated):
            raise ScheduleNotFound(f"no schedule {self.id!r}", schedule_id=self.id)
        self._record = updated
        self._rt.host.nudge_timers(updated.session_id)
        return self

    async def cancel(self) -> bool:
        """Stop the schedule: no firing starts after this returns; whether it still existed.

        A firing already queued as a turn is a turn like any other (cancel it with its handle).
        """
        gone = await time_store(self._rt).delete_schedule(self.id)
        self._rt.host.nudge_timers(self._record.session_id)
        return gone

    def __repr__(self) -> str:
        return f"Schedule({self.id!r}, {self.cron!r}, tz={self.tz!r}, next_at={self.next_at})"
