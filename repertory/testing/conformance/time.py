"""``TimeConformance``: the ``TimeStore`` contract (timers, schedules, webhook deliveries) as a test class.

Due queries return rows by due time, earliest first, bounded; compare-and-set methods let exactly
one of several racing callers win; a timer re-armed with a newer token is never deleted by the
older one; rows survive being read (every read is a copy).
"""

from __future__ import annotations

import asyncio
from typing import Any

from repertory.core.messages import ModelMessage
from repertory.core.protocols import protocol_gap
from repertory.core.timing import ScheduleRecord, TimerRecord, TimeStore, WebhookRecord, firing_webhook_id
from repertory.errors import CommitConflict
from repertory.testing.conformance._looks import Conformance
from repertory.testing.conformance.tree_records import session_record

__all__ = ["TimeConformance"]


def _timer(run_id: str, wake_at: int, token: str = "tok", session_id: str = "s1") -> TimerRecord:
    return TimerRecord(run_id=run_id, session_id=session_id, token=token, wake_at=wake_at, due_at=wake_at)


def _schedule(schedule_id: str, next_at: int | None, session_id: str | None = "s1", **kw: Any) -> ScheduleRecord:
    return ScheduleRecord(
        schedule_id=schedule_id,
        session_id=session_id,
        agent="a",
        cron="* * * * *",
        message=ModelMessage.user("tick \x00 with a NUL"),
        next_at=next_at,
        **kw,
    )


def _webhook(delivery_id: str, submission_id: str = "sub1") -> WebhookRecord:
    return WebhookRecord(delivery_id=delivery_id, session_id="s1", submission_id=submission_id, run_id="r1", url="u")


