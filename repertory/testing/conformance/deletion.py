"""``DeletionConformance``: deleting sessions and amending them (``TreeStore.delete_sessions``, ``amend_session``).

A deletion removes a session's rows and collects the history nobody else reaches: whatever a
surviving thread's lineage holds (a fork, a parent a fork shares a prefix with, a plain thread the
store was handed a shared history for) loads exactly as before, and whatever only the deleted
sessions held is gone (``load_history`` of it is ``None``; with a probe, the rows are counted).
"""

from __future__ import annotations

from typing import Any

import pytest

from repertory.core.history import HistoryEntry, HistoryRevision, MessageHistory
from repertory.core.ids import now_ms
from repertory.core.messages import ModelMessage
from repertory.core.store import DeletedRows, MemoryRecord, MemoryStore, TreeStore
from repertory.errors import StoreError
from repertory.testing.conformance._looks import Conformance, Looks
from repertory.testing.conformance.records import commit, history_of
from repertory.testing.conformance.tree import events, session_record, turn_record

__all__ = ["DeletionConformance"]


async def _session_with(
    store: TreeStore, sid: str, history: MessageHistory, *, base: str | None = None, **kw: Any
) -> None:
    """Session ``sid`` (created unless it exists) whose thread is committed at ``history``'s head."""
    if await store.load_session(sid) is None:
        await store.create_session(session_record(sid, **kw), head=base)
    await commit(store, history, thread_id=sid, run_id=f"run-{sid}-{history.depth}", base=base)


async def _fork(store: TreeStore, parent: str, fid: str, at: MessageHistory) -> None:
    """A fork of ``parent`` whose thread starts at ``at``'s head (no commit yet)."""
    await store.create_session(
        session_record(fid, parent=parent, kind="forked", forked_at=at.revision_id), head=at.revision_id
    )


async def _texts(store: TreeStore, revision_id: str | None) -> list[str] | None:
    if revision_id is None:
        return None
    history = await store.load_history(revision_id)
    return None if history is None else [m.text for m in history.messages]


async def _compacted(store: TreeStore, sid: str) -> tuple[MessageHistory, str]:
    """Session ``sid``: one..four in three commits, then a compaction; its history and the head the compaction left.

    The compaction puts a summary after "two" and adds "three" and "four" again on top of it, as
    ``Compaction`` does: new revisions naming the entries the left head's revisions hold.
    """
    history = history_of("one", "two")
    await _session_with(store, sid, history)
    for text in ("three", "four"):
        base = history.revision_id
        history.append(ModelMessage.user(text))
        await commit(store, history, thread_id=sid, run_id=f"run-{sid}", base=base)
    left = history.revision_id or ""
    history.insert(ModelMessage.user("summary"), after=history.lineage()[1].id)
    await commit(store, history, thread_id=sid, run_id=f"run-{sid}", base=left)
    return history, left


def _record(thread_id: str, text: str) -> MemoryRecord:
    return MemoryRecord(thread_id=thread_id, role="user", text=text, created_at=now_ms())


