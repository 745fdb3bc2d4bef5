"""The time tables (timers, schedules, webhook deliveries) of ``InMemorySessionStore``, kept as JSON.

The conformance reference, not a fast path: a due query scans its table (``heapq.nsmallest``), where
the database stores walk an index. Rows are JSON text like the rest of the store, so every read is a
fresh record. Tables are created on first use, which keeps the store's constructor untouched.
"""

from __future__ import annotations

import heapq

from repertory.core.timing import ScheduleRecord, TimerRecord, WebhookRecord, WebhookStatus, is_firing_webhook
from repertory.errors import CommitConflict, StoreError
from repertory.storage.readback import read_record, read_records

__all__ = ["MemoryTimeTables"]

_DROPPABLE = ("metadata",)
"""What a schedule or a delivery is read back without when it cannot be read (``repertory.storage.readback``)."""


def _schedule(raw: str, schedule_id: str) -> ScheduleRecord:
    return read_record(ScheduleRecord, raw, what="schedule", row_id=schedule_id, droppable=_DROPPABLE)


def _webhook(raw: str, delivery_id: str) -> WebhookRecord:
    return read_record(WebhookRecord, raw, what="webhook delivery", row_id=delivery_id, droppable=_DROPPABLE)


class _Tables:
    def __init__(self) -> None:
        self.timers: dict[str, str] = {}
        self.schedules: dict[str, str] = {}
        self.webhooks: dict[str, str] = {}


