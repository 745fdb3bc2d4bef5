"""``TreeConformance``: the ``TreeStore`` contract (sessions, turns, events; docs/guides/stores.md) as a test class.

Why one module past 600 lines: it is one contract (the ``TreeStore`` protocol), and a store author
subclasses one class to test all of it; the helpers it shares are in ``_looks`` and ``probe``.

Sessions and their thread created together, the tree's parent/child order, turn queues numbered
per session, the event log appended gap-free (alone or carried by a commit), and every refusal
leaving everything as it was. "Nothing changed" is checked by comparing a snapshot of all the tree
methods can see (plus runs and, with a probe, history rows) before and after.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from repertory.core.history import MessageHistory
from repertory.core.messages import ModelMessage
from repertory.core.protocols import protocol_gap
from repertory.core.state import ErrorInfo, RunState
from repertory.core.store import TreeStore
from repertory.core.tree import LineageKind, SessionEvent, SessionRecord, TurnRecord, TurnStatus
from repertory.errors import CommitConflict, StoreError
from repertory.testing.conformance._looks import Conformance, Looks
from repertory.testing.conformance.listing import SessionListingConformance
from repertory.testing.conformance.records import commit, history_of, pointers, rich_messages
from repertory.testing.conformance.tree_records import event, events, session_record, turn_record
from repertory.testing.conformance.turn_commits import TurnCommitConformance

__all__ = ["TreeConformance", "event", "events", "session_record", "turn_record"]


def _dumps(records: list[Any]) -> list[dict[str, Any]]:
    return [r.model_dump(mode="json") for r in records]


async def _tree_snapshot(store: TreeStore, *session_ids: str) -> dict[str, Any]:
    """Everything the tree methods can see of these sessions, plus every open turn."""
    out: dict[str, Any] = {"open": _dumps(await store.list_open_turns())}
    for sid in session_ids:
        session = await store.load_session(sid)
        thread = await store.load_thread(sid)
        out[sid] = {
            "session": None if session is None else session.model_dump(mode="json"),
            "thread": None if thread is None else thread.model_dump(mode="json"),
            "children": _dumps(await store.list_children(sid)),
            "turns": _dumps(await store.list_turns(sid)),
            "events": _dumps(await store.load_events(sid)),
            "last": await store.last_event_seq(sid),
        }
    return out


async def _full_snapshot(store: TreeStore, looks: Looks, *session_ids: str) -> dict[str, Any]:
    """The tree snapshot plus runs and history rows: what a failed commit must leave as it was."""
    return {
        "tree": await _tree_snapshot(store, *session_ids),
        "runs": _dumps(await store.list_runs()),
        "rows": await looks.history_rows(),
    }


STATUSES: list[TurnStatus] = ["queued", "running", "suspended", "done", "error", "cancelled"]


async def _turns_with_statuses(store: TreeStore, session_id: str, statuses: list[TurnStatus]) -> list[TurnRecord]:
    out = []
    for i, status in enumerate(statuses, start=1):
        stored = await store.add_turn(turn_record(session_id, f"{session_id}-{i}"))
        if status != "queued":
            stored = stored.model_copy(update={"status": status})
            await store.update_turn(stored)
        out.append(stored)
    return out


BAD_APPENDS: dict[str, tuple[list[int], list[SessionEvent]]] = {
    # name: (seqs stored first in session "s", the batch that must be refused whole)
    "starts-at-two": ([], events("s", 2, 3)),
    "starts-at-zero": ([], events("s", 0, 1)),
    "repeats-the-last": ([1, 2, 3], events("s", 3, 4)),
    "repeats-an-old-one": ([1, 2, 3], events("s", 1)),
    "gap-after-stored": ([1, 2], events("s", 4)),
    "gap-inside-the-batch": ([1], events("s", 2, 3, 5, 6)),
    "only-the-last-repeats-within-the-batch": ([1], events("s", 2, 3, 4, 4)),
    "only-the-last-skips": ([1], events("s", 2, 3, 4, 6)),
    "only-the-last-goes-back": ([1], events("s", 2, 3, 4, 2)),
    "other-session-last-is-wrong": ([1], [event("t", 1), event("s", 2), event("t", 2), event("t", 4)]),
    "other-session-repeats": ([1], [event("s", 2), event("t", 1), event("t", 1)]),
}


BIG = "x" * 1_000_000


async def _committed_session(store: TreeStore) -> MessageHistory:
    """Session ``s`` with one commit (run ``r``) and events 1..2; returns its history."""
    await store.create_session(session_record("s"))
    history = history_of("hi")
    run, thread = pointers(history, thread_id="s", run_id="r")
    await store.commit_session(run=run, thread=thread, history=history, events=events("s", 1, 2))
    return history


CONFLICTS = ["moved-head", "base-none-on-a-head", "finished-run", "pointers-disagree"]


WRONG_COMMIT_EVENTS: dict[str, list[SessionEvent]] = {
    "repeats-a-stored-seq": events("s", 2, 3),
    "leaves-a-gap": events("s", 4),
    "starts-again-at-one": events("s", 1),
    "only-the-last-is-wrong": events("s", 3, 4, 5, 7),
    "only-the-last-repeats": events("s", 3, 4, 4),
}


CLOSED_CALLS: dict[str, Callable[[TreeStore], Awaitable[object]]] = {
    "create_session": lambda s: s.create_session(session_record("new")),
    "load_session": lambda s: s.load_session("s"),
    "update_session": lambda s: s.update_session(session_record("s", title="late")),
    "list_children": lambda s: s.list_children("s"),
    "add_turn": lambda s: s.add_turn(turn_record("s", "late")),
    "update_turn": lambda s: s.update_turn(turn_record("s", "t1", seq=1, status="running")),
    "load_turn": lambda s: s.load_turn("t1"),
    "list_turns": lambda s: s.list_turns("s"),
    "list_turns_filtered": lambda s: s.list_turns("s", ["queued"]),
    "list_open_turns": lambda s: s.list_open_turns(),
    "append_events": lambda s: s.append_events(events("s", 2)),
    "load_events": lambda s: s.load_events("s"),
    "load_events_after": lambda s: s.load_events("s", after_seq=1, limit=1),
    "last_event_seq": lambda s: s.last_event_seq("s"),
    "page_sessions": lambda s: s.page_sessions(status="idle"),
    "session_counts": lambda s: s.session_counts(),
}


class TreeConformance(SessionListingConformance, TurnCommitConformance, Conformance):
    """Subclass with a ``store`` fixture (an open, empty ``TreeStore``) and optionally a ``probe``.

    ``TreeStore`` extends ``SessionStore``: a tree store's test class usually lists
    ``StoreConformance`` (and ``GroupCommitConformance``) too.
    """

    # -- sessions ----------------------------------------------------------------------------------

    async def test_every_store_is_a_tree_store(self, store: TreeStore) -> None:
        assert isinstance(store, TreeStore), protocol_gap(store, TreeStore)

    @pytest.mark.parametrize("kind", ["root", "spawned", "forked"])
    async def test_a_session_round_trips_every_field(self, store: TreeStore, kind: LineageKind) -> None:
        head: str | None = None
        if kind != "root":
            await store.create_session(session_record("p"))
        if kind == "forked":
            history = history_of("shared one", "shared two")
            await commit(store, history, thread_id="p", run_id="run-p")
            head = history.revision_id
        record = session_record(
            "s",
            parent=None if kind == "root" else "p",
            kind=kind,
            forked_at=head,
            agent="researcher",
            title="Ünïcødé title 🌳",
            model="openai:gpt-4o-mini",
            cwd="/tmp/work dir",
            created_at=1_234,
            updated_at=5_678,
        )
        await store.create_session(record, head=head)

        loaded = await store.load_session("s")
        assert loaded == record
        assert loaded is not record
        assert loaded.model_dump(mode="json") == record.model_dump(mode="json")
        assert loaded.lineage.kind == kind
        loaded.title = "mutated copy"
        assert (await store.load_session("s")) == record

    @pytest.mark.parametrize("with_head", [False, True], ids=["empty", "forked-head"])
    async def test_create_session_makes_its_thread_at_the_given_head(self, store: TreeStore, with_head: bool) -> None:
        head: str | None = None
        if with_head:
            history = history_of("a", "b")
            await commit(store, history, thread_id="p", run_id="run-p")
            head = history.revision_id
        await store.create_session(session_record("s", created_at=4_242), head=head)

        thread = await store.load_thread("s")
        assert thread is not None
        assert thread.thread_id == "s"
        assert thread.history_revision_id == head
        assert thread.created_at == 4_242
        if head is not None:
            shared = await store.load_history(head)
            assert shared is not None and [m.text for m in shared.messages] == ["a", "b"]

    async def test_a_new_sessions_empty_thread_takes_its_first_commit_with_base_none(self, store: TreeStore) -> None:
        await store.create_session(session_record("s"))
        history = history_of("first")
        await commit(store, history, thread_id="s", run_id="r")
        thread = await store.load_thread("s")
        assert thread is not None and thread.history_revision_id == history.revision_id
        # The thread keeps the creation time the session gave it.
        assert thread.created_at == 1_000

    async def test_a_forked_sessions_thread_continues_from_the_shared_head(self, store: TreeStore) -> None:
        parent = history_of("a")
        await commit(store, parent, thread_id="p", run_id="run-p")
        head = parent.revision_id
        assert head is not None
        await store.create_session(session_record("f", parent="p", kind="forked", forked_at=head), head=head)

        child = parent.branch()
        with pytest.raises(CommitConflict):
            await commit(store, child, thread_id="f", run_id="run-f")  # base None: the thread already has a head
        child.append(ModelMessage.user("only in the fork"))
        await commit(store, child, thread_id="f", run_id="run-f", base=head)
        loaded = await store.load_history(child.revision_id or "")
        assert loaded is not None and [m.text for m in loaded.messages] == ["a", "only in the fork"]
        parent_thread = await store.load_thread("p")
        assert parent_thread is not None and parent_thread.history_revision_id == head

    async def test_unknown_ids_read_as_empty(self, store: TreeStore) -> None:
        assert await store.load_session("nope") is None
        assert await store.load_turn("nope") is None
        assert await store.list_children("nope") == []
        assert await store.list_turns("nope") == []
        assert await store.list_open_turns() == []
        assert await store.load_events("nope") == []
        assert await store.last_event_seq("nope") == 0

    async def test_a_duplicate_session_id_conflicts_and_changes_nothing(self, store: TreeStore) -> None:
        history = history_of("x")
        await commit(store, history, thread_id="other", run_id="run-other")
        await store.create_session(session_record("p"))
        await store.create_session(session_record("q"))
        await store.create_session(session_record("s", parent="p", kind="spawned", title="original"))
        before = await _tree_snapshot(store, "p", "q", "s")

        duplicate = session_record("s", parent="q", kind="forked", forked_at=history.revision_id, title="imposter")
        with pytest.raises(CommitConflict):
            await store.create_session(duplicate, head=history.revision_id)
        with pytest.raises(CommitConflict):
            await store.create_session(session_record("s"))

        assert await _tree_snapshot(store, "p", "q", "s") == before
        assert await store.list_children("q") == []

    async def test_a_session_over_an_existing_thread_conflicts_and_changes_nothing(
        self, store: TreeStore, looks: Looks
    ) -> None:
        history = history_of("x")
        await commit(store, history, thread_id="t", run_id="r")
        await store.create_session(session_record("p"))
        before = await _full_snapshot(store, looks, "t", "p")

        with pytest.raises(CommitConflict):
            await store.create_session(session_record("t", parent="p", kind="spawned"))

        assert await _full_snapshot(store, looks, "t", "p") == before
        assert await store.load_session("t") is None
        assert await store.list_children("p") == []

    async def test_update_session_rewrites_its_mutable_fields(self, store: TreeStore) -> None:
        await store.create_session(session_record("p"))
        original = session_record("s", parent="p", kind="spawned", title="old", model="m1", cwd="/a")
        await store.create_session(original)

        updated = original.model_copy(update={"title": "new ✨", "model": "m2", "cwd": None, "updated_at": 9_999})
        await store.update_session(updated)

        assert await store.load_session("s") == updated
        assert await store.list_children("p") == [updated]
        cleared = updated.model_copy(update={"title": None, "model": None, "updated_at": 10_000})
        await store.update_session(cleared)
        assert await store.load_session("s") == cleared

    async def test_update_session_keeps_the_sessions_place_in_the_tree(self, store: TreeStore) -> None:
        """Only title, model, cwd and updated_at are mutable (``TreeStore.update_session``)."""
        await store.create_session(session_record("p"))
        original = session_record("s", parent="p", kind="spawned", agent="researcher", created_at=2_000)
        await store.create_session(original)
        await store.create_session(session_record("s2", parent="p", kind="spawned", created_at=3_000))

        # A record built from scratch: default lineage (root), another agent, a fresh creation time.
        rebuilt = SessionRecord(
            session_id="s",
            agent="other",
            root_id="s",
            title="t",
            model="m",
            cwd="/c",
            created_at=5_000,
            updated_at=6_000,
        )
        await store.update_session(rebuilt)

        expected = original.model_copy(update={"title": "t", "model": "m", "cwd": "/c", "updated_at": 6_000})
        assert await store.load_session("s") == expected
        assert [c.session_id for c in await store.list_children("p")] == ["s", "s2"]
        assert (await store.list_children("p"))[0] == expected

    async def test_update_of_an_unknown_session_fails_and_creates_nothing(self, store: TreeStore) -> None:
        with pytest.raises(StoreError):
            await store.update_session(session_record("ghost", parent="p", kind="spawned"))
        assert await store.load_session("ghost") is None
        assert await store.load_thread("ghost") is None
        assert await store.list_children("p") == []

    async def test_list_children_oldest_first_and_per_parent(self, store: TreeStore) -> None:
        await store.create_session(session_record("p"))
        await store.create_session(session_record("q"))
        # Spawned and forked mixed, parents interleaved, created a millisecond apart.
        await store.create_session(session_record("c1", parent="p", kind="forked", created_at=1_000))
        await store.create_session(session_record("q1", parent="q", kind="spawned", created_at=1_001))
        await store.create_session(session_record("c2", parent="p", kind="spawned", created_at=1_002))
        await store.create_session(session_record("g1", parent="c1", kind="spawned", root="p", created_at=1_003))
        await store.create_session(session_record("c3", parent="p", kind="spawned", created_at=1_004))
        await store.create_session(session_record("q2", parent="q", kind="forked", created_at=1_005))

        children = await store.list_children("p")
        assert [c.session_id for c in children] == ["c1", "c2", "c3"]
        assert children[0] == await store.load_session("c1")
        assert [c.session_id for c in await store.list_children("q")] == ["q1", "q2"]
        assert [c.session_id for c in await store.list_children("c1")] == ["g1"]
        assert await store.list_children("c2") == []
        assert await store.list_children("g1") == []

    async def test_children_created_within_one_millisecond_list_in_creation_order(self, store: TreeStore) -> None:
        # Ids are random within a millisecond, so neither the id nor the time may break the tie.
        await store.create_session(session_record("p"))
        made = ["c-m", "c-z", "c-a", "c-q", "c-b"]
        for i, sid in enumerate(made):
            kind: LineageKind = "forked" if i % 2 else "spawned"
            await store.create_session(session_record(sid, parent="p", kind=kind, created_at=7_000))
        assert [c.session_id for c in await store.list_children("p")] == made

    # -- turns -------------------------------------------------------------------------------------

    async def test_add_turn_numbers_each_sessions_queue_from_one(self, store: TreeStore) -> None:
        for sid in ("a", "b"):
            await store.create_session(session_record(sid))
        submitted = turn_record("a", "a1")
        first = await store.add_turn(submitted)
        assert first.seq == 1
        assert submitted.seq == 0  # the caller's record is not changed in place
        assert first == submitted.model_copy(update={"seq": 1})
        assert (await store.add_turn(turn_record("b", "b1"))).seq == 1
        assert (await store.add_turn(turn_record("a", "a2", seq=7))).seq == 2  # a caller's seq is ignored
        assert (await store.add_turn(turn_record("b", "b2"))).seq == 2
        assert (await store.add_turn(turn_record("a", "a3"))).seq == 3

        assert [(t.submission_id, t.seq) for t in await store.list_turns("a")] == [("a1", 1), ("a2", 2), ("a3", 3)]
        assert [(t.submission_id, t.seq) for t in await store.list_turns("b")] == [("b1", 1), ("b2", 2)]
        assert await store.load_turn("a1") == first

    async def test_a_duplicate_submission_id_conflicts_and_changes_nothing(self, store: TreeStore) -> None:
        for sid in ("a", "b"):
            await store.create_session(session_record(sid))
        first = await store.add_turn(turn_record("a", "dup", "original"))
        before = await _tree_snapshot(store, "a", "b")

        with pytest.raises(CommitConflict):
            await store.add_turn(turn_record("a", "dup", "again"))
        with pytest.raises(CommitConflict):
            await store.add_turn(turn_record("b", "dup", "elsewhere"))

        assert await _tree_snapshot(store, "a", "b") == before
        assert await store.load_turn("dup") == first
        # A refused turn consumed no seq.
        assert (await store.add_turn(turn_record("a", "next"))).seq == 2
        assert (await store.add_turn(turn_record("b", "b1"))).seq == 1

    async def test_update_turn_and_load_turn_round_trip_every_field(self, store: TreeStore) -> None:
        await store.create_session(session_record("s"))
        message = ModelMessage(role="system", parts=rich_messages()[2].parts)
        queued = await store.add_turn(
            turn_record(
                "s", "n1", kind="notification", output_type="pkg.mod:Answer", created_at=100, updated_at=100
            ).model_copy(update={"message": message})
        )
        assert await store.load_turn("n1") == queued

        running = queued.model_copy(update={"status": "running", "updated_at": 200})
        await store.update_turn(running)
        assert await store.load_turn("n1") == running

        failed = running.model_copy(
            update={
                "status": "error",
                "error": ErrorInfo(message="bööm\n", type="ValueError", stack="Traceback...\n  line 1"),
                "updated_at": 300,
            }
        )
        await store.update_turn(failed)
        loaded = await store.load_turn("n1")
        assert loaded == failed
        assert loaded is not None and loaded.model_dump(mode="json") == failed.model_dump(mode="json")
        assert await store.list_turns("s") == [failed]

        loaded.status = "done"  # a copy: changing it changes nothing stored
        assert await store.load_turn("n1") == failed

    async def test_update_turn_keeps_the_turns_place_in_the_queue(self, store: TreeStore) -> None:
        """``update_turn`` rewrites status, error and times; the seq the store assigned stays."""
        for sid in ("s", "other"):
            await store.create_session(session_record(sid))
        submitted = turn_record("s", "t1", "first")
        await store.add_turn(submitted)
        second = await store.add_turn(turn_record("s", "t2", "second"))

        # The caller's own record still has seq 0: updating from it must not move the turn.
        await store.update_turn(
            submitted.model_copy(
                update={
                    "status": "running",
                    "updated_at": 2_000,
                    "session_id": "other",
                    "message": ModelMessage.user("x"),
                }
            )
        )

        loaded = await store.load_turn("t1")
        assert loaded is not None
        assert (loaded.seq, loaded.session_id, loaded.message.text) == (1, "s", "first")
        assert (loaded.status, loaded.updated_at) == ("running", 2_000)
        assert [(t.submission_id, t.seq) for t in await store.list_turns("s")] == [("t1", 1), ("t2", 2)]
        assert await store.list_turns("other") == []
        assert [t.submission_id for t in await store.list_open_turns()] == ["t1", "t2"]
        assert await store.load_turn("t2") == second
        assert (await store.add_turn(turn_record("s", "t3"))).seq == 3

    async def test_update_of_an_unknown_turn_fails_and_creates_nothing(self, store: TreeStore) -> None:
        await store.create_session(session_record("s"))
        with pytest.raises(StoreError):
            await store.update_turn(turn_record("s", "ghost", seq=1, status="running"))
        assert await store.load_turn("ghost") is None
        assert await store.list_turns("s") == []
        assert await store.list_open_turns() == []

    async def test_list_turns_in_queue_order_with_and_without_a_status_filter(self, store: TreeStore) -> None:
        await store.create_session(session_record("s"))
        turns = await _turns_with_statuses(store, "s", ["done", "queued", "error", "running", "queued", "suspended"])

        assert await store.list_turns("s") == turns
        assert await store.list_turns("s", None) == turns
        assert await store.list_turns("s", ["queued"]) == [turns[1], turns[4]]
        assert await store.list_turns("s", ("running", "queued")) == [turns[1], turns[3], turns[4]]
        assert await store.list_turns("s", ["done", "error", "cancelled"]) == [turns[0], turns[2]]
        assert await store.list_turns("s", ["cancelled"]) == []
        assert await store.list_turns("s", []) == []
        assert await store.list_turns("s", STATUSES) == turns

    async def test_list_open_turns_spans_sessions_and_holds_only_queued_and_running(self, store: TreeStore) -> None:
        for sid in ("a", "b", "c", "d"):
            await store.create_session(session_record(sid))
        # Created in an order that is neither the session order nor the seq order of the result.
        c = await _turns_with_statuses(store, "c", ["suspended", "cancelled", "done", "error"])
        b = await _turns_with_statuses(store, "b", ["done", "running", "queued", "error", "queued"])
        a = await _turns_with_statuses(store, "a", ["queued", "done"])
        await _turns_with_statuses(store, "d", [])
        assert c  # none of c's turns is open

        expected = [a[0], b[1], b[2], b[4]]
        assert await store.list_open_turns() == expected

        # Finishing a turn takes it off the list; a new one joins it.
        await store.update_turn(b[1].model_copy(update={"status": "done"}))
        late = await store.add_turn(turn_record("c", "c-late"))
        assert await store.list_open_turns() == [a[0], b[2], b[4], late]

    # -- events ------------------------------------------------------------------------------------

    async def test_append_and_load_events(self, store: TreeStore) -> None:
        await store.append_events(events("s", 1, 2, 3))
        await store.append_events([])  # nothing to do
        await store.append_events(events("s", 4, 5))
        stored = events("s", 1, 2, 3, 4, 5)

        assert await store.load_events("s") == stored
        assert await store.load_events("s", after_seq=0) == stored
        assert await store.load_events("s", after_seq=2) == stored[2:]
        assert await store.load_events("s", 2, 2) == stored[2:4]
        assert await store.load_events("s", after_seq=0, limit=1) == stored[:1]
        assert await store.load_events("s", after_seq=4, limit=10) == stored[4:]
        assert await store.load_events("s", after_seq=5) == []
        assert await store.load_events("s", after_seq=99) == []
        assert await store.load_events("s", limit=0) == []
        assert await store.last_event_seq("s") == 5
        assert await store.last_event_seq("other") == 0
        assert await store.load_events("other") == []

    async def test_a_turn_ends_together_with_its_events(self, store: TreeStore) -> None:
        # A turn's end and its turn.completed are one write: found by the chaos soak, where a
        # SIGKILL between two writes left a done turn whose log never said so.
        await store.append_events(events("s", 1))
        stored = await store.add_turn(turn_record("s", "t1"))
        completed = event("s", 2, "turn.completed")
        await store.update_turn(stored.model_copy(update={"status": "done"}), events=[completed])
        turn = await store.load_turn("t1")
        assert turn is not None and turn.status == "done"
        assert await store.load_events("s") == [event("s", 1), completed]

    async def test_a_turn_update_whose_events_conflict_writes_nothing(self, store: TreeStore) -> None:
        await store.append_events(events("s", 1, 2))
        stored = await store.add_turn(turn_record("s", "t1"))
        before = await _tree_snapshot(store, "s")
        with pytest.raises(CommitConflict):
            await store.update_turn(
                stored.model_copy(update={"status": "done"}), events=[event("s", 2, "turn.completed")]
            )
        assert await _tree_snapshot(store, "s") == before  # neither the status nor the event

    async def test_one_batch_may_span_sessions(self, store: TreeStore) -> None:
        await store.append_events(events("b", 1))
        batch = [event("a", 1), event("b", 2), event("a", 2), event("b", 3)]
        await store.append_events(batch)
        assert await store.load_events("a") == [batch[0], batch[2]]
        assert await store.load_events("b") == [event("b", 1), batch[1], batch[3]]
        assert (await store.last_event_seq("a"), await store.last_event_seq("b")) == (2, 3)

    async def test_an_event_round_trips_every_field(self, store: TreeStore) -> None:
        full = SessionEvent(
            session_id="s", seq=1, submission_id="sub-1", type="tool.result", data={"k": [1, 2.5, None]}, at=123
        )
        bare = SessionEvent(session_id="s", seq=2, type="turn.completed", at=456)
        await store.append_events([full, bare])
        loaded = await store.load_events("s")
        assert loaded == [full, bare]
        assert [e.model_dump(mode="json") for e in loaded] == [
            full.model_dump(mode="json"),
            bare.model_dump(mode="json"),
        ]
        assert loaded[1].submission_id is None and loaded[1].data == {}

    @pytest.mark.parametrize(("stored", "batch"), BAD_APPENDS.values(), ids=BAD_APPENDS.keys())
    async def test_a_gap_or_a_repeated_seq_conflicts_and_writes_nothing(
        self, store: TreeStore, stored: list[int], batch: list[SessionEvent]
    ) -> None:
        if stored:
            await store.append_events(events("s", *stored))
        before = await _tree_snapshot(store, "s", "t")

        with pytest.raises(CommitConflict):
            await store.append_events(batch)

        assert await _tree_snapshot(store, "s", "t") == before
        # The log is still writable where it really ends.
        await store.append_events(events("s", len(stored) + 1))
        assert await store.last_event_seq("s") == len(stored) + 1

    async def test_events_without_a_seq_are_refused(self, store: TreeStore) -> None:
        await store.append_events(events("s", 1))
        before = await _tree_snapshot(store, "s")
        for batch in ([event("s", None, "text.delta")], [event("s", 2), event("s", None, "reasoning.delta")]):
            with pytest.raises(StoreError):
                await store.append_events(batch)
            assert await _tree_snapshot(store, "s") == before

    async def test_unicode_and_large_event_data_round_trip(self, store: TreeStore) -> None:
        data: dict[str, Any] = {
            "text": "héllo wörld ✓ 日本語 🎉 \U0001f9ea",
            "nul": "before\x00after",
            "controls": "\t\n\r\x1b\x7f",
            "quotes": "it's \"quoted\" \\ backslash ' OR 1=1; --",
            "ключ": {"nested": [1, -2, 2.5, 1e-300, 2**62, True, False, None, "", [], {}]},
            "big": BIG,
        }
        tricky = SessionEvent(session_id="sé 🌳", seq=1, submission_id="süb \U0001f9ea", type="tool.result", data=data)
        await store.append_events([tricky])
        loaded = await store.load_events("sé 🌳")
        assert loaded == [tricky]
        assert loaded[0].data["big"] == BIG
        assert await store.last_event_seq("sé 🌳") == 1

    async def test_racing_appends_of_the_same_seq_one_wins(self, store: TreeStore) -> None:
        await store.append_events(events("s", 1))
        results = await asyncio.gather(
            *(store.append_events([event("s", 2, writer=i)]) for i in range(8)), return_exceptions=True
        )
        won = [r for r in results if r is None]
        lost = [r for r in results if isinstance(r, BaseException)]
        assert len(won) == 1
        assert len(lost) == 7 and all(isinstance(e, CommitConflict) for e in lost)
        assert await store.last_event_seq("s") == 2
        assert len(await store.load_events("s")) == 2

    # -- events carried by a commit ----------------------------------------------------------------

    async def test_a_commit_carries_its_events_with_the_checkpoint(self, store: TreeStore) -> None:
        await store.create_session(session_record("s"))
        history = history_of("hi")
        run, thread = pointers(history, thread_id="s", run_id="r")
        first = events("s", 1, 2)
        await store.commit_session(run=run, thread=thread, history=history, events=first)

        assert await store.load_events("s") == first
        assert await store.load_run("r") == run
        stored_thread = await store.load_thread("s")
        assert stored_thread is not None and stored_thread.history_revision_id == history.revision_id

        # Appended events and committed events share one seq.
        await store.append_events(events("s", 3))
        base = history.revision_id
        history.append(ModelMessage.assistant("hello"))
        run, thread = pointers(history, thread_id="s", run_id="r", step_index=1)
        await store.commit_session(
            run=run, thread=thread, history=history, base_revision_id=base, events=events("s", 4)
        )
        # A commit with no events leaves the log alone.
        base = history.revision_id
        history.append(ModelMessage.user("more"))
        run, thread = pointers(history, thread_id="s", run_id="r", step_index=2)
        await store.commit_session(run=run, thread=thread, history=history, base_revision_id=base)

        assert await store.load_events("s") == events("s", 1, 2, 3, 4)
        assert await store.last_event_seq("s") == 4
        assert await store.load_run("r") == run

    @pytest.mark.parametrize("conflict", CONFLICTS)
    async def test_a_conflicting_commit_writes_none_of_its_events(
        self, store: TreeStore, looks: Looks, conflict: str
    ) -> None:
        history = await _committed_session(store)
        head = history.revision_id
        if conflict == "finished-run":
            await store.save(RunState(run_id="r", thread_id="s", history_revision_id=head, status="done"))
        before = await _full_snapshot(store, looks, "s")

        history.append(ModelMessage.assistant("lost"))
        run, thread = pointers(history, thread_id="s", run_id="r")
        base: str | None = head
        if conflict == "moved-head":
            base = "not-the-head"
        elif conflict == "base-none-on-a-head":
            base = None
        elif conflict == "pointers-disagree":
            thread = thread.model_copy(update={"history_revision_id": head})
        with pytest.raises(CommitConflict):
            await store.commit_session(
                run=run, thread=thread, history=history, base_revision_id=base, events=events("s", 3, 4)
            )

        assert await _full_snapshot(store, looks, "s") == before
        assert await store.last_event_seq("s") == 2

    @pytest.mark.parametrize("bad", WRONG_COMMIT_EVENTS.values(), ids=WRONG_COMMIT_EVENTS.keys())
    async def test_a_commit_whose_events_are_out_of_seq_conflicts_and_writes_nothing(
        self, store: TreeStore, looks: Looks, bad: list[SessionEvent]
    ) -> None:
        history = await _committed_session(store)
        base = history.revision_id
        before = await _full_snapshot(store, looks, "s")

        history.append(ModelMessage.assistant("never stored"))
        new_entry = history.entries[-1].id
        run, thread = pointers(history, thread_id="s", run_id="r", step_index=5, status="suspended")
        with pytest.raises(CommitConflict):
            await store.commit_session(run=run, thread=thread, history=history, base_revision_id=base, events=bad)

        assert await _full_snapshot(store, looks, "s") == before
        stored_run = await store.load_run("r")
        assert stored_run is not None and stored_run.step_index == 0 and stored_run.status == "running"
        assert await store.load_history(history.revision_id or "") is None
        assert new_entry not in {e.id for e in (await store.load_history(base or "") or MessageHistory()).entries}
        # The same commit with the right events then lands.
        await store.commit_session(
            run=run, thread=thread, history=history, base_revision_id=base, events=events("s", 3, 4)
        )
        assert await store.load_run("r") == run
        assert await store.last_event_seq("s") == 4

    async def test_a_first_commit_with_wrong_events_creates_no_thread(self, store: TreeStore, looks: Looks) -> None:
        history = history_of("hi")
        run, thread = pointers(history, thread_id="fresh", run_id="r")
        before = await _full_snapshot(store, looks, "fresh")
        with pytest.raises(CommitConflict):
            await store.commit_session(run=run, thread=thread, history=history, events=events("fresh", 2))
        assert await _full_snapshot(store, looks, "fresh") == before
        assert await store.load_thread("fresh") is None
        assert await store.load_run("r") is None

    async def test_a_commit_carrying_an_event_without_seq_is_refused_whole(
        self, store: TreeStore, looks: Looks
    ) -> None:
        history = await _committed_session(store)
        base = history.revision_id
        before = await _full_snapshot(store, looks, "s")
        history.append(ModelMessage.assistant("x"))
        run, thread = pointers(history, thread_id="s", run_id="r", step_index=1)
        with pytest.raises(StoreError):
            await store.commit_session(
                run=run,
                thread=thread,
                history=history,
                base_revision_id=base,
                events=[event("s", 3), event("s", None, "text.delta")],
            )
        assert await _full_snapshot(store, looks, "s") == before

    async def test_a_commit_refuses_events_of_another_session(self, store: TreeStore, looks: Looks) -> None:
        """A commit's events belong to its thread's session (a session's thread id is its session id)."""
        history = await _committed_session(store)
        base = history.revision_id
        before = await _full_snapshot(store, looks, "s", "x")
        history.append(ModelMessage.assistant("x"))
        run, thread = pointers(history, thread_id="s", run_id="r", step_index=1)
        with pytest.raises(StoreError):
            await store.commit_session(
                run=run, thread=thread, history=history, base_revision_id=base, events=[event("s", 3), event("x", 1)]
            )
        assert await _full_snapshot(store, looks, "s", "x") == before

    async def test_a_commit_that_fails_halfway_writes_none_of_its_events(self, store: TreeStore, looks: Looks) -> None:
        history = await _committed_session(store)
        base = history.revision_id
        before = await _full_snapshot(store, looks, "s")
        history.append(ModelMessage.assistant("x"))
        run, thread = pointers(history, thread_id="s", run_id="r", step_index=1)
        async with looks.commit_failure() as failure:
            with pytest.raises(failure):
                await store.commit_session(
                    run=run, thread=thread, history=history, base_revision_id=base, events=events("s", 3)
                )
        assert await _full_snapshot(store, looks, "s") == before

    # -- concurrency -------------------------------------------------------------------------------

    async def test_twenty_concurrent_add_turns_on_one_session_get_seqs_one_to_twenty(self, store: TreeStore) -> None:
        await store.create_session(session_record("s"))
        results = await asyncio.gather(
            *(store.add_turn(turn_record("s", f"t{i:02d}")) for i in range(20)), return_exceptions=True
        )
        assert [r for r in results if isinstance(r, BaseException)] == []
        returned = [r for r in results if isinstance(r, TurnRecord)]
        assert sorted(t.seq for t in returned) == list(range(1, 21))
        listed = await store.list_turns("s")
        assert [t.seq for t in listed] == list(range(1, 21))
        assert sorted(t.submission_id for t in listed) == [f"t{i:02d}" for i in range(20)]
        assert {t.submission_id: t.seq for t in listed} == {t.submission_id: t.seq for t in returned}

    async def test_concurrent_add_turns_on_many_sessions_number_each_queue(self, store: TreeStore) -> None:
        sids = [f"s{i}" for i in range(4)]
        for sid in sids:
            await store.create_session(session_record(sid))
        results = await asyncio.gather(
            *(store.add_turn(turn_record(sid, f"{sid}-{i}")) for i in range(5) for sid in sids), return_exceptions=True
        )
        assert [r for r in results if isinstance(r, BaseException)] == []
        for sid in sids:
            assert [t.seq for t in await store.list_turns(sid)] == [1, 2, 3, 4, 5]

    # -- durability and lifecycle ------------------------------------------------------------------

    async def test_a_reopened_store_keeps_sessions_turns_and_events(self, store: TreeStore, looks: Looks) -> None:
        await store.create_session(session_record("p", title="root"))
        await store.create_session(session_record("c", parent="p", kind="spawned", created_at=2_000))
        turn = await store.add_turn(turn_record("c", "t1"))
        await store.append_events(events("c", 1, 2))
        before = await _tree_snapshot(store, "p", "c")
        await store.close()

        again = await looks.reopen()
        assert isinstance(again, TreeStore)
        try:
            assert await _tree_snapshot(again, "p", "c") == before
            assert await again.list_open_turns() == [turn]
            assert (await again.add_turn(turn_record("c", "t2"))).seq == 2
            await again.append_events(events("c", 3))
        finally:
            await again.close()

    @pytest.mark.parametrize("call", CLOSED_CALLS.values(), ids=CLOSED_CALLS.keys())
    async def test_a_closed_store_raises_store_error_from_tree_methods(
        self, store: TreeStore, call: Callable[[TreeStore], Awaitable[object]]
    ) -> None:
        await store.create_session(session_record("s"))
        await store.add_turn(turn_record("s", "t1"))
        await store.append_events(events("s", 1))
        await store.close()
        with pytest.raises(StoreError, match="closed"):
            await call(store)

    async def test_list_sessions_oldest_first_roots_only_and_capped(self, store: TreeStore) -> None:
        for sid in ("r1", "r2"):
            await store.create_session(session_record(sid))
        await store.create_session(session_record("c1", parent="r1", kind="spawned"))
        await store.create_session(session_record("r3"))
        assert [s.session_id for s in await store.list_sessions()] == ["r1", "r2", "c1", "r3"]
        assert [s.session_id for s in await store.list_sessions(roots_only=True)] == ["r1", "r2", "r3"]
        assert [s.session_id for s in await store.list_sessions(limit=2)] == ["r1", "r2"]