class TimeConformance(Conformance):
    """Subclass with a ``store`` fixture (an open, empty ``TimeStore``)."""

    async def test_every_store_is_a_time_store(self, store: Any) -> None:
        assert isinstance(store, TimeStore), protocol_gap(store, TimeStore)

    async def test_deleting_a_session_drops_its_timers_and_schedules(self, store: Any) -> None:
        """``delete_sessions`` (the tree's delete) takes the session's timers and schedules with it, and no others."""
        for sid in ("s1", "s2"):
            await store.create_session(session_record(sid))
        await store.arm_timer(_timer("r1", 100, session_id="s1"))
        await store.arm_timer(_timer("r2", 100, session_id="s2"))
        await store.add_schedule(_schedule("c1", 100, session_id="s1"))
        await store.add_schedule(_schedule("c2", 100, session_id="s2"))
        await store.add_schedule(_schedule("c3", 100, session_id=None))  # stateless: nobody's session
        deleted = await store.delete_sessions(["s1"])
        assert (deleted.timers, deleted.schedules) == (1, 1)
        assert [t.run_id for t in await store.list_timers()] == ["r2"]
        assert sorted(s.schedule_id for s in await store.list_schedules()) == ["c2", "c3"]

    # -- timers -------------------------------------------------------------------------------------

    async def test_due_timers_come_earliest_first_and_bounded(self, store: TimeStore) -> None:
        for i, at in enumerate([500, 100, 300, 900]):
            await store.arm_timer(_timer(f"r{i}", at))
        assert [t.run_id for t in await store.due_timers(400, 10)] == ["r1", "r2"]
        assert [t.run_id for t in await store.due_timers(1000, 2)] == ["r1", "r2"]
        assert await store.due_timers(99, 10) == []
        assert await store.next_timer_due() == 100
        assert [t.wake_at for t in await store.list_timers()] == [100, 300, 500, 900]
        assert await store.list_timers(session_id="other") == []
        assert len(await store.list_timers(limit=1)) == 1

    async def test_an_empty_store_has_no_next_timer(self, store: TimeStore) -> None:
        assert await store.next_timer_due() is None
        assert await store.due_timers(10**15, 10) == []

    async def test_arming_again_replaces_the_runs_timer(self, store: TimeStore) -> None:
        await store.arm_timer(_timer("r", 100, token="old"))
        await store.arm_timer(_timer("r", 200, token="new"))
        (only,) = await store.list_timers()
        assert (only.token, only.wake_at) == ("new", 200)
        await store.delete_timer("r", "old")  # the older token removes nothing
        assert len(await store.list_timers()) == 1
        await store.delete_timer("r", "new")
        assert await store.list_timers() == []

    async def test_claiming_a_timer_is_a_compare_and_set(self, store: TimeStore) -> None:
        await store.arm_timer(_timer("r", 100))
        assert await store.claim_timer("r", "tok", 100, 5_000)
        assert not await store.claim_timer("r", "tok", 100, 6_000)  # moved already
        assert not await store.claim_timer("r", "other", 5_000, 6_000)  # wrong token
        assert await store.due_timers(4_999, 10) == []
        (taken,) = await store.due_timers(5_000, 10)
        assert (taken.wake_at, taken.due_at) == (100, 5_000)

    async def test_of_racing_claims_exactly_one_wins(self, store: TimeStore) -> None:
        await store.arm_timer(_timer("r", 100))
        wins = await asyncio.gather(*(store.claim_timer("r", "tok", 100, 1_000 + i) for i in range(8)))
        assert sum(wins) == 1

    # -- schedules ----------------------------------------------------------------------------------

    async def test_schedules_round_trip_and_list_oldest_first(self, store: TimeStore) -> None:
        await store.add_schedule(_schedule("b", 200, metadata={"k": [1, "x"]}, tz="Europe/Paris"))
        await store.add_schedule(_schedule("a", 100, session_id=None))
        with_nul = await store.load_schedule("b")
        assert with_nul is not None and with_nul.message.text == "tick \x00 with a NUL"
        assert (with_nul.metadata, with_nul.tz) == ({"k": [1, "x"]}, "Europe/Paris")
        assert [s.schedule_id for s in await store.list_schedules()] == ["b", "a"]
        assert [s.schedule_id for s in await store.list_schedules(session_id="s1")] == ["b"]
        assert await store.load_schedule("missing") is None
        try:
            await store.add_schedule(_schedule("a", 5))
        except CommitConflict:
            pass
        else:
            raise AssertionError("a second schedule with a known id was accepted")
        loaded = await store.load_schedule("a")
        assert loaded is not None and loaded.next_at == 100

    async def test_due_schedules_skip_disabled_and_ended_ones(self, store: TimeStore) -> None:
        await store.add_schedule(_schedule("late", 300))
        await store.add_schedule(_schedule("early", 100))
        await store.add_schedule(_schedule("off", 50, enabled=False))
        await store.add_schedule(_schedule("ended", None))
        assert [s.schedule_id for s in await store.due_schedules(1_000, 10)] == ["early", "late"]
        assert [s.schedule_id for s in await store.due_schedules(1_000, 1)] == ["early"]
        assert await store.next_schedule_due() == 100

    async def test_advancing_a_schedule_is_a_compare_and_set(self, store: TimeStore) -> None:
        await store.add_schedule(_schedule("s", 100))
        wins = await asyncio.gather(*(store.advance_schedule("s", 100, 200 + i, 7) for i in range(6)))
        assert sum(wins) == 1
        moved = await store.load_schedule("s")
        assert moved is not None and moved.next_at is not None and 200 <= moved.next_at < 206
        assert moved.updated_at == 7
        assert await store.advance_schedule("s", moved.next_at, None, 8)
        assert await store.due_schedules(10**15, 10) == []
        assert not await store.advance_schedule("missing", 1, 2, 3)

    async def test_update_and_delete_schedules(self, store: TimeStore) -> None:
        await store.add_schedule(_schedule("s", 100))
        current = await store.load_schedule("s")
        assert current is not None
        assert await store.update_schedule(current.model_copy(update={"enabled": False, "cron": "0 * * * *"}))
        changed = await store.load_schedule("s")
        assert changed is not None and (changed.enabled, changed.cron) == (False, "0 * * * *")
        assert await store.due_schedules(1_000, 10) == []
        assert not await store.update_schedule(_schedule("missing", 1))
        assert await store.delete_schedule("s")
        assert not await store.delete_schedule("s")
        assert await store.list_schedules() == []

    async def test_schedules_are_counted_per_owner(self, store: TimeStore) -> None:
        """``count_schedules`` counts one owner's rows (``None``: the unowned), through updates and deletes."""
        await store.add_schedule(_schedule("a1", 100, owner="alice"))
        await store.add_schedule(_schedule("a2", 200, session_id=None, owner="alice"))
        await store.add_schedule(_schedule("b1", 100, owner="bob"))
        await store.add_schedule(_schedule("n1", 100))
        assert [await store.count_schedules(o) for o in ("alice", "bob", None, "carol")] == [2, 1, 1, 0]
        current = await store.load_schedule("a1")
        assert current is not None
        assert await store.update_schedule(current.model_copy(update={"enabled": False}))
        assert await store.count_schedules("alice") == 2  # a disabled schedule still counts: it is kept
        assert await store.delete_schedule("a2")
        assert [await store.count_schedules(o) for o in ("alice", "bob", None)] == [1, 1, 1]

    async def test_schedules_are_listed_per_owner(self, store: TimeStore) -> None:
        """``list_schedules(owner=)`` lists one owner's schedules, oldest first, also within a session."""
        await store.add_schedule(_schedule("a1", 100, owner="alice"))
        await store.add_schedule(_schedule("b1", 100, owner="bob"))
        await store.add_schedule(_schedule("a2", 200, session_id=None, owner="alice"))
        await store.add_schedule(_schedule("n1", 100))
        assert [s.schedule_id for s in await store.list_schedules(owner="alice")] == ["a1", "a2"]
        assert [s.schedule_id for s in await store.list_schedules(owner="bob")] == ["b1"]
        assert await store.list_schedules(owner="carol") == []
        assert [s.schedule_id for s in await store.list_schedules("s1", owner="alice")] == ["a1"]
        assert [s.schedule_id for s in await store.list_schedules()] == ["a1", "b1", "a2", "n1"]

    # -- webhooks -----------------------------------------------------------------------------------

    async def test_webhooks_round_trip_and_filter(self, store: TimeStore) -> None:
        await store.add_webhook(_webhook("w1", "sub1"))
        await store.add_webhook(_webhook("w2", "sub2"))
        try:
            await store.add_webhook(_webhook("w1"))
        except CommitConflict:
            pass
        else:
            raise AssertionError("a second delivery with a known id was accepted")
        assert [w.delivery_id for w in await store.list_webhooks()] == ["w1", "w2"]
        assert [w.delivery_id for w in await store.list_webhooks(submission_id="sub2")] == ["w2"]
        assert [w.delivery_id for w in await store.list_webhooks(status="pending")] == ["w1", "w2"]
        assert await store.list_webhooks(status="delivered") == []
        assert await store.load_webhook("nope") is None
        firing = firing_webhook_id("sched_1%", 60_000)  # LIKE's wildcards in an id stay literal
        await store.add_webhook(_webhook(firing, "cron-sched_1%-60000"))
        await store.add_webhook(_webhook("cron-like-but-not-a-firing", "sub3"))
        assert [w.delivery_id for w in await store.list_webhooks(status="pending", firings=True)] == [firing]
        assert [w.delivery_id for w in await store.list_webhooks(firings=True, submission_id="sub1")] == []

    async def test_claiming_an_attempt_is_a_compare_and_set(self, store: TimeStore) -> None:
        await store.add_webhook(_webhook("w"))
        wins = await asyncio.gather(*(store.claim_webhook("w", 0, 10, 100) for _ in range(6)))
        assert sum(wins) == 1
        taken = await store.load_webhook("w")
        assert taken is not None and (taken.attempts, taken.due_at) == (1, 100)
        assert not await store.claim_webhook("w", 1, 99, 200)  # its lease runs until 100
        await store.finish_webhook("w", "pending", 150, "HTTP 500", 11)
        assert not await store.claim_webhook("w", 1, 149, 300)
        assert await store.claim_webhook("w", 1, 150, 300)
        await store.finish_webhook("w", "delivered", 300, None, 12)
        done = await store.load_webhook("w")
        assert done is not None and (done.status, done.attempts, done.updated_at) == ("delivered", 2, 12)
        assert not await store.claim_webhook("w", 2, 10**12, 10**13)  # delivered: never again
        assert [w.delivery_id for w in await store.list_webhooks(status="delivered")] == ["w"]
