"""``run_eval`` on a real stored tree: forks through the session tree, replayed tools, scores, Parquet."""

from __future__ import annotations

import re
from pathlib import Path

from repertory import Budget
from repertory.core.budget import BudgetStore, owner_scope, tree_scope
from repertory.evals import (
    NOT_RECORDED,
    EvalDataset,
    EvalReport,
    Latency,
    ModelJudge,
    ReplyContains,
    ReplyEquals,
    SessionSelect,
    TokensAndCost,
    ToolTrajectory,
    TurnOutcome,
    connect,
    dataset_from_sessions,
    find_fork,
    run_eval,
    score_recorded,
    variant_name,
)
from repertory.storage.export import export_parquet
from repertory.testing import ScriptedModel

from .conftest import Stored
from .world import careless_script, count_lines, ops_script


async def _ops_dataset(stored: Stored) -> EvalDataset:
    return await dataset_from_sessions(stored.rt.store, SessionSelect(agent="ops"), agents=stored.rt.agents)


def _logs(stored: Stored) -> dict[str, int]:
    return {name: count_lines(stored.folder / f"{name}.log") for name in ("ledger", "lookup", "refund")}


def _outputs(report: EvalReport) -> dict[str, TurnOutcome]:
    return {case.name: case.output for case in report.cases}


async def test_replay_with_the_original_model_reproduces_every_turn_and_runs_no_tool(stored: Stored) -> None:
    rt, world = stored.rt, stored.world
    dataset = await _ops_dataset(stored)
    before = _logs(stored)
    clerk_children = await rt.store.list_children(world.delegating)
    heads = {sid: await rt.store.load_thread(sid) for sid in (world.booking, world.delegating, world.rejected)}

    report = await run_eval(
        rt, dataset, name="same", model=ScriptedModel(ops_script, name="same-model"),
        evaluators=[ReplyEquals(), ToolTrajectory(), Latency(), TokensAndCost()],
    )  # fmt: skip

    assert report.failures == []
    assert _logs(stored) == before  # the ledger, the lookup and the refund were never invoked
    for case in report.cases:
        assert case.expected_output is not None
        out, expected = case.output, case.expected_output
        assert (out.text, out.status) == (expected.text, expected.status)
        assert [(c.tool_name, c.args, c.result, c.is_error) for c in out.tool_calls] == [
            (c.tool_name, c.args, c.result, c.is_error) for c in expected.tool_calls
        ]
        assert out.model == "same-model" and out.session_id != case.inputs.session_id
        assert case.assertions["ReplyEquals"].value is True
        assert case.assertions["ToolTrajectory"].value is True
        assert case.scores["total_tokens"].value == out.usage.total_tokens and out.usage.requests >= 1
        assert case.scores["latency_ms"].value == out.latency_ms

        fork = await find_fork(rt, "same", case.inputs)
        assert fork is not None and fork.id == out.session_id
        record = fork.record
        assert record.agent == "ops.eval.same"
        assert record.metadata["eval"] == "same" and record.metadata["eval_case"] == case.inputs.turn_id
        assert record.metadata["source_session"] == case.inputs.session_id
        assert record.owner == (await rt.store.load_session(case.inputs.session_id)).owner  # type: ignore[union-attr]
        # A tree of its own: not the production session's child, its spend counted apart.
        assert record.root_id == record.session_id and record.lineage.parent_id is None
        if case.inputs.revision_id is None:
            assert record.lineage.kind == "root"
        else:
            assert record.lineage.kind == "forked"
            assert record.lineage.forked_at_revision_id == case.inputs.revision_id
            # The fork starts from the source's own revisions: nothing before the cut was copied.
            source_prefix = await rt.store.load_history(case.inputs.revision_id)
            fork_thread = await rt.store.load_thread(fork.id)
            assert fork_thread is not None and fork_thread.history_revision_id is not None
            fork_history = await rt.store.load_history(fork_thread.history_revision_id)
            assert source_prefix is not None and fork_history is not None
            assert [r.id for r in fork_history.lineage()[: source_prefix.depth]] == [
                r.id for r in source_prefix.lineage()
            ]

    # The sources are as they were: same heads, the same children, and the delegation replayed
    # in the eval spawned no clerk child of the fork.
    for sid, head in heads.items():
        assert await rt.store.load_thread(sid) == head
    assert await rt.store.list_children(world.delegating) == clerk_children
    delegated_fork = next(c for c in report.cases if c.inputs.session_id == world.delegating).output.session_id
    assert await rt.store.list_children(delegated_fork) == []
    # Forks are apart from production: a new dataset leaves them out.
    assert len((await _ops_dataset(stored)).cases) == len(dataset.cases)


