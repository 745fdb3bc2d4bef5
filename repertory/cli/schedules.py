"""``repertory schedules list``, ``cancel ID``, ``disable ID``, ``enable ID``: cron schedules in a store.

They read and write the store directly (no runtime needs to run): a cancelled schedule's row is
gone and a disabled one stays, not due; a host that is running notices at its next poll, so no
firing starts after that. An enabled schedule fires from its first fire time after now. Also
``repertory schedules timers``: the armed timers (sleeping runs), earliest first.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Annotated

import typer

from repertory.cli._options import DEFAULT_STORE, StoreOption, WideOption, stdout_console
from repertory.cli._tables import Field, Layout, fit_table
from repertory.core.clock import iso_ms
from repertory.core.ids import now_ms
from repertory.core.timing import TimedStore
from repertory.errors import RepertoryError, ScheduleNotFound

__all__ = ["register", "schedules_app"]

schedules_app = typer.Typer(
    help="Cron schedules and armed timers: list, cancel, disable, enable, timers.",
    short_help="Cron schedules and armed timers: list them, cancel, pause.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _spaced(ms: int) -> str:
    """A time in words that wrap (``2026-01-05 08:00:00 UTC``), for a column narrower than ``iso_ms``'s."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


async def _open(url: str) -> TimedStore:
    from repertory.cli._store import open_existing_store

    store = await open_existing_store(url)
    if not isinstance(store, TimedStore):
        await store.close()
        raise RepertoryError(f"{url} keeps no schedules")
    return store


_SCHEDULE_FIELDS = (
    Field("id", "id"),
    Field("session", "id"),
    Field("agent"),
    Field("cron"),
    Field("tz"),
    Field("next (UTC)"),
    Field("enabled"),
    Field("message", "text", min_width=16),
    Field("when"),
    Field("next"),
)
# Narrower, "when" is the cron with its time zone, and "next" is the next fire time in words that wrap,
# or "disabled" where enabled would say no.
_SCHEDULE_LAYOUTS = (
    Layout(("id", "session", "agent", "cron", "tz", "next (UTC)", "enabled", "message")),
    Layout(("id", "session", "agent", "cron", "tz", "next (UTC)", "enabled", "message"), whole_ids=False),
    Layout(("id", "session", "agent", "when", "next", "message"), whole_ids=False),
    Layout(("id", "session", "when", "next", "message"), whole_ids=False),
    Layout(("id", "when", "next", "message"), whole_ids=False),
    Layout(("id", "when", "next", "message")),
    Layout(("id", "when", "next")),
)


@schedules_app.command("list", short_help="List cron schedules and when each fires next.")
def schedules_list(
    store: StoreOption = DEFAULT_STORE,
    session: Annotated[str | None, typer.Option("--session", help="Only this session's schedules.")] = None,
    wide: WideOption = False,
) -> None:
    """Schedules, oldest first: id, session, cron, time zone, next fire time (UTC), enabled, message."""

    async def main() -> list[tuple[str, ...]]:
        s = await _open(store)
        try:
            rows: list[tuple[str, ...]] = []
            for r in await s.list_schedules(session):
                due = "ended" if r.next_at is None else iso_ms(r.next_at)
                spaced = "ended" if r.next_at is None else _spaced(r.next_at)
                rows.append(
                    (
                        r.schedule_id,
                        r.session_id or "(new each time)",
                        r.agent,
                        r.cron,
                        r.tz,
                        due,
                        "yes" if r.enabled else "no",
                        r.message.text[:60],
                        f"{r.cron} ({r.tz})",
                        spaced if r.enabled else "disabled",
                    )
                )
            return rows
        finally:
            await s.close()

    rows = asyncio.run(main())
    console = stdout_console()
    console.print(fit_table(console, "schedules", _SCHEDULE_FIELDS, rows, _SCHEDULE_LAYOUTS, wide=wide))


@schedules_app.command("cancel", short_help="Remove a schedule: no firing starts after this.")
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


@schedules_app.command("disable", short_help="Stop a schedule firing, without removing it.")
def schedules_disable(schedule_id: str, store: StoreOption = DEFAULT_STORE) -> None:
    """Stop a schedule firing without removing it (a running host notices at its next poll)."""
    _switch(schedule_id, store, False)


@schedules_app.command("enable", short_help="Let a disabled schedule fire again, from now on.")
def schedules_enable(schedule_id: str, store: StoreOption = DEFAULT_STORE) -> None:
    """Let a disabled schedule fire again, from its first fire time after now (what it missed is not caught up)."""
    _switch(schedule_id, store, True)


_TIMER_FIELDS = (Field("run", "id"), Field("session", "id"), Field("wakes at (UTC)"), Field("wakes at"))
_TIMER_LAYOUTS = (
    Layout(("run", "session", "wakes at (UTC)")),
    Layout(("run", "session", "wakes at"), whole_ids=False),
    Layout(("session", "wakes at")),
)


@schedules_app.command("timers", short_help="List armed timers (runs in sleep()), earliest first.")
def schedules_timers(
    store: StoreOption = DEFAULT_STORE,
    limit: int = typer.Option(100, min=1, max=1_000_000, help="At most this many."),
    wide: WideOption = False,
) -> None:
    """Armed timers (runs sleeping in a tool's ``sleep()``), earliest first."""

    async def main() -> list[tuple[str, ...]]:
        s = await _open(store)
        try:
            timers = await s.list_timers(limit=limit)
            return [(t.run_id, t.session_id, iso_ms(t.wake_at), _spaced(t.wake_at)) for t in timers]
        finally:
            await s.close()

    rows = asyncio.run(main())
    console = stdout_console()
    console.print(fit_table(console, "timers", _TIMER_FIELDS, rows, _TIMER_LAYOUTS, wide=wide))


def register(app: typer.Typer) -> None:
    """Attach ``repertory schedules`` to the app."""
    app.add_typer(schedules_app, name="schedules")
