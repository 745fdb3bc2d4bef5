"""``Session.fork(input, at_revision=...)`` on every store: forks at every kind of revision.

The head, a revision in the middle, one whose calls had no result yet (a step cut short, a pending
approval: the fork answers them "not run in this fork"), one a compaction re-added (the same point
of the same conversation), and revisions that are not on the thread's lineage (another thread's,
an unknown id: ``RevisionNotFound``, nothing forked).
"""

from __future__ import annotations

import pytest

from repertory import Session
from repertory.errors import RevisionNotFound
from repertory.runtime.forks import FORK_REASON
from repertory.storage import SessionStore
from tests.runtime.compact_script import Conversation, compacting_agent, prompt
from tests.runtime.helpers import assert_paired, history_at, thread_history


def _session(store: SessionStore, conversation: Conversation) -> Session:
    return Session(store=store, agent=compacting_agent(conversation, budget=100_000))


async def test_fork_at_the_head_and_at_a_mid_revision(store: SessionStore) -> None:
    conversation = Conversation()
    sess = _session(store, conversation)
    first = await sess.start(prompt(0))
    await sess.start(prompt(1))
    await sess.start(prompt(2))
    mid = first.state.history_revision_id
    assert mid is not None

    at_head = await sess.fork(prompt(10))
    assert [m.text for m in await thread_history(store, at_head.state.thread_id) if m.role == "user"] == [
        prompt(0),
        prompt(1),
        prompt(2),
        prompt(10),
    ]
    at_mid = await sess.fork(prompt(11), at_revision=mid)
    forked = await thread_history(store, at_mid.state.thread_id)
    assert [m.text for m in forked if m.role == "user"] == [prompt(0), prompt(11)]
    assert_paired(forked)
    # The original thread is untouched, and the fork shares its revisions (no copy).
    original = await thread_history(store, sess.thread_id)
    assert len(original) == 12
    fork_history = await store.load_history(at_mid.state.history_revision_id or "")
    assert fork_history is not None and fork_history.reaches(mid)


async def test_fork_at_a_revision_whose_calls_had_no_result_answers_them_in_the_fork(store: SessionStore) -> None:
    conversation = Conversation()
    sess = _session(store, conversation)
    await sess.start(prompt(0))
    thread = await store.load_thread(sess.thread_id)
    assert thread is not None and thread.history_revision_id is not None
    history = await store.load_history(thread.history_revision_id)
    assert history is not None
    call_revision = history.lineage()[1]  # the assistant's call; its result is the next revision
    assert history.entry(call_revision.entry_id).message.tool_calls  # type: ignore[union-attr]

    alt = await sess.fork(prompt(5), at_revision=call_revision.id)
    assert alt.status == "done"
    forked = await thread_history(store, alt.state.thread_id)
    assert [m.role for m in forked[:4]] == ["user", "assistant", "tool", "user"]
    result = forked[2].tool_results[0]
    assert result.is_error and result.result == FORK_REASON
    assert_paired(forked)
    for request in conversation.agent_requests:
        assert_paired(request)
    assert len(await thread_history(store, sess.thread_id)) == 4  # the original kept its real result


async def test_fork_at_a_pending_approval_answers_it_in_the_fork_only(store: SessionStore) -> None:
    conversation = Conversation()
    sess = _session(store, conversation)
    await sess.start(prompt(0))
    r = await sess.start("t1 wire it")
    assert r.status == "suspended" and r.state.suspended_on is not None
    head = r.state.history_revision_id
    alt = await sess.fork(prompt(2), at_revision=head)
    forked = await thread_history(store, alt.state.thread_id)
    answered = [p for m in forked for p in m.tool_results if p.tool_name == "wire_money"]
    assert len(answered) == 1 and answered[0].is_error and answered[0].result == FORK_REASON
    assert_paired(forked)
    # The original run still waits for its approval, with its token.
    stored = await store.load_run(r.run_id)
    assert stored is not None and stored.status == "suspended"
    assert stored.suspended_on is not None and stored.suspended_on.token == r.state.suspended_on.token


async def test_a_revision_a_compaction_re_added_is_still_a_fork_point(store: SessionStore) -> None:
    conversation = Conversation()
    sess = Session(store=store, agent=compacting_agent(conversation))
    revisions: list[str] = []
    for i in range(30):
        r = await sess.start(prompt(i))
        assert r.state.history_revision_id is not None
        revisions.append(r.state.history_revision_id)
    assert conversation.summary_requests
    head = await thread_history(store, sess.thread_id)
    thread = await store.load_thread(sess.thread_id)
    assert thread is not None and thread.history_revision_id is not None
    current = await store.load_history(thread.history_revision_id)
    assert current is not None
    replaced = [rev for rev in revisions if not current.reaches(rev)]
    assert replaced  # some turns ended at revisions a compaction re-added after its summary
    point = replaced[-1]
    at = revisions.index(point)
    alt = await sess.fork(prompt(99), at_revision=point)
    forked = await history_at(store, alt.state.history_revision_id)
    users = [m.text for m in forked if m.role == "user" and not m.boundary]
    assert users == [prompt(i) for i in range(at + 1)] + [prompt(99)]
    assert len([m for m in head if not m.boundary]) == 120


async def test_a_revision_of_another_thread_or_an_unknown_one_is_not_found(store: SessionStore) -> None:
    conversation = Conversation()
    one, two = _session(store, conversation), _session(store, conversation)
    await one.start(prompt(0))
    other = await two.start(prompt(1))
    with pytest.raises(RevisionNotFound):
        await one.fork(prompt(2), at_revision=other.state.history_revision_id)
    with pytest.raises(RevisionNotFound):
        await one.fork(prompt(2), at_revision="01NOSUCHREVISION0000000000")
    # A fork of the other thread's fork point shares nothing with this thread: still not found.
    alt = await two.fork(prompt(3))
    with pytest.raises(RevisionNotFound):
        await one.fork(prompt(2), at_revision=alt.state.history_revision_id)
    assert len(await store.list_runs()) == 3  # nothing was forked by the refusals
    empty = _session(store, conversation)
    with pytest.raises(RevisionNotFound):
        await empty.fork(prompt(4), at_revision=other.state.history_revision_id)