class MemoryTimeTables:
    """Mixin: the time half of the in-memory store."""

    _closed: bool

    def _time(self) -> _Tables:
        if self._closed:
            raise StoreError("store is closed")
        tables: _Tables | None = getattr(self, "_time_tables", None)
        if tables is None:
            tables = _Tables()
            self._time_tables = tables
        return tables

    def _forget_sessions(self, doomed: set[str]) -> tuple[int, int]:
        """Drop the timers and schedules of deleted sessions (``delete_sessions``): ``(timers, schedules)``."""
        tables: _Tables | None = getattr(self, "_time_tables", None)
        if tables is None:
            return 0, 0
        counts = []
        timers = [(k, TimerRecord.model_validate_json(raw).session_id) for k, raw in tables.timers.items()]
        # A schedule that cannot be read back names no session: it stays, for delete_schedule.
        schedules = [(s.schedule_id, s.session_id) for s in self._schedules()]
        for table, owned in ((tables.timers, timers), (tables.schedules, schedules)):
            gone = [k for k, session_id in owned if session_id in doomed]
            for key in gone:
                del table[key]
            counts.append(len(gone))
        return counts[0], counts[1]

    # -- timers -------------------------------------------------------------------------------------

    def _timers(self) -> list[TimerRecord]:
        return [TimerRecord.model_validate_json(raw) for raw in self._time().timers.values()]

    async def arm_timer(self, timer: TimerRecord) -> None:
        """Insert or replace the run's timer."""
        self._time().timers[timer.run_id] = timer.model_dump_json()

    async def due_timers(self, now: int, limit: int) -> list[TimerRecord]:
        """Timers due by ``now``, earliest first."""
        due = [t for t in self._timers() if t.due_at <= now]
        return heapq.nsmallest(max(limit, 0), due, key=lambda t: (t.due_at, t.run_id))

    async def next_timer_due(self) -> int | None:
        """The earliest ``due_at``."""
        return min((t.due_at for t in self._timers()), default=None)

    async def claim_timer(self, run_id: str, token: str, due_at: int, until: int) -> bool:
        """Compare-and-set on (token, due_at)."""
        tables = self._time()
        raw = tables.timers.get(run_id)
        if raw is None:
            return False
        timer = TimerRecord.model_validate_json(raw)
        if timer.token != token or timer.due_at != due_at:
            return False
        tables.timers[run_id] = timer.model_copy(update={"due_at": until}).model_dump_json()
        return True

    async def delete_timer(self, run_id: str, token: str) -> None:
        """Remove the timer if it still holds ``token``."""
        tables = self._time()
        raw = tables.timers.get(run_id)
        if raw is not None and TimerRecord.model_validate_json(raw).token == token:
            del tables.timers[run_id]

    async def list_timers(self, session_id: str | None = None, limit: int | None = None) -> list[TimerRecord]:
        """Timers by ``wake_at``."""
        timers = sorted(
            (t for t in self._timers() if session_id is None or t.session_id == session_id),
            key=lambda t: (t.wake_at, t.run_id),
        )
        return timers if limit is None else timers[: max(limit, 0)]

    # -- schedules ----------------------------------------------------------------------------------

    def _schedules(self) -> list[ScheduleRecord]:
        # A row that cannot be read back is skipped (and logged): no listing or due query fails on it.
        return read_records(ScheduleRecord, self._time().schedules.items(), what="schedule", droppable=_DROPPABLE)

    async def add_schedule(self, schedule: ScheduleRecord) -> None:
        """Insert; a known id conflicts."""
        tables = self._time()
        if schedule.schedule_id in tables.schedules:
            raise CommitConflict(f"schedule {schedule.schedule_id!r} already exists")
        tables.schedules[schedule.schedule_id] = schedule.model_dump_json()

    async def load_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        """A copy, or ``None``."""
        raw = self._time().schedules.get(schedule_id)
        return None if raw is None else _schedule(raw, schedule_id)

    async def list_schedules(self, session_id: str | None = None, *, owner: str | None = None) -> list[ScheduleRecord]:
        """Oldest first (insertion order is creation order)."""
        return [
            s
            for s in self._schedules()
            if (session_id is None or s.session_id == session_id) and (owner is None or s.owner == owner)
        ]

    async def count_schedules(self, owner: str | None) -> int:
        """The owner's schedules (a scan: this store is the reference, not the fast path)."""
        return sum(1 for s in self._schedules() if s.owner == owner)

    async def update_schedule(self, schedule: ScheduleRecord) -> bool:
        """Rewrite in place."""
        tables = self._time()
        if schedule.schedule_id not in tables.schedules:
            return False
        tables.schedules[schedule.schedule_id] = schedule.model_dump_json()
        return True

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Remove; whether it existed."""
        return self._time().schedules.pop(schedule_id, None) is not None

    async def due_schedules(self, now: int, limit: int) -> list[ScheduleRecord]:
        """Enabled schedules due by ``now``, earliest first."""
        due = [s for s in self._schedules() if s.enabled and s.next_at is not None and s.next_at <= now]
        return heapq.nsmallest(max(limit, 0), due, key=lambda s: (s.next_at or 0, s.schedule_id))

    async def next_schedule_due(self) -> int | None:
        """The earliest ``next_at`` of an enabled schedule."""
        return min((s.next_at for s in self._schedules() if s.enabled and s.next_at is not None), default=None)

    async def advance_schedule(self, schedule_id: str, next_at: int, to: int | None, updated_at: int) -> bool:
        """Compare-and-set on ``next_at``."""
        tables = self._time()
        raw = tables.schedules.get(schedule_id)
        if raw is None:
            return False
        schedule = _schedule(raw, schedule_id)
        if schedule.next_at != next_at:
            return False
        moved = schedule.model_copy(update={"next_at": to, "updated_at": updated_at})
        tables.schedules[schedule_id] = moved.model_dump_json()
        return True

    # -- webhooks -----------------------------------------------------------------------------------

    async def add_webhook(self, webhook: WebhookRecord) -> None:
        """Insert; a known id conflicts."""
        tables = self._time()
        if webhook.delivery_id in tables.webhooks:
            raise CommitConflict(f"webhook delivery {webhook.delivery_id!r} already exists")
        tables.webhooks[webhook.delivery_id] = webhook.model_dump_json()

    async def load_webhook(self, delivery_id: str) -> WebhookRecord | None:
        """A copy, or ``None``."""
        raw = self._time().webhooks.get(delivery_id)
        return None if raw is None else _webhook(raw, delivery_id)

    async def list_webhooks(
        self, status: WebhookStatus | None = None, submission_id: str | None = None, *, firings: bool = False
    ) -> list[WebhookRecord]:
        """Oldest first, filtered (``firings``: by the delivery id's form, before any row is decoded)."""
        found = list(self._time().webhooks.items())
        if firings:
            found = [(i, raw) for i, raw in found if is_firing_webhook(i)]
        rows = read_records(WebhookRecord, found, what="webhook delivery", droppable=_DROPPABLE)
        return [
            w
            for w in rows
            if (status is None or w.status == status) and (submission_id is None or w.submission_id == submission_id)
        ]

    async def claim_webhook(self, delivery_id: str, attempts: int, now: int, until: int) -> bool:
        """Compare-and-set on (pending, attempts, due)."""
        tables = self._time()
        raw = tables.webhooks.get(delivery_id)
        if raw is None:
            return False
        hook = _webhook(raw, delivery_id)
        if hook.status != "pending" or hook.attempts != attempts or hook.due_at > now:
            return False
        taken = hook.model_copy(update={"attempts": attempts + 1, "due_at": until})
        tables.webhooks[delivery_id] = taken.model_dump_json()
        return True

    async def finish_webhook(
        self, delivery_id: str, status: WebhookStatus, due_at: int, last_error: str | None, updated_at: int
    ) -> None:
        """Record the outcome of an attempt."""
        tables = self._time()
        raw = tables.webhooks.get(delivery_id)
        if raw is None:
            return
        hook = _webhook(raw, delivery_id)
        done = hook.model_copy(
            update={"status": status, "due_at": due_at, "last_error": last_error, "updated_at": updated_at}
        )
        tables.webhooks[delivery_id] = done.model_dump_json()
