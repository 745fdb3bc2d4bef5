"""``HeadConformance``: ``TreeStore.move_head``, the head moves no run makes, as a test class.

A fork's first revision (error results for the calls it left open) and a thread set back to an
earlier revision (a run from a checkpoint) move a thread's head without a run. The contract: the
same compare-and-set as a commit (a stale base, or a thread that does not exist, writes nothing),
only the revisions the store lacks are written, the head can move back and sideways and to empty,
and nothing the old head reached is deleted.
"""

from __future__ import annotations

import pytest

from repertory.core.history import MessageHistory
from repertory.core.messages import ModelMessage
from repertory.core.store import TreeStore
from repertory.errors import CommitConflict
from repertory.testing.conformance._looks import Conformance, Looks
from repertory.testing.conformance.records import commit, history_of
from repertory.testing.conformance.tree import session_record

__all__ = ["HeadConformance"]


async def _texts(store: TreeStore, revision_id: str | None) -> list[str]:
    if revision_id is None:
        return []
    loaded = await store.load_history(revision_id)
    assert loaded is not None, f"the store lacks revision {revision_id!r}"
    return [m.text for m in loaded.messages]


async def _head(store: TreeStore, thread_id: str) -> str | None:
    thread = await store.load_thread(thread_id)
    assert thread is not None
    return thread.history_revision_id


class HeadConformance(Conformance):
    """``move_head``: compare-and-set head moves, with their new revisions, and nothing deleted."""

    async def _thread(self, store: TreeStore, *texts: str) -> MessageHistory:
        await store.create_session(session_record("t"))
        history = history_of(*texts)
        await commit(store, history, thread_id="t", run_id="r")
        return history

    async def test_moving_back_keeps_every_revision_and_the_new_one_continues(
        self, store: TreeStore, looks: Looks
    ) -> None:
        history = await self._thread(store, "a", "b", "c")
        head = history.revision_id
        first = history.lineage()[0].id
        rows = await looks.history_rows()
        await store.move_head("t", history=history.branch(first), base_revision_id=head)
        assert await _head(store, "t") == first
        assert await _texts(store, head) == ["a", "b", "c"]  # the old head is still whole
        if rows is not None:
            await looks.expect_history_rows(rows)  # moving back writes nothing
        branch = history.branch(first)
        branch.append(ModelMessage.user("b2"))
        await commit(store, branch, thread_id="t", run_id="r2", base=first)
        assert await _texts(store, branch.revision_id) == ["a", "b2"]

    async def test_new_revisions_of_the_moved_head_are_written_and_only_those(
        self, store: TreeStore, looks: Looks
    ) -> None:
        history = await self._thread(store, "a", "b")
        head = history.revision_id
        side = history.branch(history.lineage()[0].id)
        side.append(ModelMessage.user("x"))
        side.append(ModelMessage.user("y"))
        before = await looks.history_rows()
        async with looks.history_writes() as writes:
            await store.move_head("t", history=side, base_revision_id=head)
        looks.expect_writes(writes, 2, 2)
        if before is not None:
            await looks.expect_history_rows((before[0] + 2, before[1] + 2))
        assert await _head(store, "t") == side.revision_id
        assert await _texts(store, side.revision_id) == ["a", "x", "y"]

    async def test_a_stale_base_conflicts_and_writes_nothing(self, store: TreeStore, looks: Looks) -> None:
        history = await self._thread(store, "a", "b")
        side = history.branch(history.lineage()[0].id)
        side.append(ModelMessage.user("lost"))
        before = await looks.history_rows()
        with pytest.raises(CommitConflict):
            await store.move_head("t", history=side, base_revision_id=history.lineage()[0].id)
        assert await _head(store, "t") == history.revision_id
        if before is not None:
            await looks.expect_history_rows(before)
        assert await store.load_history(side.revision_id or "") is None

    async def test_an_unknown_thread_conflicts(self, store: TreeStore) -> None:
        with pytest.raises(CommitConflict):
            await store.move_head("nobody", history=history_of("a"), base_revision_id=None)
        assert await store.load_thread("nobody") is None

    async def test_a_thread_can_be_set_back_to_empty_and_start_again(self, store: TreeStore) -> None:
        history = await self._thread(store, "a")
        await store.move_head("t", history=MessageHistory(), base_revision_id=history.revision_id)
        assert await _head(store, "t") is None
        fresh = history_of("again")
        await commit(store, fresh, thread_id="t", run_id="r2", base=None)
        assert await _texts(store, fresh.revision_id) == ["again"]
        assert await _texts(store, history.revision_id) == ["a"]

    async def test_a_fork_thread_takes_its_first_revision_on_the_shared_one(self, store: TreeStore) -> None:
        history = await self._thread(store, "a", "b")
        head = history.revision_id
        assert head is not None
        await store.create_session(session_record("f", parent="t", kind="forked", forked_at=head), head=head)
        own = history.branch()
        own.append(ModelMessage.user("fork only"))
        await store.move_head("f", history=own, base_revision_id=head)
        assert await _texts(store, await _head(store, "f")) == ["a", "b", "fork only"]
        assert await _head(store, "t") == head
