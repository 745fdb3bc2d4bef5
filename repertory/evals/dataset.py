"""``dataset_from_sessions``: a pydantic-evals ``Dataset`` whose cases are real turns of stored sessions.

Each case is one user turn: its input is the source session, the revision just before the user's
message and that message; its expected output is what the stored turn did (``TurnOutcome``: the
reply, every tool call with its recorded result, the run's status, usage and latency). Nothing is
copied out of the history but that record: a variant forks the session at the case's revision,
which costs nothing. The dataset is pydantic-evals' own, so ``to_file``/``from_file`` save it as
YAML or JSON and ``load_dataset`` reads it back into the same typed records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import Evaluator

from repertory.core.store import TreeStore
from repertory.evals.outcome import outcome_of, read_turn
from repertory.evals.records import CaseInput, CaseMeta, TurnOutcome
from repertory.evals.select import SessionSelect, select_sessions
from repertory.runtime import Agent

__all__ = ["EvalCase", "EvalDataset", "dataset_from_sessions", "load_dataset"]

EvalDataset: TypeAlias = Dataset[CaseInput, TurnOutcome, CaseMeta]
"""The dataset of stored turns: ``Dataset[CaseInput, TurnOutcome, CaseMeta]``."""

EvalCase: TypeAlias = Case[CaseInput, TurnOutcome, CaseMeta]
"""One case of an ``EvalDataset``."""


async def dataset_from_sessions(
    store: TreeStore,
    select: SessionSelect | None = None,
    *,
    name: str = "sessions",
    agents: Mapping[str, Agent] | None = None,
) -> EvalDataset:
    """A dataset of the user turns of the sessions ``select`` keeps (every session without one).

    Turns still queued or running are left out, as are turns whose run never started. Cases are
    named ``<session id>#<turn seq>`` and ordered by session, then turn. ``agents`` (a runtime's
    ``rt.agents``) says which tools are idempotent (``RecordedCall.idempotent``); without it that
    is left unknown, and ``run_eval`` asks the agent it runs instead.
    """
    chosen = select or SessionSelect()
    cases: list[EvalCase] = []
    for record in await select_sessions(store, chosen):
        agent = None if agents is None else agents.get(record.agent)
        idempotent = None if agent is None else {n: t.idempotent for n, t in agent.tools.items()}
        reads = []
        for turn in await store.list_turns(record.session_id):
            if turn.kind != "message" or turn.status in ("queued", "running"):
                continue
            read = await read_turn(store, turn)
            if read is not None:
                reads.append(read)
        if chosen.turns == "last":
            reads = reads[-1:]
        for read in reads:
            cases.append(
                Case(
                    name=f"{record.session_id}#{read.turn.seq}",
                    inputs=CaseInput(
                        session_id=record.session_id,
                        turn_id=read.turn.submission_id,
                        revision_id=read.cut,
                        message=read.turn.message.text,
                    ),
                    expected_output=outcome_of(read, idempotent=idempotent),
                    metadata=CaseMeta(
                        agent=record.agent,
                        owner=record.owner,
                        turn_seq=read.turn.seq,
                        created_at=read.turn.created_at,
                    ),
                )
            )
    return EvalDataset(name=name, cases=cases)


def load_dataset(
    path: str | Path, custom_evaluator_types: Sequence[type[Evaluator[Any, Any, Any]]] = ()
) -> EvalDataset:
    """Read a dataset saved with ``to_file`` (YAML or JSON by its suffix) into the typed records.

    The evaluators of ``repertory.evals`` that a file may name are known without being listed;
    ``custom_evaluator_types`` adds your own (pydantic-evals' rule for loading evaluators).
    """
    from repertory.evals.evaluators import SAVED_EVALUATORS

    return EvalDataset.from_file(path, custom_evaluator_types=[*SAVED_EVALUATORS, *custom_evaluator_types])