async def test_a_variant_whose_model_differs_gets_not_recorded_for_a_new_call(stored: Stored) -> None:
    rt, world = stored.rt, stored.world
    dataset = await _ops_dataset(stored)
    before = _logs(stored)
    model = ScriptedModel(careless_script, name="careless")
    report = await run_eval(
        rt, dataset, name="careless", model=model, instructions="Be careless.",
        evaluators=[ReplyEquals(), ReplyContains("refund"), ToolTrajectory()],
    )  # fmt: skip
    assert _logs(stored) == before
    assert rt.host.agents["ops.eval.careless"].instructions == "Be careless."
    assert rt.host.agents["ops.eval.careless"].model is model

    booked = next(c for c in report.cases if c.name == f"{world.booking}#1")
    lookup, ledger = booked.output.tool_calls
    assert (lookup.tool_name, lookup.result, lookup.is_error) == ("lookup", 2, False)  # recorded: answered
    assert ledger.tool_name == "ledger" and ledger.is_error
    assert isinstance(ledger.result, str) and ledger.result.startswith(NOT_RECORDED)
    assert booked.output.text == f"could not book: {ledger.result}"
    assert booked.assertions["ReplyEquals"].value is False
    trajectory = booked.assertions["ToolTrajectory"]
    assert trajectory.value is False
    assert trajectory.reason == "call 1 (ledger): arguments {'entry': '3 apples'} != {'entry': 'three apples'}"
    assert booked.assertions["ReplyContains"].value is False

    refund = next(c for c in report.cases if c.name == f"{world.booking}#2")
    assert refund.output.text == "refund done" and refund.assertions["ToolTrajectory"].value is True
    assert refund.assertions["ReplyContains"].value is True
    # The approved refund is answered with its recorded result: no approval is asked in the fork.
    fork = await rt.session(refund.output.session_id)
    assert await fork.pending_approvals() == []


async def test_live_mode_runs_idempotent_tools_and_replays_the_rest(stored: Stored) -> None:
    rt, world = stored.rt, stored.world
    dataset = await _ops_dataset(stored)
    before = _logs(stored)
    report = await run_eval(rt, dataset, name="live", model=ScriptedModel(ops_script), tools="live")
    after = _logs(stored)
    assert after["lookup"] == before["lookup"] + 1  # the booking case's lookup ran for real
    assert after["ledger"] == before["ledger"] and after["refund"] == before["refund"]
    assert report.failures == []
    assert all(c.output.text == c.expected_output.text for c in report.cases if c.expected_output is not None)
    assert len(await rt.store.list_children(world.delegating)) == 1  # the original clerk child alone
    delegated_fork = next(c for c in report.cases if c.inputs.session_id == world.delegating).output.session_id
    assert await rt.store.list_children(delegated_fork) == []  # the delegation was replayed


async def test_a_second_run_of_an_eval_reads_its_forks_instead_of_forking_again(stored: Stored) -> None:
    rt = stored.rt
    dataset = await _ops_dataset(stored)
    model = ScriptedModel(ops_script)
    first = await run_eval(rt, dataset, name="again", model=model, concurrency=2)
    asked = model.requests
    second = await run_eval(rt, dataset, name="again", model=model, concurrency=1)
    assert model.requests == asked  # every turn was read, none run again
    assert _outputs(second) == _outputs(first)
    for case in dataset.cases:
        forks = [
            c
            for c in await rt.store.list_sessions()
            if c.metadata.get("eval") == "again" and c.metadata.get("eval_case") == case.inputs.turn_id
        ]
        assert len(forks) == 1
        assert len(await rt.store.list_turns(forks[0].session_id)) == 1


async def test_a_budget_caps_each_cases_own_tree_and_leaves_the_production_tree_alone(stored: Stored) -> None:
    rt, world = stored.rt, stored.world
    # The production tree has a budget that cancels it when crossed: an eval must neither pay from it nor cross it.
    production = Budget(max_model_requests=100, on_exceed="cancel_tree")
    await rt.set_budget(tree_scope(world.booking), production)
    before = await (await rt.session(world.booking)).budget()
    dataset = await _ops_dataset(stored)
    capped = Budget(max_model_requests=2, on_exceed="cancel_tree")
    report = await run_eval(rt, dataset, name="capped", model=ScriptedModel(ops_script), budget=capped)
    outcomes = {c.name: c.output for c in report.cases}
    assert outcomes[f"{world.booking}#1"].status == "error"  # it needs three requests
    assert outcomes[f"{world.booking}#1"].usage.requests == 2
    assert outcomes[f"{world.delegating}#1"].status == "done"  # two are enough
    for case in report.cases:
        ledger = await (await rt.session(case.output.session_id)).budget()
        assert ledger is not None and ledger.budget == capped
        assert ledger.spend.model_requests == case.output.usage.requests
    booking = await rt.session(world.booking)
    assert await booking.budget() == before  # nothing of the eval was counted against the production tree
    assert [t.status for t in await rt.store.list_turns(world.booking)] == ["done", "done"]  # and nothing cancelled