class DeletionConformance(Conformance):
    """Subclass with a ``store`` fixture (an open, empty ``TreeStore``) and optionally a ``probe``."""

    # -- what goes --------------------------------------------------------------------------------

    async def test_deleting_a_session_removes_everything_it_had(self, store: TreeStore, looks: Looks) -> None:
        history = history_of("a", "b")
        await _session_with(store, "s", history)
        await store.add_turn(turn_record("s", "t1"))
        await store.add_turn(turn_record("s", "t2"))
        await store.append_events(events("s", 1, 2, 3))

        deleted = await store.delete_sessions(["s"])

        assert deleted == DeletedRows(sessions=1, runs=1, turns=2, events=3, revisions=2, entries=2)
        assert await store.load_session("s") is None
        assert await store.load_thread("s") is None
        assert await store.list_runs("s") == [] and await store.load_run("run-s-2") is None
        assert await store.list_turns("s") == [] and await store.load_turn("t1") is None
        assert await store.load_events("s") == [] and await store.last_event_seq("s") == 0
        assert await store.load_history(history.revision_id or "") is None
        await looks.expect_history_rows((0, 0))
        await looks.expect_held([e.id for e in history.entries], held=False)
        # The id is free again: a new session may take it.
        await store.create_session(session_record("s"))
        assert (await store.load_thread("s")) is not None

    async def test_other_sessions_are_untouched(self, store: TreeStore) -> None:
        await _session_with(store, "s", history_of("mine"))
        other = history_of("yours")
        await _session_with(store, "o", other)
        await store.add_turn(turn_record("o", "o1"))
        await store.append_events(events("o", 1))
        before = (
            await store.load_session("o"),
            await store.load_thread("o"),
            await store.list_runs("o"),
            await store.list_turns("o"),
            await store.load_events("o"),
        )

        await store.delete_sessions(["s"])

        after = (
            await store.load_session("o"),
            await store.load_thread("o"),
            await store.list_runs("o"),
            await store.list_turns("o"),
            await store.load_events("o"),
        )
        assert after == before
        assert await _texts(store, other.revision_id) == ["yours"]

    async def test_several_sessions_go_in_one_call(self, store: TreeStore, looks: Looks) -> None:
        await _session_with(store, "p", history_of("parent"))
        await store.create_session(session_record("c", parent="p", kind="spawned"))
        await _session_with(store, "c", history_of("child"))

        deleted = await store.delete_sessions(["p", "c", "p"])

        assert deleted.sessions == 2 and deleted.revisions == 2 and deleted.runs == 2
        assert await store.load_session("p") is None and await store.load_session("c") is None
        assert await store.list_children("p") == []
        await looks.expect_history_rows((0, 0))

    async def test_unknown_ids_are_skipped(self, store: TreeStore) -> None:
        history = history_of("x")
        await _session_with(store, "s", history)
        assert await store.delete_sessions(["nobody"]) == DeletedRows()
        assert await store.delete_sessions([]) == DeletedRows()
        assert (await store.delete_sessions(["nobody", "s"])).sessions == 1
        assert await store.delete_sessions(["s"]) == DeletedRows()

    async def test_memory_records_of_the_thread_go_and_no_others(self, store: TreeStore) -> None:
        if not isinstance(store, MemoryStore):
            pytest.skip("the store keeps no memory tables")
        await store.create_session(session_record("s"))
        await store.append_memory("u1", [_record("s", "gone"), _record("other", "stays"), _record("s", "gone 2")])
        await store.append_memory("u2", [_record("s", "gone in u2"), _record("other2", "stays in u2")])

        deleted = await store.delete_sessions(["s"])

        assert deleted.memory_records == 3
        assert [r.text for r in await store.recent_memory("u1", limit=10)] == ["stays"]
        assert [r.text for r in await store.recent_memory("u2", limit=10)] == ["stays in u2"]
        # The resource's order goes on after the deleted rows' seqs.
        assert await store.append_memory("u1", [_record("other", "later")]) == [4]

    # -- what stays: history another lineage reaches ---------------------------------------------

    async def test_a_fork_survives_its_parent_whole(self, store: TreeStore, looks: Looks) -> None:
        shared = history_of("a", "b")
        await _session_with(store, "p", shared)
        await _fork(store, "p", "f", shared)
        fork = shared.branch()
        fork.append(ModelMessage.user("fork only"))
        await commit(store, fork, thread_id="f", run_id="run-f", base=shared.revision_id)
        parent = shared.branch()
        parent.append(ModelMessage.user("parent only"))
        await commit(store, parent, thread_id="p", run_id="run-p-3", base=shared.revision_id)
        fork_record = await store.load_session("f")

        deleted = await store.delete_sessions(["p"])

        assert deleted.sessions == 1 and deleted.revisions == 1 and deleted.entries == 1 and deleted.runs == 2
        assert await _texts(store, fork.revision_id) == ["a", "b", "fork only"]
        assert await _texts(store, parent.revision_id) is None
        assert await store.load_session("f") == fork_record
        assert (await store.load_thread("f")) is not None and await store.list_runs("f") != []
        # The survivor still names its deleted parent (its lineage is history).
        assert [c.session_id for c in await store.list_children("p")] == ["f"]
        await looks.expect_history_rows((3, 3))

    async def test_deleting_a_fork_keeps_the_parents_history(self, store: TreeStore, looks: Looks) -> None:
        shared = history_of("a", "b")
        await _session_with(store, "p", shared)
        await _fork(store, "p", "f", shared)
        fork = shared.branch()
        fork.extend([ModelMessage.user("f1"), ModelMessage.user("f2")])
        await commit(store, fork, thread_id="f", run_id="run-f", base=shared.revision_id)

        deleted = await store.delete_sessions(["f"])

        # The parent's head is the fork point itself: everything up to it stays.
        assert deleted.revisions == 2 and deleted.entries == 2
        assert await _texts(store, shared.revision_id) == ["a", "b"]
        assert await _texts(store, fork.revision_id) is None
        assert await store.list_children("p") == []
        await looks.expect_history_rows((2, 2))

    async def test_a_fork_that_said_nothing_keeps_the_shared_head(self, store: TreeStore) -> None:
        shared = history_of("a", "b", "c")
        await _session_with(store, "p", shared)
        await _fork(store, "p", "f", shared)

        deleted = await store.delete_sessions(["p"])

        assert deleted.revisions == 0 and deleted.entries == 0
        head = await store.load_thread("f")
        assert head is not None and head.history_revision_id == shared.revision_id
        assert await _texts(store, shared.revision_id) == ["a", "b", "c"]

    async def test_a_fork_of_a_fork_and_a_middle_one_deleted(self, store: TreeStore) -> None:
        base = history_of("a")
        await _session_with(store, "p", base)
        await _fork(store, "p", "f1", base)
        mid = base.branch()
        mid.append(ModelMessage.user("f1 says"))
        await commit(store, mid, thread_id="f1", run_id="run-f1", base=base.revision_id)
        await _fork(store, "f1", "f2", mid)
        leaf = mid.branch()
        leaf.append(ModelMessage.user("f2 says"))
        await commit(store, leaf, thread_id="f2", run_id="run-f2", base=mid.revision_id)
        after_fork = mid.branch()
        after_fork.append(ModelMessage.user("f1 goes on"))
        await commit(store, after_fork, thread_id="f1", run_id="run-f1b", base=mid.revision_id)

        deleted = await store.delete_sessions(["f1"])

        assert deleted.revisions == 1  # only "f1 goes on": "f1 says" is on f2's lineage
        assert await _texts(store, leaf.revision_id) == ["a", "f1 says", "f2 says"]
        assert await _texts(store, base.revision_id) == ["a"]
        assert await _texts(store, after_fork.revision_id) is None

    async def test_a_plain_thread_sharing_the_history_keeps_it(self, store: TreeStore) -> None:
        """A thread the store was handed a shared history for (no session row) is a lineage too."""
        history = history_of("a", "b")
        await _session_with(store, "s", history)
        other = history.branch()
        other.append(ModelMessage.user("plain thread"))
        await commit(store, other, thread_id="plain", run_id="run-plain")

        deleted = await store.delete_sessions(["s"])

        assert deleted.revisions == 0
        assert await _texts(store, other.revision_id) == ["a", "b", "plain thread"]

    async def test_a_thread_that_moved_onto_the_lineage_keeps_it(self, store: TreeStore) -> None:
        """A head may move to a revision it does not descend from (a commit whose walk misses its base)."""
        mine = history_of("a", "b", "c")
        await _session_with(store, "s", mine)
        elsewhere = history_of("x")
        await commit(store, elsewhere, thread_id="plain", run_id="run-plain")
        onto = mine.branch(mine.lineage()[1].id)  # "a", "b": a revision of s's
        await commit(store, onto, thread_id="plain", run_id="run-plain-2", base=elsewhere.revision_id)

        deleted = await store.delete_sessions(["s"])

        assert deleted.revisions == 1  # "c" alone
        assert await _texts(store, onto.revision_id) == ["a", "b"]

    async def test_the_same_revisions_committed_by_two_threads_stay_for_the_survivor(self, store: TreeStore) -> None:
        """Two threads at one head committing one in-memory history write its revisions once, for both."""
        shared = history_of("a")
        await _session_with(store, "p", shared)
        await _fork(store, "p", "f", shared)
        grown = shared.branch()
        grown.append(ModelMessage.user("said by both"))
        await commit(store, grown, thread_id="p", run_id="run-p-2", base=shared.revision_id)
        await commit(store, grown, thread_id="f", run_id="run-f", base=shared.revision_id)

        deleted = await store.delete_sessions(["p"])

        assert deleted.revisions == 0
        assert await _texts(store, grown.revision_id) == ["a", "said by both"]

    async def test_an_entry_stays_while_another_revision_holds_it(self, store: TreeStore, looks: Looks) -> None:
        at = now_ms()
        entry = HistoryEntry(id="shared-entry", message=ModelMessage.user("same words"), created_at=at)
        mine = MessageHistory(
            revision_id="rev-mine",
            entries=[entry],
            revisions=[HistoryRevision(id="rev-mine", parent_id=None, entry_id=entry.id, depth=1, created_at=at)],
        )
        theirs = MessageHistory(
            revision_id="rev-theirs",
            entries=[entry],
            revisions=[HistoryRevision(id="rev-theirs", parent_id=None, entry_id=entry.id, depth=1, created_at=at)],
        )
        await _session_with(store, "s", mine)
        await commit(store, theirs, thread_id="other", run_id="run-other")

        deleted = await store.delete_sessions(["s"])

        assert deleted.revisions == 1 and deleted.entries == 0
        assert await _texts(store, "rev-theirs") == ["same words"]
        assert await store.load_history("rev-mine") is None
        await looks.expect_held([entry.id])

    # -- compactions and side branches ------------------------------------------------------------

    async def test_deleting_a_compacted_session_leaves_nothing_of_it(self, store: TreeStore, looks: Looks) -> None:
        """The head a compaction left, and the messages it added again, go with the session."""
        history, left = await _compacted(store, "s")
        base = history.revision_id
        history.append(ModelMessage.assistant("five"))
        await commit(store, history, thread_id="s", run_id="run-s", base=base)
        assert await _texts(store, history.revision_id) == ["one", "two", "summary", "three", "four", "five"]
        await _session_with(store, "other", history_of("not theirs"))

        deleted = await store.delete_sessions(["s"])

        # Six messages; revisions: two, two steps, the summary and the two it re-added, one step.
        assert (deleted.entries, deleted.revisions) == (6, 8)
        assert await store.load_history(left) is None and await store.load_history(history.revision_id or "") is None
        await looks.expect_history_rows((1, 1))  # the other session's message, nothing of the deleted one
        await looks.expect_held([e.id for e in history.entries], held=False)

    async def test_forks_on_either_side_of_a_compaction_keep_what_they_read(
        self, store: TreeStore, looks: Looks
    ) -> None:
        """Forks at the head a compaction left and at the compacted head outlive each other and the parent."""
        for first, second in (("before", "after"), ("after", "before")):
            await store.delete_sessions(["p", "before", "after"])
            history, left = await _compacted(store, "p")
            await _fork(store, "p", "before", history.branch(left))
            await _fork(store, "p", "after", history)
            texts = {"before": ["one", "two", "three", "four"], "after": ["one", "two", "summary", "three", "four"]}
            heads = {"before": left, "after": history.revision_id or ""}

            await store.delete_sessions(["p"])
            for sid in ("before", "after"):
                assert await _texts(store, heads[sid]) == texts[sid]
            await store.delete_sessions([first])
            assert await _texts(store, heads[second]) == texts[second]
            await store.delete_sessions([second])
            await looks.expect_history_rows((0, 0))

    async def test_a_fork_of_a_head_moved_away_from_outlives_the_parent_and_its_sibling(
        self, store: TreeStore, looks: Looks
    ) -> None:
        """A run from an earlier checkpoint moves the parent's head back: a fork at the head it left keeps it."""
        history = history_of("one", "two", "three")
        await _session_with(store, "p", history)
        left = history.revision_id or ""
        await _fork(store, "p", "before", history)
        back = history.branch(history.lineage()[1].id)  # "two"
        await store.move_head("p", history=back, base_revision_id=left)
        back.append(ModelMessage.user("again"))
        await commit(store, back, thread_id="p", run_id="run-p-again", base=back.lineage()[1].id)
        await _fork(store, "p", "after", back)

        await store.delete_sessions(["p"])
        await store.delete_sessions(["after"])

        assert await _texts(store, left) == ["one", "two", "three"]
        await store.delete_sessions(["before"])
        await looks.expect_history_rows((0, 0))

    async def test_a_closed_store_refuses(self, store: TreeStore) -> None:
        await _session_with(store, "s", history_of("x"))
        await store.close()
        with pytest.raises(StoreError):
            await store.delete_sessions(["s"])
        with pytest.raises(StoreError):
            await store.amend_session("s", metadata={})

    # -- amending ---------------------------------------------------------------------------------

    async def test_amend_rewrites_agent_and_metadata_only(self, store: TreeStore) -> None:
        original = session_record("s", metadata={"a": 1}, title="t", owner="alice")
        await store.create_session(original)

        amended = await store.amend_session("s", agent="other", metadata={"b": [1, "two"], "ü": None})

        expected = original.model_copy(update={"agent": "other", "metadata": {"b": [1, "two"], "ü": None}})
        assert amended == expected and await store.load_session("s") == expected
        only_metadata = await store.amend_session("s", metadata={})
        assert only_metadata.agent == "other" and only_metadata.metadata == {}
        assert (await store.amend_session("s")) == only_metadata

    async def test_a_stale_update_does_not_undo_an_amendment(self, store: TreeStore) -> None:
        stale = session_record("s", metadata={"v": 1})
        await store.create_session(stale)
        await store.amend_session("s", agent="bound", metadata={"v": 2})

        await store.update_session(stale.model_copy(update={"title": "renamed", "updated_at": 5_000}))

        stored = await store.load_session("s")
        assert stored is not None
        assert (stored.agent, stored.metadata, stored.title) == ("bound", {"v": 2}, "renamed")

    async def test_amending_an_unknown_session_fails_and_creates_nothing(self, store: TreeStore) -> None:
        with pytest.raises(StoreError):
            await store.amend_session("ghost", metadata={"x": 1})
        assert await store.load_session("ghost") is None
