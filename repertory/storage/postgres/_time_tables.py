"""The time tables (timers, schedules, webhook deliveries) of ``PostgresSessionStore`` (schema version 5).

Every compare-and-set is one ``UPDATE ... WHERE`` (one round trip, atomic under PostgreSQL's row
locks), so of several runtimes racing for a due row exactly one sees its update count be 1. The due
queries walk the partial indexes with a ``LIMIT``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from repertory.core.timing import FIRING_WEBHOOK_LIKE, ScheduleRecord, TimerRecord, WebhookRecord, WebhookStatus
from repertory.storage.postgres.connection import PgBase
from repertory.storage.readback import read_record, read_records, sort_records

__all__ = ["PgTimeTables"]

_TIMER_COLUMNS = "run_id, session_id, token, wake_at, due_at"


_DROPPABLE = ("metadata",)
"""What a schedule or a delivery is read back without when it cannot be read (``repertory.storage.readback``)."""


def _schedule(raw: str, schedule_id: str) -> ScheduleRecord:
    return read_record(ScheduleRecord, raw, what="schedule", row_id=schedule_id, droppable=_DROPPABLE)


def _webhook(raw: str, delivery_id: str) -> WebhookRecord:
    return read_record(WebhookRecord, raw, what="webhook delivery", row_id=delivery_id, droppable=_DROPPABLE)


def _timer(row: Sequence[Any]) -> TimerRecord:
    return TimerRecord(run_id=row[0], session_id=row[1], token=row[2], wake_at=row[3], due_at=row[4])


class PgTimeTables(PgBase):
    """Timers, schedules and webhooks."""

    async def _rows(self, action: str, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        async with self.connection(action) as conn:
            cur = await conn.execute(sql, params)
            return list(await cur.fetchall())

    async def _count(self, action: str, sql: str, params: Sequence[Any]) -> int:
        async with self.connection(action) as conn:
            cur = await conn.execute(sql, params)
            return cur.rowcount

    # -- timers -------------------------------------------------------------------------------------

    async def arm_timer(self, timer: TimerRecord) -> None:
        """Insert or replace the run's timer."""
        await self._count(
            "arm_timer",
            f"INSERT INTO repertory.timers ({_TIMER_COLUMNS}) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (run_id) DO UPDATE SET session_id = excluded.session_id, token = excluded.token, "
            "wake_at = excluded.wake_at, due_at = excluded.due_at",
            (timer.run_id, timer.session_id, timer.token, timer.wake_at, timer.due_at),
        )

    async def due_timers(self, now: int, limit: int) -> list[TimerRecord]:
        """Timers due by ``now``, earliest first."""
        rows = await self._rows(
            "due_timers",
            f"SELECT {_TIMER_COLUMNS} FROM repertory.timers WHERE due_at <= %s ORDER BY due_at, run_id LIMIT %s",
            (now, max(limit, 0)),
        )
        return [_timer(r) for r in rows]

    async def next_timer_due(self) -> int | None:
        """The earliest ``due_at``."""
        rows = await self._rows("next_timer_due", "SELECT MIN(due_at) FROM repertory.timers")
        return None if not rows or rows[0][0] is None else int(rows[0][0])

    async def claim_timer(self, run_id: str, token: str, due_at: int, until: int) -> bool:
        """Compare-and-set on (token, due_at)."""
        return (
            await self._count(
                "claim_timer",
                "UPDATE repertory.timers SET due_at = %s WHERE run_id = %s AND token = %s AND due_at = %s",
                (until, run_id, token, due_at),
            )
            > 0
        )

    async def delete_timer(self, run_id: str, token: str) -> None:
        """Remove the timer if it still holds ``token``."""
        await self._count(
            "delete_timer", "DELETE FROM repertory.timers WHERE run_id = %s AND token = %s", (run_id, token)
        )

    async def list_timers(self, session_id: str | None = None, limit: int | None = None) -> list[TimerRecord]:
        """Timers by ``wake_at``."""
        sql = f"SELECT {_TIMER_COLUMNS} FROM repertory.timers"
        params: list[Any] = []
        if session_id is not None:
            sql += " WHERE session_id = %s"
            params.append(session_id)
        sql += " ORDER BY wake_at, run_id"
        if limit is not None:
            sql += " LIMIT %s"
            params.append(max(int(limit), 0))
        return [_timer(r) for r in await self._rows("list_timers", sql, params)]

    # -- schedules ----------------------------------------------------------------------------------

    async def add_schedule(self, schedule: ScheduleRecord) -> None:
        """Insert; a known id conflicts (the primary key)."""
        await self._count(
            "add_schedule",
            "INSERT INTO repertory.schedules (schedule_id, session_id, enabled, next_at, record, owner) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            (
                schedule.schedule_id,
                schedule.session_id,
                schedule.enabled,
                schedule.next_at,
                schedule.model_dump_json(),
                schedule.owner,
            ),
        )

    async def load_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        """A copy, or ``None``."""
        rows = await self._rows(
            "load_schedule", "SELECT record FROM repertory.schedules WHERE schedule_id = %s", (schedule_id,)
        )
        return _schedule(rows[0][0], schedule_id) if rows else None

    async def list_schedules(self, session_id: str | None = None, *, owner: str | None = None) -> list[ScheduleRecord]:
        """Oldest first; an owner's through the ``schedules_by_owner`` index."""
        clauses = [("session_id = %s", session_id), ("owner = %s", owner)]
        chosen = [(clause, value) for clause, value in clauses if value is not None]
        where = " WHERE " + " AND ".join(c for c, _ in chosen) if chosen else ""
        rows = await self._rows(
            "list_schedules",
            f"SELECT schedule_id, record FROM repertory.schedules{where} ORDER BY ord",
            tuple(v for _, v in chosen),
        )
        return read_records(ScheduleRecord, rows, what="schedule", droppable=_DROPPABLE)

    async def count_schedules(self, owner: str | None) -> int:
        """The owner's schedules, counted in the ``schedules_by_owner`` index (the column is written at creation)."""
        if owner is None:
            rows = await self._rows("count_schedules", "SELECT COUNT(*) FROM repertory.schedules WHERE owner IS NULL")
        else:
            rows = await self._rows(
                "count_schedules", "SELECT COUNT(*) FROM repertory.schedules WHERE owner = %s", (owner,)
            )
        return int(rows[0][0])

    async def update_schedule(self, schedule: ScheduleRecord) -> bool:
        """Rewrite the row's fields."""
        return (
            await self._count(
                "update_schedule",
                "UPDATE repertory.schedules SET session_id = %s, enabled = %s, next_at = %s, record = %s "
                "WHERE schedule_id = %s",
                (
                    schedule.session_id,
                    schedule.enabled,
                    schedule.next_at,
                    schedule.model_dump_json(),
                    schedule.schedule_id,
                ),
            )
            > 0
        )

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Remove; whether it existed."""
        return (
            await self._count(
                "delete_schedule", "DELETE FROM repertory.schedules WHERE schedule_id = %s", (schedule_id,)
            )
            > 0
        )

    async def due_schedules(self, now: int, limit: int) -> list[ScheduleRecord]:
        """Enabled schedules due by ``now``, earliest first.

        A due row that cannot be read back is skipped, logged and taken off the due index
        (``enabled = false`` in its column; its text stays, for ``delete_schedule``): left there,
        such rows would come first in every bounded due query and crowd the others out.
        """
        rows = await self._rows(
            "due_schedules",
            "SELECT schedule_id, record FROM repertory.schedules WHERE enabled AND next_at IS NOT NULL "
            "AND next_at <= %s ORDER BY next_at, schedule_id LIMIT %s",
            (now, max(limit, 0)),
        )
        due, unreadable = sort_records(ScheduleRecord, rows, what="schedule", droppable=_DROPPABLE)
        if unreadable:
            await self._count(
                "due_schedules",
                "UPDATE repertory.schedules SET enabled = false WHERE schedule_id = ANY(%s)",
                (unreadable,),
            )
        return due

    async def next_schedule_due(self) -> int | None:
        """The earliest ``next_at`` of an enabled schedule."""
        rows = await self._rows(
            "next_schedule_due",
            "SELECT MIN(next_at) FROM repertory.schedules WHERE enabled AND next_at IS NOT NULL",
        )
        return None if not rows or rows[0][0] is None else int(rows[0][0])

    async def advance_schedule(self, schedule_id: str, next_at: int, to: int | None, updated_at: int) -> bool:
        """Compare-and-set on ``next_at`` under the row's lock; the record's copy moves with the column.

        Read, then rewrite, rather than ``jsonb_set`` in one statement: jsonb refuses the NUL
        character a message may hold. ``FOR UPDATE`` re-checks the condition after a racing writer
        commits, so of two racers only one sees the row.
        """
        async with self.connection("advance_schedule") as conn, conn.transaction():
            cur = await conn.execute(
                "SELECT record FROM repertory.schedules WHERE schedule_id = %s AND next_at = %s FOR UPDATE",
                (schedule_id, next_at),
            )
            row = await cur.fetchone()
            if row is None:
                return False
            moved = _schedule(row[0], schedule_id).model_copy(update={"next_at": to, "updated_at": updated_at})
            await conn.execute(
                "UPDATE repertory.schedules SET next_at = %s, record = %s WHERE schedule_id = %s",
                (to, moved.model_dump_json(), schedule_id),
            )
            return True

    # -- webhooks -----------------------------------------------------------------------------------

    async def add_webhook(self, webhook: WebhookRecord) -> None:
        """Insert; a known id conflicts (the primary key)."""
        await self._count(
            "add_webhook",
            "INSERT INTO repertory.webhooks (delivery_id, submission_id, status, attempts, due_at, record) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            (
                webhook.delivery_id,
                webhook.submission_id,
                webhook.status,
                webhook.attempts,
                webhook.due_at,
                webhook.model_dump_json(),
            ),
        )

    async def load_webhook(self, delivery_id: str) -> WebhookRecord | None:
        """A copy, or ``None``."""
        rows = await self._rows(
            "load_webhook", "SELECT record FROM repertory.webhooks WHERE delivery_id = %s", (delivery_id,)
        )
        return _webhook(rows[0][0], delivery_id) if rows else None

    async def list_webhooks(
        self, status: WebhookStatus | None = None, submission_id: str | None = None, *, firings: bool = False
    ) -> list[WebhookRecord]:
        """Oldest first, filtered (``firings``: by the delivery id's form, in SQL, so no other row is decoded)."""
        where: list[str] = []
        params: list[str] = []
        if status is not None:
            where.append("status = %s")
            params.append(status)
        if submission_id is not None:
            where.append("submission_id = %s")
            params.append(submission_id)
        if firings:
            where.append("delivery_id LIKE %s")
            params.append(FIRING_WEBHOOK_LIKE)
        sql = "SELECT delivery_id, record FROM repertory.webhooks" + (" WHERE " + " AND ".join(where) if where else "")
        rows = await self._rows("list_webhooks", sql + " ORDER BY ord", params)
        return read_records(WebhookRecord, rows, what="webhook delivery", droppable=_DROPPABLE)

    async def claim_webhook(self, delivery_id: str, attempts: int, now: int, until: int) -> bool:
        """Compare-and-set on (pending, attempts, due) under the row's lock (see ``advance_schedule``)."""
        async with self.connection("claim_webhook") as conn, conn.transaction():
            cur = await conn.execute(
                "SELECT record FROM repertory.webhooks WHERE delivery_id = %s AND status = 'pending' "
                "AND attempts = %s AND due_at <= %s FOR UPDATE",
                (delivery_id, attempts, now),
            )
            row = await cur.fetchone()
            if row is None:
                return False
            taken = _webhook(row[0], delivery_id).model_copy(update={"attempts": attempts + 1, "due_at": until})
            await conn.execute(
                "UPDATE repertory.webhooks SET attempts = %s, due_at = %s, record = %s WHERE delivery_id = %s",
                (taken.attempts, until, taken.model_dump_json(), delivery_id),
            )
            return True

    async def finish_webhook(
        self, delivery_id: str, status: WebhookStatus, due_at: int, last_error: str | None, updated_at: int
    ) -> None:
        """Record the outcome of an attempt."""
        async with self.connection("finish_webhook") as conn, conn.transaction():
            cur = await conn.execute(
                "SELECT record FROM repertory.webhooks WHERE delivery_id = %s FOR UPDATE", (delivery_id,)
            )
            row = await cur.fetchone()
            if row is None:
                return
            done = _webhook(row[0], delivery_id).model_copy(
                update={"status": status, "due_at": due_at, "last_error": last_error, "updated_at": updated_at}
            )
            await conn.execute(
                "UPDATE repertory.webhooks SET status = %s, due_at = %s, record = %s WHERE delivery_id = %s",
                (status, due_at, done.model_dump_json(), delivery_id),
            )
