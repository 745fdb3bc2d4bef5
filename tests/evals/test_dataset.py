"""Datasets from a real stored tree: a case per user turn, cut before its message, with what the turn did."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from repertory.errors import SessionNotFound
from repertory.evals import (
    CaseInput,
    CaseMeta,
    EvalDataset,
    RecordedCall,
    SessionSelect,
    ToolTrajectory,
    TurnOutcome,
    dataset_from_sessions,
    load_dataset,
)
from repertory.storage.export import export_parquet

from .conftest import Stored


def _named(dataset: EvalDataset, session_id: str) -> list[str]:
    return [c.name or "" for c in dataset.cases if c.inputs.session_id == session_id]


async def test_each_user_turn_is_a_case_cut_just_before_its_message(stored: Stored) -> None:
    rt, world = stored.rt, stored.world
    dataset = await dataset_from_sessions(rt.store, SessionSelect(agent="ops"), agents=rt.agents)
    assert [c.name for c in dataset.cases] == [
        f"{world.booking}#1",
        f"{world.booking}#2",
        f"{world.delegating}#1",
        f"{world.rejected}#1",
    ]
    thread = await rt.store.load_thread(world.booking)
    assert thread is not None and thread.history_revision_id is not None
    history = await rt.store.load_history(thread.history_revision_id)
    assert history is not None
    lineage = history.lineage()
    runs = sorted(await rt.store.list_runs(world.booking), key=lambda r: r.created_at)
    first, second = dataset.cases[0], dataset.cases[1]
    assert first.inputs.revision_id is None and first.inputs.message == "book 3 apples"
    # The second turn starts where the first one's run ended: the revision of its reply.
    assert second.inputs.revision_id == runs[0].history_revision_id
    at = next(i for i, rev in enumerate(lineage) if rev.id == second.inputs.revision_id)
    following = history.entry(lineage[at + 1].entry_id)
    assert following is not None and following.message.role == "user" and following.message.text == "refund it"
    turns = await rt.store.list_turns(world.booking)
    assert [c.inputs.turn_id for c in dataset.cases[:2]] == [t.submission_id for t in turns]

    booked = first.expected_output
    assert booked is not None
    assert booked.text == "booked 3 apples at 2" and booked.status == "done" and booked.model == "ops-model"
    assert booked.tool_calls == [
        RecordedCall(tool_name="lookup", args={"item": "apples"}, result=2, idempotent=True),
        RecordedCall(tool_name="ledger", args={"entry": "3 apples"}, result="entry 1: 3 apples", idempotent=False),
    ]
    assert booked.usage == runs[0].usage and booked.usage.input_tokens == 36 and booked.usage.requests == 3
    assert booked.session_id == world.booking and booked.run_id == runs[0].run_id
    assert first.metadata == CaseMeta(agent="ops", owner="alice", turn_seq=1, created_at=turns[0].created_at)

    approved = second.expected_output
    assert approved is not None and approved.text == "refund done"
    assert approved.tool_calls == [
        RecordedCall(tool_name="refund", args={"amount": 6}, result="refunded 6", idempotent=False)
    ]
    rejected = dataset.cases[3].expected_output
    assert rejected is not None and rejected.text == "refund refused"
    assert rejected.tool_calls == [
        RecordedCall(tool_name="refund", args={"amount": 100}, result="too much", is_error=True, idempotent=False)
    ]
    delegated = dataset.cases[2].expected_output
    assert delegated is not None and delegated.text == "the clerk says: pears cost 3"
    assert delegated.tool_calls == [
        RecordedCall(tool_name="clerk", args={"task": "price of pears"}, result="pears cost 3", idempotent=False)
    ]


async def test_without_agents_idempotency_is_unknown_and_delegated_children_are_sessions_too(stored: Stored) -> None:
    rt, world = stored.rt, stored.world
    dataset = await dataset_from_sessions(rt.store)
    [child] = await rt.store.list_children(world.delegating)
    assert _named(dataset, child.session_id) == [f"{child.session_id}#1"]
    assert all(call.idempotent is None for case in dataset.cases for call in case.expected_output.tool_calls)  # type: ignore[union-attr]
    assert len(dataset.cases) == 6


async def test_a_selection_by_owner_metadata_time_ids_or_a_query_over_the_export(
    stored: Stored, tmp_path: Path
) -> None:
    rt, world = stored.rt, stored.world

    async def sessions(select: SessionSelect) -> list[str]:
        dataset = await dataset_from_sessions(rt.store, select)
        return list(dict.fromkeys(c.inputs.session_id for c in dataset.cases))

    assert await sessions(SessionSelect(owner="alice")) == [world.booking, world.rejected]
    assert await sessions(SessionSelect(metadata={"channel": "web"})) == [world.booking]
    assert await sessions(SessionSelect(metadata={"channel": "phone"})) == []
    rejected = await rt.store.load_session(world.rejected)
    assert rejected is not None
    assert await sessions(SessionSelect(agent="ops", created_after=rejected.created_at)) == [world.rejected]
    assert world.rejected not in await sessions(SessionSelect(agent="ops", created_before=rejected.created_at))
    assert await sessions(SessionSelect(session_ids=[world.greeting, world.booking])) == [world.booking, world.greeting]
    assert await sessions(SessionSelect(agent="ops", limit=1)) == [world.booking]

    last = await dataset_from_sessions(rt.store, SessionSelect(session_ids=[world.booking], turns="last"))
    assert [c.name for c in last.cases] == [f"{world.booking}#2"]

    out = tmp_path / "export"
    await export_parquet(rt.store, out)
    query = "SELECT session_id FROM sessions WHERE agent = 'clerk' AND lineage_kind = 'root'"
    assert await sessions(SessionSelect(sql=query, export_dir=str(out))) == [world.greeting]
    # The query's ids and the explicit ones together, then the filters.
    both = SessionSelect(sql=query, export_dir=str(out), session_ids=[world.delegating], owner="bob")
    assert await sessions(both) == [world.delegating, world.greeting]

    with pytest.raises(SessionNotFound):
        await dataset_from_sessions(rt.store, SessionSelect(session_ids=["no-such-session"]))
    with pytest.raises(ValidationError, match="export_dir"):
        SessionSelect(sql=query)


@pytest.mark.parametrize("suffix", ["yaml", "json"])
async def test_a_dataset_saved_as_yaml_or_json_loads_back_equal(stored: Stored, tmp_path: Path, suffix: str) -> None:
    dataset = await dataset_from_sessions(stored.rt.store, agents=stored.rt.agents, name="shop")
    dataset.add_evaluator(ToolTrajectory(args="subset"))
    path = tmp_path / f"shop.{suffix}"
    dataset.to_file(path)
    loaded = load_dataset(path)
    assert loaded.name == "shop"
    assert len(loaded.cases) == len(dataset.cases) == 6
    for saved, back in zip(dataset.cases, loaded.cases, strict=True):
        assert isinstance(back.inputs, CaseInput) and isinstance(back.expected_output, TurnOutcome)
        assert isinstance(back.metadata, CaseMeta)
        assert (back.name, back.inputs, back.expected_output, back.metadata) == (
            saved.name,
            saved.inputs,
            saved.expected_output,
            saved.metadata,
        )
    assert [e.as_spec() for e in loaded.evaluators] == [e.as_spec() for e in dataset.evaluators]
    assert loaded.model_dump(mode="json") == dataset.model_dump(mode="json")
