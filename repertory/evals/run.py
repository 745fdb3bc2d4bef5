"""``run_eval``: run a variant on every case of a dataset, each in a fork of its stored conversation.

pydantic-evals runs the cases (``Dataset.evaluate``: its concurrency limit, its evaluators, its
report); the task it runs per case is ``_CaseRunner``: fork the source session at the case's
revision through the session tree, bind the fork to the variant agent, send the case's message as
one turn, wait for it to rest and read what it did (``TurnOutcome``) from the store.

Durable: the forks and their turns are in the store. Run again with the same ``name`` (after a
crash, in a new process), each case finds its fork by its metadata and reads its turn, driving on
a turn the dead process left open (``SessionHandle.recover``), instead of forking again: a case
has one fork per eval. A runtime restarted after such a crash that does not serve the variant
leaves those turns open (it logs them) and ``run_eval`` drives them when it runs again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_evals.evaluators import Evaluator
from pydantic_evals.reporting import EvaluationReport

from repertory.core.budget import Budget
from repertory.core.model import Model
from repertory.errors import RepertoryError
from repertory.evals.dataset import EvalCase, EvalDataset
from repertory.evals.forks import case_fork
from repertory.evals.outcome import outcome_of, read_turn
from repertory.evals.records import CaseInput, CaseMeta, TurnOutcome
from repertory.evals.replay import recordings_of
from repertory.evals.variant import ToolMode, variant_agent, variant_name
from repertory.runtime import Agent
from repertory.tree import Runtime

__all__ = ["EvalReport", "run_eval", "score_recorded"]

EvalReport = EvaluationReport[CaseInput, TurnOutcome, CaseMeta]
"""What ``run_eval`` returns: pydantic-evals' report over the dataset's records."""


def _with_evaluators(dataset: EvalDataset, evaluators: Sequence[Evaluator[Any, Any, Any]]) -> EvalDataset:
    """The dataset with ``evaluators`` added to its own (a new dataset: the caller's is not changed)."""
    if not evaluators:
        return dataset
    return EvalDataset(
        name=dataset.name,
        cases=dataset.cases,
        evaluators=[*dataset.evaluators, *evaluators],
        report_evaluators=dataset.report_evaluators,
    )


@dataclass
class _CaseRunner:
    """The task pydantic-evals runs per case: one turn of the variant in the case's fork."""

    runtime: Runtime
    name: str
    cases: Mapping[str, EvalCase]
    agent: str | Agent | None
    model: Model | None
    instructions: str | None
    tools: ToolMode
    budget: Budget | None

    made: dict[str, tuple[str, Agent]] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def variant(self, inputs: CaseInput) -> tuple[str, Agent]:
        """The variant's registered name and the agent it is made from; built and registered once per run.

        On the local backend the variant is (re)registered in the host's live agent table, so a
        second ``run_eval`` of the same eval runs the configuration it is given now. Another
        backend must have been started with it (``variant_agent``, ``variant_name``).
        """
        original = self.agent
        if not isinstance(original, Agent):
            source = original
            if source is None:
                record = await self.runtime.store.load_session(inputs.session_id)
                if record is None:
                    raise RepertoryError(f"no session {inputs.session_id!r}", session_id=inputs.session_id)
                source = record.agent
            known = self.runtime.host.agents
            if source not in known:
                raise ValueError(f"the eval's agent {source!r} is not registered in this runtime")
            original = known[source]
        async with self.lock:
            done = self.made.get(original.name)
            if done is not None:
                return done
            name = variant_name(original.name, self.name)
            agents = self.runtime.host.agents
            if self.runtime.backend == "local":
                agents[name] = await variant_agent(
                    original,
                    name=name,
                    store=self.runtime.store,
                    model=self.model,
                    instructions=self.instructions,
                    tools=self.tools,
                )
            elif name not in agents:
                raise ValueError(
                    f"on the {self.runtime.backend!r} backend the variant is registered at start: "
                    f"agents={{{name!r}: await variant_agent(...)}}"
                )
            self.made[original.name] = (name, original)
            return name, original

    async def __call__(self, inputs: CaseInput) -> TurnOutcome:
        """Fork (or find the fork), send the message once, wait for the turn to rest, read what it did."""
        case = self.cases.get(inputs.turn_id)
        expected = None if case is None else case.expected_output
        name, original = await self.variant(inputs)
        recorded = recordings_of(expected.tool_calls if expected is not None else [])
        fork = await case_fork(self.runtime, self.name, inputs, agent=name, recorded=recorded, budget=self.budget)
        store = self.runtime.store
        turns = [t for t in await store.list_turns(fork.id) if t.kind == "message"]
        if not turns:
            turn = await fork.send(inputs.message)
        else:
            turn = fork.get_turn(turns[0].submission_id)
            if turns[0].status in ("queued", "running"):
                await fork.recover()  # left open by a process that died; not driven twice if driven here
        await turn.wait()
        record = await store.load_turn(turn.submission_id)
        read = None if record is None else await read_turn(store, record)
        if read is None:
            raise RepertoryError(f"the turn {turn.submission_id!r} of fork {fork.id!r} has no run to read")
        return outcome_of(read, idempotent={n: t.idempotent for n, t in original.tools.items()})


async def run_eval(
    runtime: Runtime,
    dataset: EvalDataset,
    *,
    name: str,
    agent: str | Agent | None = None,
    model: Model | None = None,
    instructions: str | None = None,
    tools: ToolMode = "replay",
    concurrency: int = 4,
    budget: Budget | None = None,
    evaluators: Sequence[Evaluator[Any, Any, Any]] = (),
    out_dir: str | Path | None = None,
    progress: bool = False,
) -> EvalReport:
    """Run a variant on every case in a fork of its conversation; score it with pydantic-evals.

    The variant is ``agent`` (a registered name or an ``Agent``; default: each case's own agent)
    with ``model``, ``instructions`` and ``budget`` where given, its tools replayed (``tools=
    "replay"``: nothing runs, every call answered from the case's recording) or, for idempotent
    ones, run (``"live"``); see ``variant_agent``. It is registered as ``<agent>.eval.<name>`` on
    the local backend (another backend needs it registered at start). ``concurrency`` cases run at
    once. Each case's fork is a tree of its own (``repertory.evals.forks``): ``budget`` caps what
    each case's tree spends (the variant's delegations too), never touching the production tree's
    budget; an owner's budget counts the eval's spend as that owner's. ``evaluators`` are added to
    the dataset's own. ``out_dir`` (the export's
    folder) receives the ``eval_runs`` and ``eval_scores`` Parquet tables. Each case's output is
    its fork's ``TurnOutcome``; a case whose turn could not run is a failure of the report.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if not name:
        raise ValueError("an eval needs a name: its forks are found by it")
    cases = {case.inputs.turn_id: case for case in dataset.cases}
    if len(cases) != len(dataset.cases):
        raise ValueError("the dataset holds one source turn twice: a case has one fork per eval")
    runner = _CaseRunner(runtime, name, cases, agent, model, instructions, tools, budget)
    report = await _with_evaluators(dataset, evaluators).evaluate(
        runner, name=name, task_name="variant", max_concurrency=concurrency, progress=progress
    )
    if out_dir is not None:
        from repertory.evals.tables import write_results

        write_results(report, out_dir, dataset=dataset.name)
    return report


async def score_recorded(
    dataset: EvalDataset,
    *,
    name: str = "recorded",
    evaluators: Sequence[Evaluator[Any, Any, Any]] = (),
    out_dir: str | Path | None = None,
) -> EvalReport:
    """Score what the stored turns did with the same evaluators: the baseline a variant is compared with.

    Nothing runs: each case's output is its expected output. Written to ``out_dir`` like a variant,
    so ``compare_variants('recorded', 'v2')`` sets the two side by side.
    """
    cases = {case.inputs.turn_id: case for case in dataset.cases}

    async def recorded(inputs: CaseInput) -> TurnOutcome:
        expected = cases[inputs.turn_id].expected_output
        if expected is None:
            raise ValueError(f"case of turn {inputs.turn_id!r} has no recorded outcome")
        return expected

    report = await _with_evaluators(dataset, evaluators).evaluate(
        recorded, name=name, task_name="recorded", progress=False
    )
    if out_dir is not None:
        from repertory.evals.tables import write_results

        write_results(report, out_dir, dataset=dataset.name)
    return report
