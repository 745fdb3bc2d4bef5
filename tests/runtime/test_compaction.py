"""Compaction on every store: long scripted conversations under a small token budget.

Every request stays under the budget, the history keeps every message (the summaries are extra
entries), tool calls stay paired with their results across boundaries, summaries stack (a later one
covers the earlier one and what followed), the summary's usage counts in the run, a message larger
than the budget fails before any request, a pending approval is never parted from its call, and a
concurrent writer makes an on-demand compaction retry without losing a message.
"""

from __future__ import annotations

from typing import Any

import pytest

from repertory import Agent, Compaction, ModelMessage, Session, ToolSpec
from repertory.errors import ModelError, RunCancelled
from repertory.runtime.compaction import SUMMARY_PREFIX, estimate_tokens
from repertory.storage import SessionStore
from repertory.testing import ScriptedModel
from tests.runtime.compact_script import (
    BUDGET,
    KEEP,
    SUMMARY_USAGE,
    Conversation,
    compacting_agent,
    prompt,
    turns_named,
)
from tests.runtime.helpers import assert_paired, thread_history

TURNS = 60


async def _head(store: SessionStore, thread_id: str) -> str | None:
    thread = await store.load_thread(thread_id)
    assert thread is not None
    return thread.history_revision_id


async def _context(store: SessionStore, thread_id: str) -> list[ModelMessage]:
    head = await _head(store, thread_id)
    assert head is not None
    history = await store.load_history(head)
    assert history is not None
    return history.context_messages()


async def _converse(sess: Session, turns: range) -> None:
    for i in turns:
        r = await sess.start(prompt(i))
        assert r.status == "done", r.state.error


async def test_a_long_conversation_stays_under_budget_and_keeps_every_message(store: SessionStore) -> None:
    conversation = Conversation()
    sess = Session(store=store, agent=compacting_agent(conversation))
    await _converse(sess, range(TURNS))

    # Every request, the summaries' included, was under the budget (the engine's own estimate).
    assert max(tokens for _, tokens, _ in conversation.requests) <= BUDGET

    thread = await store.load_thread(sess.thread_id)
    assert thread is not None and thread.history_revision_id is not None
    history = await store.load_history(thread.history_revision_id)
    assert history is not None
    messages = history.messages
    said = [m for m in messages if not m.boundary]
    boundaries = [m for m in messages if m.boundary]
    # Nothing was deleted: every turn's four messages, in order, plus one entry per summary.
    assert len(said) == 4 * TURNS
    assert [m.text for m in said if m.role == "user"] == [prompt(i) for i in range(TURNS)]
    assert len(boundaries) >= 3
    # A stretch too long for one summary request went in chunks, each carrying the summary so far.
    assert len(conversation.summary_requests) > len(boundaries)
    assert any("The summary of the transcript before this part" in r[-1].text for r in conversation.summary_requests)
    assert all(m.text.startswith(SUMMARY_PREFIX) and m.role == "user" for m in boundaries)
    # The full lineage and every request pair each call with one result: no cut parted a pair.
    assert_paired(messages)
    for request in conversation.agent_requests:
        assert_paired(request)

    # The model sees the latest summary and what follows it; the summaries stacked: the latest
    # covers every turn that is no longer in the context.
    context = history.context_messages()
    assert context[0] is boundaries[-1] or context[0] == boundaries[-1]
    visible = {n for m in context[1:] if m.role == "user" for n in turns_named(m.text)}
    assert turns_named(context[0].text) | visible == set(range(TURNS))
    for later in conversation.summary_requests[1:]:
        assert "covers t" in later[-1].text  # the earlier summary is in the request that replaces it

    # Right after each compaction the context is the summary and at most keep_last messages.
    after = [
        conversation.requests[i + 1][0]
        for i, (_, _, summary) in enumerate(conversation.requests[:-1])
        if summary and not conversation.requests[i + 1][2]
    ]
    assert after
    for request in after:
        assert request[0].role == "system" and request[1].boundary
        assert len(request) - 2 <= KEEP

    # The summaries' usage counts in the runs that compacted.
    runs = await store.list_runs(sess.thread_id)
    assert len(runs) == TURNS
    total = sum(r.usage.input_tokens for r in runs)
    assert total >= SUMMARY_USAGE["input_tokens"] * len(boundaries)
    assert sum(r.usage.requests for r in runs) == len(conversation.requests)
    assert sum(r.step_index for r in runs) == len(conversation.agent_requests)


