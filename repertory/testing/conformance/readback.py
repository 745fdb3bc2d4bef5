"""``ReadbackConformance``: a row that cannot be read back as written never fails a listing, and stays deletable.

A store reads its records back from JSON text. Some text it holds may not read back the way it
was written: a record nested deeper than pydantic's JSON parser goes (pydantic validates, and so
wrote, about 254 levels but parses JSON text to about 200), a free-form field that no longer
validates, or text that is no JSON at all (a hand edit, a cut write). The contract, for every
table whose rows are records (sessions, turns, runs, schedules, webhook deliveries):

- a record too deep for the fast parser reads back whole, by id and in every listing;
- a session, schedule or delivery whose ``metadata`` cannot be read reads back without it;
- a row that cannot be read at all is ``RecordUnreadable`` by its id, and every listing (every
  count, every due query) skips it and goes on with the other rows;
- and each of those rows is deleted by the store's ordinary delete.

Rows are written by hand through the probe (``StoreProbe.overwrite_record``); without one the
tests skip.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from repertory.core.messages import ModelMessage
from repertory.core.store import TreeStore
from repertory.core.timing import ScheduleRecord, TimeStore, WebhookRecord
from repertory.errors import RecordUnreadable
from repertory.testing.conformance._looks import Conformance, Looks
from repertory.testing.conformance.records import commit, history_of
from repertory.testing.conformance.tree_records import session_record, turn_record

__all__ = ["READ_BACK_DEPTH", "UNREADABLE_DEPTH", "ReadbackConformance", "nested"]

READ_BACK_DEPTH = 230
"""A nesting pydantic wrote but its JSON parser refuses: what a server without a depth limit stored."""
UNREADABLE_DEPTH = 300
"""A nesting pydantic does not validate at all: the field holding it cannot be read back."""
BROKEN = '{"cut short'
"""Text that is no JSON: the row cannot be read at all."""


def nested(depth: int, leaf: Any = "leaf") -> dict[str, Any]:
    """``{"a": {"a": ... leaf}}`` with ``depth`` objects, built without recursion."""
    value: Any = leaf
    for _ in range(depth):
        value = {"a": value}
    return dict(value)


def _depth(value: Any) -> int:
    levels = 0
    while isinstance(value, dict) and "a" in value:
        value, levels = value["a"], levels + 1
    return levels


def _with_metadata(record: Any, metadata: dict[str, Any]) -> str:
    """The record's JSON with ``metadata`` in place of its own (``json``, which writes any depth)."""
    value = record.model_dump(mode="json")
    value["metadata"] = metadata
    return json.dumps(value)


def _schedule(schedule_id: str, next_at: int | None, **kw: Any) -> ScheduleRecord:
    return ScheduleRecord(
        schedule_id=schedule_id,
        session_id=None,
        agent="a",
        cron="* * * * *",
        message=ModelMessage.user("tick"),
        next_at=next_at,
        **kw,
    )


def _webhook(delivery_id: str) -> WebhookRecord:
    return WebhookRecord(delivery_id=delivery_id, session_id="s1", submission_id="sub", run_id="r1", url="u")


