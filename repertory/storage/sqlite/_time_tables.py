"""The time tables (timers, schedules, webhook deliveries) of ``SqliteSessionStore``.

Every write is one short statement (or a compare-and-set ``UPDATE ... WHERE``) through the store's
writer, like the rest of the store; the due queries are bounded (``LIMIT``) index walks and run
inline. Only the unbounded listings go to a reader thread.
"""

from __future__ import annotations

import sqlite3

from repertory.core.timing import FIRING_WEBHOOK_LIKE, ScheduleRecord, TimerRecord, WebhookRecord, WebhookStatus
from repertory.errors import CommitConflict
from repertory.storage.readback import read_record, read_records, sort_records
from repertory.storage.sqlite.connection import SqliteBase, db_errors

__all__ = ["SqliteTimeTables"]

_TIMER_COLUMNS = "run_id, session_id, token, wake_at, due_at"


_DROPPABLE = ("metadata",)
"""What a schedule or a delivery is read back without when it cannot be read (``repertory.storage.readback``)."""


def _schedule(raw: str, schedule_id: str) -> ScheduleRecord:
    return read_record(ScheduleRecord, raw, what="schedule", row_id=schedule_id, droppable=_DROPPABLE)


def _webhook(raw: str, delivery_id: str) -> WebhookRecord:
    return read_record(WebhookRecord, raw, what="webhook delivery", row_id=delivery_id, droppable=_DROPPABLE)


def _timer(row: tuple[str, str, str, int, int]) -> TimerRecord:
    return TimerRecord(run_id=row[0], session_id=row[1], token=row[2], wake_at=row[3], due_at=row[4])