async def test_a_new_session_on_the_thread_continues_from_the_latest_summary(store: SessionStore) -> None:
    conversation = Conversation()
    first = Session(store=store, agent=compacting_agent(conversation))
    await _converse(first, range(25))
    assert conversation.summary_requests
    again = Session(store=store, agent=compacting_agent(conversation), thread_id=first.thread_id)
    before = len(conversation.requests)
    await _converse(again, range(25, 27))
    request = conversation.requests[before][0]
    assert request[1].boundary  # the instructions, then the summary: not the whole history
    assert max(tokens for _, tokens, _ in conversation.requests) <= BUDGET


async def test_a_model_that_counts_its_tokens_is_asked_and_obeyed(store: SessionStore) -> None:
    class Counting(ScriptedModel):
        """Counts twice the estimate: the engine must go by the model's own count."""

        counted = 0

        async def count_tokens(self, messages: list[ModelMessage], tools: list[ToolSpec], settings: Any) -> int:
            self.counted += 1
            return 2 * estimate_tokens(messages, tools)

    conversation = Conversation()
    agent = compacting_agent(conversation, budget=3000)
    model = Counting(conversation)
    agent.model = model
    sess = Session(store=store, agent=agent)
    await _converse(sess, range(30))
    assert model.counted >= len(conversation.requests)
    assert max(2 * tokens for _, tokens, _ in conversation.requests) <= 3000
    assert conversation.summary_requests


async def test_a_message_larger_than_the_budget_is_a_model_error_before_any_request(store: SessionStore) -> None:
    conversation = Conversation()
    sess = Session(store=store, agent=compacting_agent(conversation, budget=1000))
    with pytest.raises(ModelError, match="larger than max_input_tokens=1000"):
        await sess.start("t0 " + "word " * 2000)
    assert conversation.requests == []
    assert sess.state is not None and sess.state.status == "error"
    messages = await thread_history(store, sess.thread_id)
    assert len(messages) == 1 and messages[0].text.startswith("t0 ")  # kept, never sent


async def test_a_pending_approval_is_never_parted_from_its_call(store: SessionStore) -> None:
    conversation = Conversation()
    agent = compacting_agent(conversation, keep=0)
    sess = Session(store=store, agent=agent)
    await _converse(sess, range(8))
    r = await sess.start("t8 wire the money")
    assert r.status == "suspended" and r.state.suspended_on is not None
    token = r.state.suspended_on.token

    compacted = await sess.compact()  # keep_last=0, yet the pending call must stay after the cut
    assert compacted is not None and compacted.kept == 1
    context = await _context(store, sess.thread_id)
    assert context[0].boundary and context[-1].tool_calls and context[-1].tool_calls[0].tool_name == "wire_money"
    # The run kept its token: the approval still goes through, and the model sees call and result.
    done = await sess.approve_tool(token)
    assert done.status == "done"
    request = conversation.agent_requests[-1]
    assert_paired(request)
    assert request[1].boundary and any(p.tool_name == "wire_money" for m in request for p in m.tool_results)
    assert sum(r.usage.input_tokens for r in await store.list_runs(sess.thread_id)) >= SUMMARY_USAGE["input_tokens"]


async def test_compact_on_demand_on_a_finished_thread_is_a_run_of_its_own(store: SessionStore) -> None:
    conversation = Conversation()
    sess = Session(store=store, agent=compacting_agent(conversation, budget=100_000))
    await _converse(sess, range(5))
    last = sess.state
    assert conversation.summary_requests == []
    result = await sess.compact()
    # Keeping the last 6 would part turn 3's call from its result: 5 are kept.
    assert result is not None and result.summarized == 15 and result.kept == 5
    assert result.usage.input_tokens == SUMMARY_USAGE["input_tokens"]
    assert sess.state is not None and last is not None and sess.state.run_id == last.run_id  # still the last turn's
    runs = await store.list_runs(sess.thread_id)
    own = next(r for r in runs if r.run_id == result.run_id)
    assert own.status == "done" and own.result is None and own.usage.input_tokens == SUMMARY_USAGE["input_tokens"]
    assert own.history_revision_id == await _head(store, sess.thread_id)
    messages = await thread_history(store, sess.thread_id)
    assert len(messages) == 21 and sum(m.boundary for m in messages) == 1
    # The next turn sees the summary and the kept messages, and goes on.
    await _converse(sess, range(5, 6))
    assert conversation.agent_requests[-2][1].boundary