class ReadbackConformance(Conformance):
    """Subclass with a ``store`` fixture (an open, empty ``TreeStore`` and ``TimeStore``) and a ``probe``."""

    async def _sessions(self, store: TreeStore) -> None:
        """Three roots of alice (``good``, ``bad``, ``late``) and a child of ``bad``."""
        for sid, at in (("good", 1_000), ("bad", 1_001)):
            await store.create_session(session_record(sid, owner="alice", created_at=at, metadata={"k": sid}))
        await store.create_session(session_record("child", parent="bad", kind="spawned", created_at=1_002))
        await store.create_session(session_record("late", owner="alice", created_at=1_003))

    async def test_a_session_too_deep_for_the_parser_reads_back_whole(self, store: Any, looks: Looks) -> None:
        await self._sessions(store)
        stored = await store.load_session("bad")
        await looks.overwrite_record("sessions", "bad", _with_metadata(stored, nested(READ_BACK_DEPTH)))
        loaded = await store.load_session("bad")
        assert loaded is not None and _depth(loaded.metadata) == READ_BACK_DEPTH
        assert [r.session_id for r in await store.list_sessions()] == ["good", "bad", "child", "late"]
        assert [r.session_id for r in await store.page_sessions(owner="alice")] == ["late", "bad", "good"]
        (listed,) = [r for r in await store.list_sessions() if r.session_id == "bad"]
        assert _depth(listed.metadata) == READ_BACK_DEPTH
        amended = await store.amend_session("bad", agent="other")
        assert amended.agent == "other" and _depth(amended.metadata) == READ_BACK_DEPTH
        assert (await store.delete_sessions(["bad"])).sessions == 1
        assert await store.load_session("bad") is None

    async def test_a_session_whose_metadata_cannot_be_read_reads_back_without_it(
        self, store: Any, looks: Looks
    ) -> None:
        await self._sessions(store)
        stored = await store.load_session("bad")
        await looks.overwrite_record("sessions", "bad", _with_metadata(stored, nested(UNREADABLE_DEPTH)))
        loaded = await store.load_session("bad")
        assert loaded is not None and loaded.metadata == {} and loaded.owner == "alice"
        assert [r.session_id for r in await store.page_sessions(owner="alice")] == ["late", "bad", "good"]
        await store.update_session(loaded.model_copy(update={"title": "kept"}))
        assert [c.session_id for c in await store.list_children("bad")] == ["child"]
        assert (await store.delete_sessions(["bad", "child"])).sessions == 2
        assert [r.session_id for r in await store.list_sessions()] == ["good", "late"]

    async def test_a_session_that_cannot_be_read_is_skipped_by_listings_and_deleted_by_id(
        self, store: Any, looks: Looks
    ) -> None:
        await self._sessions(store)
        await looks.overwrite_record("sessions", "child", BROKEN)
        await looks.overwrite_record("sessions", "late", BROKEN)
        with pytest.raises(RecordUnreadable) as caught:
            await store.load_session("late")
        assert caught.value.row_id == "late"
        assert [r.session_id for r in await store.list_sessions()] == ["good", "bad"]
        assert [r.session_id for r in await store.list_sessions(roots_only=True)] == ["good", "bad"]
        assert [r.session_id for r in await store.page_sessions()] == ["bad", "good"]
        assert [r.session_id for r in await store.page_sessions(owner="alice", search="l")] == []
        assert await store.list_children("bad") == []
        assert await store.session_counts(owner="alice") == {"running": 0, "suspended": 0, "error": 0}
        assert (await store.delete_sessions(["late", "child"])).sessions == 2
        assert await store.load_session("late") is None
        assert [r.session_id for r in await store.list_sessions()] == ["good", "bad"]

    async def test_turns_and_runs_that_cannot_be_read_are_skipped_by_listings(self, store: Any, looks: Looks) -> None:
        await self._sessions(store)
        for sid in ("good", "bad"):
            await store.add_turn(turn_record(sid, f"{sid}-1"))
            await commit(store, history_of(f"hi {sid}"), thread_id=sid, run_id=f"run-{sid}")
        await looks.overwrite_record("turns", "bad-1", BROKEN)
        await looks.overwrite_record("runs", "run-bad", BROKEN)
        assert [t.submission_id for t in await store.list_open_turns()] == ["good-1"]
        assert await store.list_turns("bad") == []
        assert await store.list_turns("bad", statuses=["queued"]) == []
        with pytest.raises(RecordUnreadable):
            await store.load_turn("bad-1")
        assert [r.run_id for r in await store.list_runs()] == ["run-good"]
        assert await store.list_runs("bad", limit=1) == []
        # Status listings answer too (whether "bad" reads running, from its turn's status column, or
        # idle, its turn unread, is the store's: the contract is that nothing fails).
        assert (await store.session_counts())["running"] >= 1
        idle = {r.session_id for r in await store.page_sessions(status="idle")}
        assert {"late", "child"} <= idle and "good" not in idle
        with pytest.raises(RecordUnreadable):
            await store.load_run("run-bad")
        good = await store.load_run("run-good")
        deep = good.model_dump(mode="json")
        deep["scratch"] = nested(READ_BACK_DEPTH)
        await looks.overwrite_record("runs", "run-good", json.dumps(deep))
        loaded = await store.load_run("run-good")
        assert loaded is not None and _depth(loaded.scratch) == READ_BACK_DEPTH
        assert (await store.delete_sessions(["bad"])).sessions == 1
        assert [r.run_id for r in await store.list_runs()] == ["run-good"]

    async def test_schedules_that_cannot_be_read_never_stop_the_others(self, store: Any, looks: Looks) -> None:
        assert isinstance(store, TimeStore)
        for i, sid in enumerate(("early", "deep", "lost", "broken", "late")):
            await store.add_schedule(_schedule(sid, 100 + i, owner="alice", metadata={"k": sid}))
        for sid, depth in (("deep", READ_BACK_DEPTH), ("lost", UNREADABLE_DEPTH)):
            stored = await store.load_schedule(sid)
            await looks.overwrite_record("schedules", sid, _with_metadata(stored, nested(depth)))
        await looks.overwrite_record("schedules", "broken", BROKEN)
        deep = await store.load_schedule("deep")
        assert deep is not None and _depth(deep.metadata) == READ_BACK_DEPTH
        lost = await store.load_schedule("lost")
        assert lost is not None and lost.metadata == {} and lost.owner == "alice"
        with pytest.raises(RecordUnreadable):
            await store.load_schedule("broken")
        assert [s.schedule_id for s in await store.list_schedules()] == ["early", "deep", "lost", "late"]
        assert [s.schedule_id for s in await store.due_schedules(1_000, 10)] == ["early", "deep", "lost", "late"]
        # The broken row no longer holds a place in a bounded due query: the others all fire.
        assert [s.schedule_id for s in await store.due_schedules(1_000, 4)] == ["early", "deep", "lost", "late"]
        assert await store.advance_schedule("deep", 101, 5_000, 7)
        assert await store.update_schedule(lost.model_copy(update={"enabled": False}))
        for sid in ("deep", "lost", "broken"):
            assert await store.delete_schedule(sid)
        assert [s.schedule_id for s in await store.list_schedules()] == ["early", "late"]

    async def test_webhook_deliveries_that_cannot_be_read_never_stop_the_others(self, store: Any, looks: Looks) -> None:
        assert isinstance(store, TimeStore)
        for delivery_id in ("w1", "w2", "w3"):
            await store.add_webhook(_webhook(delivery_id))
        stored = await store.load_webhook("w1")
        await looks.overwrite_record("webhooks", "w1", _with_metadata(stored, nested(READ_BACK_DEPTH)))
        await looks.overwrite_record("webhooks", "w2", BROKEN)
        assert [w.delivery_id for w in await store.list_webhooks(status="pending")] == ["w1", "w3"]
        loaded = await store.load_webhook("w1")
        assert loaded is not None and _depth(loaded.metadata) == READ_BACK_DEPTH
        with pytest.raises(RecordUnreadable):
            await store.load_webhook("w2")
        assert await store.claim_webhook("w1", 0, 10**15, 10**15 + 1)
        await store.finish_webhook("w1", "delivered", 0, None, 5)
        assert [w.delivery_id for w in await store.list_webhooks(status="delivered")] == ["w1"]