class SqliteTimeTables(SqliteBase):
    """Timers, schedules and webhooks; connection plumbing comes from ``SqliteBase``."""

    async def _changed(self, action: str, sql: str, params: tuple[object, ...]) -> bool:
        def write(conn: sqlite3.Connection) -> bool:
            return conn.execute(sql, params).rowcount > 0

        return await self._write(action, write, atomic=False)

    # -- timers -------------------------------------------------------------------------------------

    async def arm_timer(self, timer: TimerRecord) -> None:
        """Insert or replace the run's timer."""
        row = (timer.run_id, timer.session_id, timer.token, timer.wake_at, timer.due_at)
        await self._write(
            "arm_timer",
            lambda conn: conn.execute(f"INSERT OR REPLACE INTO timers ({_TIMER_COLUMNS}) VALUES (?, ?, ?, ?, ?)", row),
            atomic=False,
        )

    async def due_timers(self, now: int, limit: int) -> list[TimerRecord]:
        """Timers due by ``now``, earliest first (an index walk of at most ``limit`` rows)."""
        self._check_open()
        with db_errors("due_timers"):
            rows = self._writer.execute(
                f"SELECT {_TIMER_COLUMNS} FROM timers WHERE due_at <= ? ORDER BY due_at, run_id LIMIT ?",
                (now, max(limit, 0)),
            ).fetchall()
        return [_timer(r) for r in rows]

    async def next_timer_due(self) -> int | None:
        """The earliest ``due_at`` (the first entry of the index)."""
        self._check_open()
        with db_errors("next_timer_due"):
            row = self._writer.execute("SELECT MIN(due_at) FROM timers").fetchone()
        return None if row is None or row[0] is None else int(row[0])

    async def claim_timer(self, run_id: str, token: str, due_at: int, until: int) -> bool:
        """Compare-and-set on (token, due_at)."""
        changed = await self._changed(
            "claim_timer",
            "UPDATE timers SET due_at = ? WHERE run_id = ? AND token = ? AND due_at = ?",
            (until, run_id, token, due_at),
        )
        return bool(changed)

    async def delete_timer(self, run_id: str, token: str) -> None:
        """Remove the timer if it still holds ``token``."""
        await self._changed("delete_timer", "DELETE FROM timers WHERE run_id = ? AND token = ?", (run_id, token))

    async def list_timers(self, session_id: str | None = None, limit: int | None = None) -> list[TimerRecord]:
        """Timers by ``wake_at``."""
        sql = f"SELECT {_TIMER_COLUMNS} FROM timers"
        params: tuple[object, ...] = ()
        if session_id is not None:
            sql, params = sql + " WHERE session_id = ?", (session_id,)
        sql += " ORDER BY wake_at, run_id" + ("" if limit is None else f" LIMIT {max(int(limit), 0)}")
        rows = await self.read("list_timers", lambda c: c.execute(sql, params).fetchall())
        return [_timer(r) for r in rows]

    # -- schedules ----------------------------------------------------------------------------------

    async def add_schedule(self, schedule: ScheduleRecord) -> None:
        """Insert; a known id conflicts."""
        row = (
            schedule.schedule_id,
            schedule.session_id,
            int(schedule.enabled),
            schedule.next_at,
            schedule.model_dump_json(),
            schedule.owner,
        )

        def write(conn: sqlite3.Connection) -> None:
            if conn.execute("SELECT 1 FROM schedules WHERE schedule_id = ?", (schedule.schedule_id,)).fetchone():
                raise CommitConflict(f"schedule {schedule.schedule_id!r} already exists")
            conn.execute(
                "INSERT INTO schedules (schedule_id, session_id, enabled, next_at, record, owner) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                row,
            )

        await self._write("add_schedule", write)

    async def load_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        """A copy, or ``None``."""
        self._check_open()
        with db_errors("load_schedule"):
            row = self._writer.execute("SELECT record FROM schedules WHERE schedule_id = ?", (schedule_id,)).fetchone()
        return None if row is None else _schedule(row[0], schedule_id)

    async def list_schedules(self, session_id: str | None = None, *, owner: str | None = None) -> list[ScheduleRecord]:
        """Oldest first; an owner's through the ``schedules_by_owner`` index."""
        where, params = _schedule_filter(session_id, owner, "?")
        sql = f"SELECT schedule_id, record FROM schedules{where} ORDER BY rowid"
        rows = await self.read("list_schedules", lambda c: c.execute(sql, params).fetchall())
        return read_records(ScheduleRecord, rows, what="schedule", droppable=_DROPPABLE)

    async def count_schedules(self, owner: str | None) -> int:
        """The owner's schedules, counted in the ``schedules_by_owner`` index (the column is written at creation)."""
        sql, params = (
            ("SELECT COUNT(*) FROM schedules WHERE owner IS NULL", ())
            if owner is None
            else ("SELECT COUNT(*) FROM schedules WHERE owner = ?", (owner,))
        )
        self._check_open()
        with db_errors("count_schedules"):  # a short index range: inline, like a load
            row = self._writer.execute(sql, params).fetchone()
        return int(row[0])

    async def update_schedule(self, schedule: ScheduleRecord) -> bool:
        """Rewrite the row's fields."""
        changed = await self._changed(
            "update_schedule",
            "UPDATE schedules SET session_id = ?, enabled = ?, next_at = ?, record = ? WHERE schedule_id = ?",
            (
                schedule.session_id,
                int(schedule.enabled),
                schedule.next_at,
                schedule.model_dump_json(),
                schedule.schedule_id,
            ),
        )
        return bool(changed)

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Remove; whether it existed."""
        changed = await self._changed("delete_schedule", "DELETE FROM schedules WHERE schedule_id = ?", (schedule_id,))
        return bool(changed)

    async def due_schedules(self, now: int, limit: int) -> list[ScheduleRecord]:
        """Enabled schedules due by ``now`` (the partial index), earliest first.

        A due row that cannot be read back is skipped, logged and taken off the due index
        (``enabled = 0`` in its column; its text stays as it is, for ``delete_schedule``): left
        there, such rows would come first in every bounded due query and crowd the others out.
        """
        self._check_open()
        with db_errors("due_schedules"):
            rows = self._writer.execute(
                "SELECT schedule_id, record FROM schedules WHERE enabled = 1 AND next_at IS NOT NULL AND next_at <= ? "
                "ORDER BY next_at, schedule_id LIMIT ?",
                (now, max(limit, 0)),
            ).fetchall()
        due, unreadable = sort_records(ScheduleRecord, rows, what="schedule", droppable=_DROPPABLE)
        if unreadable:
            await self._write(
                "due_schedules",
                lambda conn: conn.executemany(
                    "UPDATE schedules SET enabled = 0 WHERE schedule_id = ?", [(i,) for i in unreadable]
                ),
            )
        return due

    async def next_schedule_due(self) -> int | None:
        """The earliest ``next_at`` of an enabled schedule."""
        self._check_open()
        with db_errors("next_schedule_due"):
            row = self._writer.execute(
                "SELECT MIN(next_at) FROM schedules WHERE enabled = 1 AND next_at IS NOT NULL"
            ).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    async def advance_schedule(self, schedule_id: str, next_at: int, to: int | None, updated_at: int) -> bool:
        """Compare-and-set on ``next_at``; the record's copy moves with the column."""

        def write(conn: sqlite3.Connection) -> bool:
            row = conn.execute(
                "SELECT record FROM schedules WHERE schedule_id = ? AND next_at = ?", (schedule_id, next_at)
            ).fetchone()
            if row is None:
                return False
            moved = _schedule(row[0], schedule_id).model_copy(update={"next_at": to, "updated_at": updated_at})
            conn.execute(
                "UPDATE schedules SET next_at = ?, record = ? WHERE schedule_id = ?",
                (to, moved.model_dump_json(), schedule_id),
            )
            return True

        return await self._write("advance_schedule", write)

    # -- webhooks -----------------------------------------------------------------------------------

    async def add_webhook(self, webhook: WebhookRecord) -> None:
        """Insert; a known id conflicts."""
        row = (
            webhook.delivery_id,
            webhook.submission_id,
            webhook.status,
            webhook.attempts,
            webhook.due_at,
            webhook.model_dump_json(),
        )

        def write(conn: sqlite3.Connection) -> None:
            if conn.execute("SELECT 1 FROM webhooks WHERE delivery_id = ?", (webhook.delivery_id,)).fetchone():
                raise CommitConflict(f"webhook delivery {webhook.delivery_id!r} already exists")
            conn.execute(
                "INSERT INTO webhooks (delivery_id, submission_id, status, attempts, due_at, record) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                row,
            )

        await self._write("add_webhook", write)

    async def load_webhook(self, delivery_id: str) -> WebhookRecord | None:
        """A copy, or ``None``."""
        self._check_open()
        with db_errors("load_webhook"):
            row = self._writer.execute("SELECT record FROM webhooks WHERE delivery_id = ?", (delivery_id,)).fetchone()
        return None if row is None else _webhook(row[0], delivery_id)

    async def list_webhooks(
        self, status: WebhookStatus | None = None, submission_id: str | None = None, *, firings: bool = False
    ) -> list[WebhookRecord]:
        """Oldest first, filtered (``firings``: by the delivery id's form, in SQL, so no other row is decoded)."""
        where: list[str] = []
        params: list[str] = []
        if status is not None:
            where.append("status = ?")
            params.append(status)
        if submission_id is not None:
            where.append("submission_id = ?")
            params.append(submission_id)
        if firings:
            where.append("delivery_id LIKE ?")
            params.append(FIRING_WEBHOOK_LIKE)
        sql = "SELECT delivery_id, record FROM webhooks" + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY rowid"
        rows = await self.read("list_webhooks", lambda c: c.execute(sql, params).fetchall())
        return read_records(WebhookRecord, rows, what="webhook delivery", droppable=_DROPPABLE)

    async def claim_webhook(self, delivery_id: str, attempts: int, now: int, until: int) -> bool:
        """Compare-and-set on (pending, attempts, due)."""

        def write(conn: sqlite3.Connection) -> bool:
            row = conn.execute(
                "SELECT record FROM webhooks WHERE delivery_id = ? AND status = 'pending' AND attempts = ? "
                "AND due_at <= ?",
                (delivery_id, attempts, now),
            ).fetchone()
            if row is None:
                return False
            taken = _webhook(row[0], delivery_id).model_copy(update={"attempts": attempts + 1, "due_at": until})
            conn.execute(
                "UPDATE webhooks SET attempts = ?, due_at = ?, record = ? WHERE delivery_id = ?",
                (taken.attempts, until, taken.model_dump_json(), delivery_id),
            )
            return True

        return await self._write("claim_webhook", write)

    async def finish_webhook(
        self, delivery_id: str, status: WebhookStatus, due_at: int, last_error: str | None, updated_at: int
    ) -> None:
        """Record the outcome of an attempt."""

        def write(conn: sqlite3.Connection) -> None:
            row = conn.execute("SELECT record FROM webhooks WHERE delivery_id = ?", (delivery_id,)).fetchone()
            if row is None:
                return
            done = _webhook(row[0], delivery_id).model_copy(
                update={"status": status, "due_at": due_at, "last_error": last_error, "updated_at": updated_at}
            )
            conn.execute(
                "UPDATE webhooks SET status = ?, due_at = ?, record = ? WHERE delivery_id = ?",
                (status, due_at, done.model_dump_json(), delivery_id),
            )

        await self._write("finish_webhook", write)


def _schedule_filter(session_id: str | None, owner: str | None, mark: str) -> tuple[str, tuple[str, ...]]:
    """The ``WHERE`` clause (or nothing) and parameters that pick one session's and/or one owner's schedules."""
    clauses = [(f"session_id = {mark}", session_id), (f"owner = {mark}", owner)]
    chosen = [(clause, value) for clause, value in clauses if value is not None]
    if not chosen:
        return "", ()
    return " WHERE " + " AND ".join(c for c, _ in chosen), tuple(v for _, v in chosen if v is not None)
