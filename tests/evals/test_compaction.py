"""Datasets across compaction boundaries: each case cuts where the model stood, and replays from there.

A stored session of the compaction tests' agent (``tests/runtime/compact_script.py``: a lookup per
turn, padded prompts, a small token budget) runs long enough to be compacted several times, some of
them inside a turn's own run (the summary then lands before that turn's input). Each case must cut
just before its user message, on the lineage that turn's run saw: everything said before it, the
summaries included, and nothing after. Replayed with the same script, every case gives the
recorded reply and trajectory, and no request of the variant passes the budget: the fork starts
from the summary, not from the whole history.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from repertory import Runtime
from repertory.evals import EvalDataset, ReplyEquals, SessionSelect, ToolTrajectory, dataset_from_sessions, run_eval
from repertory.testing import ScriptedModel
from tests.runtime.compact_script import Conversation, compacting_agent, prompt

TURNS = 14
BUDGET = 700
"""Small enough that 14 turns are compacted twice, each time inside a turn's run."""


@pytest.fixture
async def compacted(tmp_path: Path) -> AsyncIterator[tuple[Runtime, str]]:
    agents = {"compacting": compacting_agent(Conversation(), budget=BUDGET)}
    async with await Runtime.start(store=f"sqlite:///{tmp_path / 'compacted.db'}", agents=agents) as rt:
        handle = await rt.create_session(agent="compacting", owner="alice")
        for i in range(TURNS):
            assert (await handle.run(prompt(i))).status == "done"
        yield rt, handle.id


async def _dataset(rt: Runtime, session_id: str) -> EvalDataset:
    return await dataset_from_sessions(rt.store, SessionSelect(session_ids=[session_id]), agents=rt.agents)


async def test_each_case_cuts_just_before_its_message_on_the_lineage_its_run_saw(
    compacted: tuple[Runtime, str],
) -> None:
    rt, session_id = compacted
    store = rt.store
    dataset = await _dataset(rt, session_id)
    assert [c.inputs.message for c in dataset.cases] == [prompt(i) for i in range(TURNS)]
    assert dataset.cases[0].inputs.revision_id is None  # the first message opened the conversation
    after_boundary = compacted_in_turn = 0
    turns = {t.submission_id: t for t in await store.list_turns(session_id)}
    for i, case in enumerate(dataset.cases[1:], start=1):
        cut = case.inputs.revision_id
        assert cut is not None
        before = await store.load_history(cut)
        assert before is not None
        said = [m for m in before.messages if not m.boundary]
        # Everything said before the turn, in order, and nothing of it or after it.
        assert [m.text for m in said if m.role == "user"] == [prompt(j) for j in range(i)]
        assert len(said) == 4 * i and said[-1].role == "assistant"
        if any(m.boundary for m in before.messages):
            after_boundary += 1
            assert before.context_messages()[0].boundary  # the model would start from the summary
        # On the turn's own run's lineage, the input is the message right after the cut.
        run = await store.load_run(turns[case.inputs.turn_id].run_id)
        assert run is not None and run.history_revision_id is not None and run.input_depth is not None
        ran = await store.load_history(run.history_revision_id)
        assert ran is not None
        lineage = ran.lineage()
        [at] = [k for k, rev in enumerate(lineage) if rev.parent_id == cut]
        entry = ran.entry(lineage[at].entry_id)
        assert entry is not None and entry.message.role == "user" and entry.message.text == prompt(i)
        if at > run.input_depth:  # a summary went in before the input during this very run
            compacted_in_turn += 1
            # The cut is on the lineage with the summary this run made, not on the one before it.
            assert sum(m.boundary for m in before.messages) == sum(m.boundary for m in ran.messages) >= 1
        assert case.expected_output is not None
        assert [c.args for c in case.expected_output.tool_calls] == [{"q": f"q{i}"}]
    assert after_boundary >= TURNS // 2 and compacted_in_turn >= 1


async def test_cases_after_a_boundary_replay_the_recorded_turns_from_the_summary(
    compacted: tuple[Runtime, str],
) -> None:
    rt, session_id = compacted
    dataset = await _dataset(rt, session_id)
    variant = Conversation()
    report = await run_eval(
        rt,
        dataset,
        name="replayed",
        model=ScriptedModel(variant, name="same-script"),
        evaluators=[ReplyEquals(), ToolTrajectory()],
    )
    assert report.failures == [] and len(report.cases) == TURNS
    for case in report.cases:
        assert case.expected_output is not None
        assert case.output.text == case.expected_output.text == "answer from lookup"
        assert case.assertions["ReplyEquals"].value is True
        assert case.assertions["ToolTrajectory"].value is True, case.assertions["ToolTrajectory"].reason
        assert [c.result for c in case.output.tool_calls] == [c.result for c in case.expected_output.tool_calls]
    # No request of the variant passed the budget: each fork started from the summary of its cut.
    assert variant.agent_requests and max(tokens for _, tokens, _ in variant.requests) <= BUDGET
    late = [c for c in report.cases if c.inputs.turn_id == dataset.cases[-1].inputs.turn_id]
    [last] = late
    fork = await rt.store.load_thread(last.output.session_id)
    assert fork is not None and fork.history_revision_id is not None
    history = await rt.store.load_history(fork.history_revision_id)
    assert history is not None and history.context_messages()[0].boundary
    said = [m for m in history.messages if not m.boundary and m.role == "user"]
    assert [m.text for m in said] == [prompt(j) for j in range(TURNS)]  # the shared prefix, then the case's message
