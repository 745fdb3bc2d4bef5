"""Long conversations through handles, on every backend: ``handle.compact()``, the ``context.compacted``
event, the summary's usage in ``handle.usage()``, and ``handle.fork(at_revision=...)`` at every kind
of revision (head, mid, a pending approval, another session's: ``RevisionNotFound``).
"""

from __future__ import annotations

import pytest

from repertory.core.tree import Lineage
from repertory.errors import RevisionNotFound
from repertory.runtime.forks import FORK_REASON
from repertory.testing.conformance.backend.compacting import (
    SUMMARY_USAGE,
    Conversation,
    assert_paired,
    compacting_agent,
    prompt,
)
from repertory.testing.conformance.backend.doubles import collect, history, texts
from repertory.testing.conformance.backend.runtimes import BackendSuite, RuntimeFactory
from repertory.tree.runtime import Runtime

__all__ = ["ContextConformance"]


async def _head(rt: Runtime, session_id: str) -> str | None:
    thread = await rt.store.load_thread(session_id)
    assert thread is not None
    return thread.history_revision_id


class ContextConformance(BackendSuite):
    """Long conversations: compaction on demand and within turns, and forks at any kind of revision."""

    async def test_compact_through_the_handle_records_its_event_and_usage(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(compacting_agent(Conversation(), budget=100_000))
        root = await rt.create_session(agent="compacting")
        for i in range(5):
            assert (await root.run(prompt(i))).status == "done"
        result = await root.compact()
        assert result is not None and result.thread_id == root.id and result.kept == 5

        events = await collect(root.events(), lambda e: e.type == "context.compacted")
        compacted = events[-1]
        assert compacted.submission_id is None  # no turn: an on-demand compaction
        assert compacted.data["boundary_revision_id"] == result.boundary_revision_id
        assert compacted.data["usage"]["input_tokens"] == SUMMARY_USAGE["input_tokens"]
        messages = await history(rt, root)
        assert len(messages) == 21 and sum(m.boundary for m in messages) == 1
        usage = await root.usage()
        assert usage.input_tokens >= SUMMARY_USAGE["input_tokens"]
        # The session goes on from the summary.
        assert (await root.run(prompt(5))).status == "done"
        assert_paired(await history(rt, root))

    async def test_a_turn_that_compacts_records_the_event_in_its_turn(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(compacting_agent(Conversation()))
        root = await rt.create_session(agent="compacting")
        turns = []
        for i in range(20):
            turns.append((await root.send(prompt(i))).submission_id)
            await root.get_turn(turns[-1]).result()
        events = await collect(root.events(), lambda e: e.type == "turn.completed" and e.submission_id == turns[-1])
        compacted = [e for e in events if e.type == "context.compacted"]
        assert compacted and all(e.submission_id in turns for e in compacted)
        checkpoints = [e for e in events if e.type == "checkpoint" and e.data.get("compacted")]
        assert len(checkpoints) == len(compacted)
        messages = await history(rt, root)
        assert texts([m for m in messages if not m.boundary], "user") == [prompt(i) for i in range(20)]
        assert sum(m.boundary for m in messages) == len(compacted)
        assert_paired(messages)

    async def test_fork_at_a_revision_through_the_handle(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(compacting_agent(Conversation(), budget=100_000))
        root = await rt.create_session(agent="compacting")
        first = await root.run(prompt(0))
        await root.run(prompt(1))
        mid = first.state.history_revision_id
        assert mid is not None

        child = await root.fork(title="from turn 0", at_revision=mid)
        assert child.lineage == Lineage(kind="forked", parent_id=root.id, forked_at_revision_id=mid)
        assert texts(await history(rt, child), "user") == [prompt(0)]
        assert (await child.run(prompt(7))).status == "done"
        assert texts(await history(rt, child), "user") == [prompt(0), prompt(7)]
        assert texts(await history(rt, root), "user") == [prompt(0), prompt(1)]
        at_head = await root.fork()
        assert at_head.lineage.forked_at_revision_id == await _head(rt, root.id)

        with pytest.raises(RevisionNotFound):
            await root.fork(at_revision=await _head(rt, child.id))
        assert {c.id for c in await root.children()} == {child.id, at_head.id}

    async def test_fork_at_a_pending_approval_answers_it_in_the_child_only(self, make_runtime: RuntimeFactory) -> None:
        rt = await make_runtime(compacting_agent(Conversation(), budget=100_000))
        root = await rt.create_session(agent="compacting")
        await root.run(prompt(0))
        waiting = await root.run("t1 wire it")
        assert waiting.status == "suspended"
        child = await root.fork(at_revision=waiting.state.history_revision_id)
        assert child.lineage.forked_at_revision_id == waiting.state.history_revision_id
        forked = await history(rt, child)
        answered = [p for m in forked for p in m.tool_results if p.tool_name == "wire_money"]
        assert len(answered) == 1 and answered[0].is_error and answered[0].result == FORK_REASON
        assert_paired(forked)
        assert await child.pending_approvals() == []
        assert (await child.run(prompt(2))).status == "done"
        # The parent still waits, and its approval goes through.
        pending = await root.pending_approvals()
        assert len(pending) == 1
        done = await root.approve(pending[0].token)
        assert done.status == "done"
        assert_paired(await history(rt, root))
