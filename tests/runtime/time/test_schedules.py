"""Cron schedules on sessions: each fire time is one durable turn, at most once, across restarts and runtimes.

Time is a ``ManualClock``. Covered: firing and ``next_at``, the derived submission id, cancelling,
a restart with missed firings (caught up once), two runtimes on one store, a crash between queueing a
firing and advancing the schedule, a named time zone across both DST changes, stateless schedules,
and bad expressions.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from repertory import InMemorySessionStore, NotificationMessage, Runtime, ScheduleNotFound
from repertory.core.timing import FiringWebhook, WebhookRecord, firing_submission_id, firing_webhook_id
from repertory.testing import ManualClock
from tests.runtime.time.helpers import HOUR, nap_agent, quiet_after, timed, until

AGENTS = {"napper": nap_agent()}


def ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> int:
    return int(datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp() * 1000)


async def _turns(rt: Runtime, session_id: str) -> list[str]:
    return [t.submission_id for t in await rt.store.list_turns(session_id)]


async def _settled(rt: Runtime, session_id: str, count: int) -> bool:
    turns = await rt.store.list_turns(session_id)
    return len(turns) >= count and all(t.status == "done" for t in turns)


async def test_a_schedule_fires_one_turn_per_fire_time() -> None:
    clock = ManualClock(ms(2026, 1, 1, 8, 58))
    async with await Runtime.start(InMemorySessionStore(), agents=AGENTS, clock=clock) as rt:
        h = await rt.create_session("napper")
        sched = await h.schedule("0 9 * * *", "report please")
        assert (sched.cron, sched.tz, sched.session_id, sched.next_at) == ("0 9 * * *", "UTC", h.id, ms(2026, 1, 1, 9))
        assert [s.id for s in await rt.schedules()] == [sched.id] == [s.id for s in await h.schedules()]
        clock.advance(119)
        assert await _turns(rt, h.id) == []
        clock.advance(1)
        await until(lambda: _settled(rt, h.id, 1))
        assert await _turns(rt, h.id) == [firing_submission_id(sched.id, ms(2026, 1, 1, 9))]
        (turn,) = await rt.store.list_turns(h.id)
        assert turn.message.text == "report please" and turn.message.origin is not None
        assert turn.message.origin.kind == "user"
        assert (await sched.refresh()).next_at == ms(2026, 1, 2, 9)
        clock.set(ms(2026, 1, 2, 9))
        await until(lambda: _settled(rt, h.id, 2))
        assert len(await _turns(rt, h.id)) == 2
        assert await sched.cancel() is True
        assert await sched.cancel() is False
        assert await rt.schedules() == []
        with pytest.raises(ScheduleNotFound):
            await rt.schedule(sched.id)
        await quiet_after(rt, lambda: clock.set(ms(2026, 1, 5, 9)))
        assert len(await _turns(rt, h.id)) == 2


async def test_missed_firings_are_caught_up_once_after_a_restart(tmp_path: Path) -> None:
    url, clock = f"sqlite:///{tmp_path / 's.db'}", ManualClock(ms(2026, 1, 1, 0, 0))
    async with await Runtime.start(url, agents=AGENTS, clock=clock) as rt:
        h = await rt.create_session("napper")
        sched = await h.schedule("0 * * * *", "tick")
    clock.set(ms(2026, 1, 1, 5, 30))  # 01:00 .. 05:00 were missed while nothing ran
    async with await Runtime.start(url, agents=AGENTS, clock=clock) as rt:
        await until(lambda: _settled(rt, h.id, 1))
        assert await _turns(rt, h.id) == [firing_submission_id(sched.id, ms(2026, 1, 1, 1))]
        assert (await rt.schedule(sched.id)).next_at == ms(2026, 1, 1, 6)
        clock.set(ms(2026, 1, 1, 6))
        await until(lambda: _settled(rt, h.id, 2))
        assert await _turns(rt, h.id) == [
            firing_submission_id(sched.id, ms(2026, 1, 1, 1)),
            firing_submission_id(sched.id, ms(2026, 1, 1, 6)),
        ]


async def test_two_runtimes_on_one_store_fire_each_time_once(tmp_path: Path) -> None:
    url, clock = f"sqlite:///{tmp_path / 'two.db'}", ManualClock(ms(2026, 1, 1))
    async with (
        await Runtime.start(url, agents=AGENTS, clock=clock, poll_interval=1) as one,
        await Runtime.start(url, agents=AGENTS, clock=clock, poll_interval=1) as two,
    ):
        h = await one.create_session("napper")
        await h.schedule("*/5 * * * *", "tick")
        for minute in (5, 10, 15):
            clock.set(ms(2026, 1, 1, 0, minute))
            await until(lambda n=minute // 5: _settled(one, h.id, n))  # type: ignore[misc]
        await quiet_after(one, lambda: clock.advance(1))  # a pass of each, past their 1 s poll
        await quiet_after(two, lambda: clock.advance(1))
        turns = await _turns(one, h.id)
        assert len(turns) == 3 == len(set(turns))


async def test_a_firing_queued_before_a_crash_is_not_queued_again(tmp_path: Path) -> None:
    url, clock = f"sqlite:///{tmp_path / 'crash.db'}", ManualClock(ms(2026, 1, 1))
    async with await Runtime.start(url, agents=AGENTS, clock=clock) as rt:
        h = await rt.create_session("napper")
        sched = await h.schedule("0 1 * * *", "tick")
        await sched.cancel()  # keep this runtime from firing it; the row is written back below
    # What a crash between "queue the firing's turn" and "advance next_at" leaves behind:
    async with await Runtime.start(url, agents=AGENTS, clock=clock) as rt:
        fire_at = ms(2026, 1, 1, 1)
        await timed(rt).add_schedule(sched.record)
        message = sched.record.message
        await rt.host.send(h.id, message, "message", "enqueue", None, firing_submission_id(sched.id, fire_at))
    clock.set(ms(2026, 1, 1, 1, 30))
    async with await Runtime.start(url, agents=AGENTS, clock=clock) as rt:
        await until(lambda: _advanced(rt, sched.id, ms(2026, 1, 2, 1)))
        await until(lambda: _settled(rt, h.id, 1))
        assert await _turns(rt, h.id) == [firing_submission_id(sched.id, fire_at)]


@pytest.mark.parametrize("row_written", [False, True], ids=["before-the-webhook-row", "after-it"])
async def test_a_firing_webhook_row_is_written_once_across_a_crash(tmp_path: Path, row_written: bool) -> None:
    # A schedule with a FiringWebhook: the host that fires it writes each firing's delivery row
    # after the turn and before next_at moves, under an id derived from the firing. A crash at
    # either point leaves the firing due again; its second attempt writes exactly one row.
    url, clock = f"sqlite:///{tmp_path / 'hook.db'}", ManualClock(ms(2026, 1, 1))
    hook = FiringWebhook(url="http://127.0.0.1:9/hook", metadata={"assistant_id": "napper"})
    async with await Runtime.start(url, agents=AGENTS, clock=clock) as rt:
        h = await rt.create_session("napper")
        sched = await h.schedule("0 1 * * *", "tick")
        await sched.update(webhook=hook)
        record = sched.record
        await sched.cancel()
    fire_at, submission_id = ms(2026, 1, 1, 1), firing_submission_id(sched.id, ms(2026, 1, 1, 1))
    async with await Runtime.start(url, agents=AGENTS, clock=clock) as rt:
        await timed(rt).add_schedule(record)
        turn = await rt.host.send(h.id, record.message, "message", "enqueue", None, submission_id)
        if row_written:
            row = WebhookRecord(
                delivery_id=firing_webhook_id(sched.id, fire_at),
                session_id=h.id,
                submission_id=submission_id,
                run_id=turn.run_id,
                url=hook.url,
                metadata=dict(hook.metadata),
            )
            await timed(rt).add_webhook(row)
    clock.set(ms(2026, 1, 1, 1, 30))
    async with await Runtime.start(url, agents=AGENTS, clock=clock) as rt:
        await until(lambda: _advanced(rt, sched.id, ms(2026, 1, 2, 1)))
        (row,) = await timed(rt).list_webhooks(submission_id=submission_id)
        (turn,) = await rt.store.list_turns(h.id)
    assert (row.delivery_id, row.run_id, row.url, row.metadata) == (
        firing_webhook_id(sched.id, fire_at),
        turn.run_id,
        hook.url,
        hook.metadata,
    )


async def _advanced(rt: Runtime, schedule_id: str, to: int) -> bool:
    return (await rt.schedule(schedule_id)).next_at == to


async def _fire_times(rt: Runtime, session_id: str, schedule_id: str) -> list[int]:
    prefix = f"cron-{schedule_id}-"
    return [int(s.removeprefix(prefix)) for s in await _turns(rt, session_id)]


@pytest.mark.parametrize(
    ("start", "local_expected"),
    [
        # Spring forward (2026-03-29, 02:00 CET -> 03:00 CEST): 02:30 does not exist that night; it fires at 03:00.
        (ms(2026, 3, 27, 12), [ms(2026, 3, 28, 1, 30), ms(2026, 3, 29, 1, 0), ms(2026, 3, 30, 0, 30)]),
        # Fall back (2026-10-25, 03:00 CEST -> 02:00 CET): 02:30 happens twice; it fires once, the first time.
        (ms(2026, 10, 23, 12), [ms(2026, 10, 24, 0, 30), ms(2026, 10, 25, 0, 30), ms(2026, 10, 26, 1, 30)]),
    ],
)
async def test_a_schedule_in_a_named_zone_keeps_local_time_across_dst(start: int, local_expected: list[int]) -> None:
    clock = ManualClock(start)
    async with await Runtime.start(InMemorySessionStore(), agents=AGENTS, clock=clock) as rt:
        h = await rt.create_session("napper")
        sched = await h.schedule("30 2 * * *", "nightly", tz="Europe/Berlin")
        assert sched.next_at == local_expected[0]
        for i, at in enumerate(local_expected, 1):
            clock.set(at + 1)  # also past the repeated hour, which must not fire a second time
            await until(lambda n=i: _settled(rt, h.id, n))  # type: ignore[misc]
            await quiet_after(rt, lambda: clock.advance(HOUR * 1.5))
        assert await _fire_times(rt, h.id, sched.id) == local_expected


async def test_stateless_schedules_run_each_firing_on_a_session_of_its_own() -> None:
    clock = ManualClock(ms(2026, 1, 1))
    async with await Runtime.start(InMemorySessionStore(), agents=AGENTS, clock=clock) as rt:
        sched = await rt.create_schedule("0 * * * *", NotificationMessage(title="cron", body="go"), agent="napper")
        assert sched.session_id is None
        clock.set(ms(2026, 1, 1, 1))
        sub = firing_submission_id(sched.id, ms(2026, 1, 1, 1))
        await until(lambda: _settled(rt, sub, 1))
        child = await rt.session(sub)
        assert child.record.metadata == {"schedule_id": sched.id}
        (turn,) = await rt.store.list_turns(sub)
        assert turn.kind == "notification" and turn.message.role == "system"


async def test_bad_schedules_are_refused_with_the_reason() -> None:
    clock = ManualClock(ms(2026, 1, 1))
    async with await Runtime.start(InMemorySessionStore(), agents=AGENTS, clock=clock) as rt:
        h = await rt.create_session("napper")
        for cron, tz, reason in [
            ("61 * * * *", "UTC", "invalid cron"),
            ("* * *", "UTC", "invalid cron"),
            ("", "UTC", "cron expression"),
            ("* * * * *", "Mars/Olympus", "unknown time zone"),
        ]:
            with pytest.raises(ValueError, match=reason):
                await h.schedule(cron, "x", tz=tz)
        with pytest.raises(ValueError, match="end_at"):
            await h.schedule("0 9 * * *", "x", end_at=ms(2026, 1, 1, 8))
        with pytest.raises(ValueError, match="agent"):
            await rt.create_schedule("* * * * *", "x", agent="nobody")
        assert await rt.schedules() == []


async def test_a_schedule_ends_at_end_at() -> None:
    clock = ManualClock(ms(2026, 1, 1))
    async with await Runtime.start(InMemorySessionStore(), agents=AGENTS, clock=clock) as rt:
        h = await rt.create_session("napper")
        sched = await h.schedule("0 * * * *", "tick", end_at=ms(2026, 1, 1, 1, 30))
        clock.set(ms(2026, 1, 1, 1))
        await until(lambda: _settled(rt, h.id, 1))
        assert (await sched.refresh()).next_at is None
        await quiet_after(rt, lambda: clock.set(ms(2026, 1, 1, 3)))
        assert len(await _turns(rt, h.id)) == 1


async def test_a_schedule_is_updated_in_place_and_re_timed_from_now() -> None:
    clock = ManualClock(ms(2026, 1, 1, 8, 58))
    async with await Runtime.start(InMemorySessionStore(), agents=AGENTS, clock=clock) as rt:
        h = await rt.create_session("napper")
        sched = await h.schedule("0 9 * * *", "report please")
        # A new expression: the next fire time is the first of it after now; 09:00 passes quietly.
        await sched.update(cron="30 9 * * *", message="the new report")
        assert (sched.cron, sched.next_at) == ("30 9 * * *", ms(2026, 1, 1, 9, 30))
        await quiet_after(rt, lambda: clock.set(ms(2026, 1, 1, 9)))
        assert await _turns(rt, h.id) == []
        clock.set(ms(2026, 1, 1, 9, 30))
        await until(lambda: _settled(rt, h.id, 1))
        (turn,) = await rt.store.list_turns(h.id)
        assert turn.message.text == "the new report" and turn.submission_id == firing_submission_id(
            sched.id, ms(2026, 1, 1, 9, 30)
        )
        # Disabled, a day passes with no firing; enabled again, it goes on from now (no catch-up).
        await sched.update(enabled=False)
        await quiet_after(rt, lambda: clock.set(ms(2026, 1, 2, 12)))
        assert len(await _turns(rt, h.id)) == 1
        await sched.update(enabled=True)
        assert (await sched.refresh()).next_at == ms(2026, 1, 3, 9, 30)
        # Metadata is replaced; a time zone re-times it; the id, session and origin stay.
        await sched.update(tz="Europe/Berlin", metadata={"team": "ops"})
        stored = (await sched.refresh()).record
        assert (stored.schedule_id, stored.session_id, stored.metadata) == (sched.id, h.id, {"team": "ops"})
        assert stored.next_at == ms(2026, 1, 3, 8, 30)  # 09:30 in Berlin, UTC+1 in January
        assert stored.message.origin is not None and stored.message.origin.kind == "user"


async def test_a_bad_update_writes_nothing_and_an_end_can_be_moved_or_removed() -> None:
    clock = ManualClock(ms(2026, 1, 1))
    async with await Runtime.start(InMemorySessionStore(), agents=AGENTS, clock=clock) as rt:
        h = await rt.create_session("napper")
        sched = await h.schedule("0 * * * *", "tick", end_at=ms(2026, 1, 1, 1, 30))
        before = sched.record
        cases: list[tuple[dict[str, Any], str]] = [
            ({"cron": "61 * * * *"}, "invalid cron"),
            ({"cron": " "}, "cron expression"),
            ({"tz": "Mars/Olympus"}, "unknown time zone"),
            ({"end_at": ms(2025, 12, 31)}, "end_at"),
        ]
        for kwargs, reason in cases:
            with pytest.raises(ValueError, match=reason):
                await sched.update(**kwargs)
            assert (await sched.refresh()).record == before
        clock.set(ms(2026, 1, 1, 1))
        await until(lambda: _settled(rt, h.id, 1))
        assert (await sched.refresh()).next_at is None  # ended at end_at
        await sched.update(end_at=None)  # no end: it fires again, from now
        assert (sched.record.end_at, sched.next_at) == (None, ms(2026, 1, 1, 2))
        clock.set(ms(2026, 1, 1, 2))
        await until(lambda: _settled(rt, h.id, 2))
        assert await sched.cancel() is True
        with pytest.raises(ScheduleNotFound):
            await sched.update(enabled=False)