async def test_compact_without_a_compaction_config_is_a_clear_error(store: SessionStore) -> None:
    sess = Session(store=store, agent=Agent(name="plain", model=ScriptedModel([{"text": "hi"}])))
    await sess.start("hello")
    with pytest.raises(ValueError, match="no Compaction"):
        await sess.compact()


async def test_compact_of_an_empty_thread_or_a_tiny_context_does_nothing(store: SessionStore) -> None:
    conversation = Conversation()
    sess = Session(store=store, agent=compacting_agent(conversation, budget=100_000))
    assert await sess.compact() is None
    await sess.start("t0 hi")
    first = await sess.compact()
    assert first is not None  # four messages, keep_last 6: the cut still summarises at least one
    assert await sess.compact() is not None  # again: the summary and more are folded in
    messages = await thread_history(store, sess.thread_id)
    assert len([m for m in messages if not m.boundary]) == 4


async def test_a_concurrent_writer_makes_compaction_retry_and_loses_nothing(backend: Any) -> None:
    store = backend.store
    conversation = Conversation()
    sess = Session(store=store, agent=compacting_agent(conversation, budget=100_000))
    await _converse(sess, range(6))
    other = Session(store=store, agent=compacting_agent(Conversation(), budget=100_000), thread_id=sess.thread_id)
    written: list[str] = []

    async def write_meanwhile() -> None:
        if not written:  # the first summary request: another writer takes the thread on meanwhile
            written.append("x")
            r = await other.start(prompt(100))
            assert r.status == "done"

    conversation.on_summary = write_meanwhile
    result = await sess.compact()
    assert result is not None
    assert len(conversation.summary_requests) == 2  # the first commit lost the race; the retry won
    messages = await thread_history(store, sess.thread_id)
    assert sum(m.boundary for m in messages) == 1
    assert [m.text for m in messages if m.role == "user" and not m.boundary] == [prompt(i) for i in [*range(6), 100]]
    assert_paired(messages)


async def test_a_cancel_during_the_summary_request_writes_no_summary(store: SessionStore) -> None:
    conversation = Conversation()
    agent = compacting_agent(conversation)
    sess = Session(store=store, agent=agent)
    await _converse(sess, range(8))

    async def cancel_meanwhile() -> None:
        # Another process cancels the run while its summary is being written.
        assert sess.state is not None
        elsewhere = Session(store=store, agent=agent, thread_id=sess.thread_id)
        elsewhere.adopt_state(await store.load_run(sess.state.run_id))
        await elsewhere.cancel()

    conversation.on_summary = cancel_meanwhile
    with pytest.raises(RunCancelled):
        await _converse(sess, range(8, 40))
    messages = await thread_history(store, sess.thread_id)
    assert not any(m.boundary for m in messages)
    assert_paired(messages)


async def test_compaction_with_its_own_model_and_instructions(store: SessionStore) -> None:
    summaries: list[list[ModelMessage]] = []

    def summarise(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
        summaries.append(list(messages))
        assert tools == []
        return {"text": "a summary by the other model"}

    conversation = Conversation()
    agent = compacting_agent(conversation)
    assert agent.compaction is not None
    agent.compaction = Compaction(
        max_input_tokens=BUDGET, keep_last=KEEP, model=ScriptedModel(summarise), instructions="Summarise tersely."
    )
    sess = Session(store=store, agent=agent)
    await _converse(sess, range(20))
    assert summaries and conversation.summary_requests == []
    assert all(s[0].role == "system" and s[0].text == "Summarise tersely." for s in summaries)
    messages = await thread_history(store, sess.thread_id)
    assert any(m.boundary and m.text.endswith("a summary by the other model") for m in messages)
