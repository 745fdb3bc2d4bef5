"""``repertory schedules list``, ``cancel ID``, ``disable ID``, ``enable ID``: cron schedules in a store.

They read and write the store directly (no runtime needs to run): a cancelled schedule's row is
gone and a disabled one stays, not due; a host that is running notices at its next poll, so no
firing starts after that. An enabled schedule fires from its first fire time after now. Also
``repertory schedules timers``: the armed timers (sleeping runs), earliest first.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer
from rich.table import Table

from repertory.cli._options import DEFAULT_STORE, StoreOption, stdout_console
from repertory.core.clock import iso_ms
from repertory.core.ids import now_ms
from repertory.core.timing import TimedStore
from repertory.errors import RepertoryError, ScheduleNotFound

__all__ = ["register", "schedules_app"]

schedules_app = typer.Typer(
    help="Cron schedules and armed timers: list, cancel, disable, enable, timers.", no_args_is_help=True
)


async def _open(url: str) -> TimedStore:
    from repertory.cli._store import open_existing_store

    store = await open_existing_store(url)
    if not isinstance(store, TimedStore):
        await store.close()
        raise RepertoryError(f"{url} keeps no schedules")
    return store


@schedules_app.command("list")
def schedules_list(
    store: StoreOption = DEFAULT_STORE,
    session: Annotated[str | None, typer.Option("--session", help="Only this session's schedules.")] = None,
) -> None:
    """Schedules, oldest first: id, session, cron, time zone, next fire time (UTC), enabled, message."""

    async def main() -> Table:
        s = await _open(store)
        try:
            table = Table(title="schedules")
            for column in ("id", "session", "agent", "cron", "tz", "next (UTC)", "enabled", "message"):
                table.add_column(column)
            for r in await s.list_schedules(session):
                table.add_row(
                    r.schedule_id,
                    r.session_id or "(new each time)",
                    r.agent,
                    r.cron,
                    r.tz,
                    "ended" if r.next_at is None else iso_ms(r.next_at),
                    "yes" if r.enabled else "no",
                    r.message.text[:60],
                )
            return table
        finally:
            await s.close()

    stdout_console().print(asyncio.run(main()))


@schedules_app.command("cancel")
def schedules_cancel(schedule_id: str, store: StoreOption = DEFAULT_STORE) -> None:
    """Remove a schedule: no firing starts after this (one already queued is an ordinary turn)."""

    async def main() -> None:
        s = await _open(store)
        try:
            if not await s.delete_schedule(schedule_id):
                raise ScheduleNotFound(f"no schedule {schedule_id!r}", schedule_id=schedule_id)
        finally:
            await s.close()

    asyncio.run(main())
    stdout_console().print(f"cancelled schedule {schedule_id}")


def _switch(schedule_id: str, store: str, enabled: bool) -> None:
    """Enable or disable a schedule in the store; enabling times it anew from now (no catch-up)."""
    from repertory.tree.schedules import changed_schedule

    async def main() -> None:
        s = await _open(store)
        try:
            record = await s.load_schedule(schedule_id)
            if record is None or not await s.update_schedule(changed_schedule(record, now=now_ms(), enabled=enabled)):
                raise ScheduleNotFound(f"no schedule {schedule_id!r}", schedule_id=schedule_id)
        finally:
            await s.close()

    asyncio.run(main())
    stdout_console().print(f"{'enabled' if enabled else 'disabled'} schedule {schedule_id}")


@schedules_app.command("disable")
def schedules_disable(schedule_id: str, store: StoreOption = DEFAULT_STORE) -> None:
    """Stop a schedule firing without removing it (a running host notices at its next poll)."""
    _switch(schedule_id, store, False)


@schedules_app.command("enable")
def schedules_enable(schedule_id: str, store: StoreOption = DEFAULT_STORE) -> None:
    """Let a disabled schedule fire again, from its first fire time after now (what it missed is not caught up)."""
    _switch(schedule_id, store, True)


@schedules_app.command("timers")
def schedules_timers(
    store: StoreOption = DEFAULT_STORE, limit: int = typer.Option(100, min=1, max=1_000_000, help="At most this many.")
) -> None:
    """Armed timers (runs sleeping in a tool's ``sleep()``), earliest first."""

    async def main() -> Table:
        s = await _open(store)
        try:
            table = Table(title="timers")
            for column in ("run", "session", "wakes at (UTC)"):
                table.add_column(column)
            for t in await s.list_timers(limit=limit):
                table.add_row(t.run_id, t.session_id, iso_ms(t.wake_at))
            return table
        finally:
            await s.close()

    stdout_console().print(asyncio.run(main()))


def register(app: typer.Typer) -> None:
    """Attach ``repertory schedules`` to the app."""
    app.add_typer(schedules_app, name="schedules")