async def test_an_owner_budget_counts_the_eval_as_that_owners_spend(stored: Stored) -> None:
    rt = stored.rt
    await rt.set_budget(owner_scope("bob"), Budget(max_model_requests=1_000))
    dataset = await _ops_dataset(stored)
    report = await run_eval(rt, dataset, name="owned", model=ScriptedModel(ops_script))
    store = rt.store
    assert isinstance(store, BudgetStore)
    spent = (await store.load_ledgers([owner_scope("bob")]))[owner_scope("bob")].spend.model_requests
    bobs = [c for c in report.cases if (await store.load_session(c.inputs.session_id)).owner == "bob"]  # type: ignore[union-attr]
    assert bobs and spent == sum(c.output.usage.requests for c in bobs)


async def test_a_judge_on_a_repertory_model_scores_with_a_reason(stored: Stored) -> None:
    dataset = await _ops_dataset(stored)
    judge_model = ScriptedModel([{"json": {"reason": "polite and right", "pass": True, "score": 0.75}}])
    report = await score_recorded(dataset, evaluators=[ModelJudge(rubric="Is the reply polite?", model=judge_model)])
    assert judge_model.requests == len(dataset.cases)
    for case in report.cases:
        assert case.scores["ModelJudge_score"].value == 0.75
        assert case.scores["ModelJudge_score"].reason == "polite and right"
        assert case.assertions["ModelJudge_pass"].value is True

    confused = ScriptedModel([{"text": "I think it is fine"}])
    report = await score_recorded(dataset, evaluators=[ModelJudge(rubric="polite?", model=confused)])
    for case in report.cases:
        assert case.scores == {} and case.assertions == {}
        [failure] = case.evaluator_failures
        assert "did not answer with a verdict" in failure.error_message


async def test_the_parquet_scores_equal_the_report_and_compare_variants_sets_them_side_by_side(
    stored: Stored, tmp_path: Path
) -> None:
    rt, world = stored.rt, stored.world
    out = tmp_path / "analytics"
    await export_parquet(rt.store, out)
    dataset = await _ops_dataset(stored)
    evaluators = [ReplyEquals(), ToolTrajectory(), TokensAndCost()]
    baseline = await score_recorded(dataset, evaluators=evaluators, out_dir=out)
    variant = await run_eval(
        rt, dataset, name="careless", model=ScriptedModel(careless_script), evaluators=evaluators, out_dir=out
    )
    await export_parquet(rt.store, out)  # the forks join the export like any session

    con = connect(out)
    for report in (baseline, variant):
        expected = sorted(
            (case.name, name, float(result.value), result.reason)
            for case in report.cases
            for name, result in [*case.assertions.items(), *case.scores.items()]
        )
        rows = con.execute(
            "SELECT case_name, name, value, reason FROM eval_scores WHERE eval = ? ORDER BY ALL", [report.name]
        ).fetchall()
        assert sorted(rows) == expected and rows
    runs = con.execute(
        "SELECT r.case_name, r.status, r.text, s.lineage_kind, s.parent_id, r.source_session_id FROM eval_runs AS r"
        " JOIN sessions AS s ON s.session_id = r.fork_session_id WHERE r.eval = 'careless' ORDER BY r.case_name"
    ).fetchall()
    assert [(r[0], r[1], r[2]) for r in runs] == sorted((c.name, c.output.status, c.output.text) for c in variant.cases)
    assert {r[4] for r in runs} == {None}  # each fork is a tree of its own; eval_runs links it to its source
    assert {r[5] for r in runs} == {c.inputs.session_id for c in dataset.cases}
    side = con.execute(
        "SELECT a_value, b_value, delta FROM compare_variants('recorded', 'careless')"
        " WHERE case_name = ? AND name = 'ToolTrajectory'",
        [f"{world.booking}#1"],
    ).fetchall()
    assert side == [(1.0, 0.0, -1.0)]
    summary = con.execute("SELECT cases, passed FROM eval_summary WHERE eval = 'careless' AND name = 'ReplyEquals'")
    assert summary.fetchall() == [(len(dataset.cases), len(dataset.cases) - 1)]

    # Written again (a resumed eval), the eval's rows are replaced, not added.
    await run_eval(
        rt, dataset, name="careless", model=ScriptedModel(careless_script), evaluators=evaluators, out_dir=out
    )
    con = connect(out)
    count = con.execute("SELECT count(*) FROM eval_runs WHERE eval = 'careless'").fetchone()
    assert count == (len(dataset.cases),)


async def test_a_server_built_on_a_runtime_that_ran_an_eval_serves_the_variant_as_any_agent(stored: Stored) -> None:
    from repertory.http import create_app

    rt = stored.rt
    dataset = await _ops_dataset(stored)
    await run_eval(rt, dataset, name="served: v1", model=ScriptedModel(ops_script))
    name = variant_name("ops", "served: v1")
    assert name in rt.host.agents and re.fullmatch(r"[A-Za-z0-9._-]{1,128}", name)
    assert name != variant_name("ops", "served- v1")  # names that differ only where they were changed stay apart
    create_app(rt)  # the MCP server accepts every agent's name as a tool name
