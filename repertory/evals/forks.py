"""The fork of a case: made once per eval and case through the session tree, found again by its id.

A case's fork shares the source session's conversation up to the case's revision
(``SessionHandle.fork(at_revision=..., own_tree=True)``: no copy) and is the root of a tree of its
own: it is not a child of the production session, cancelling or walking the production tree never
reaches it, and what it spends counts against the eval's ``budget`` (its own tree's), never the
production tree's. Its id is derived from the eval's name and the case (``fork_id``), so a second
run of the same eval, in any process, finds it instead of forking again (a fork that raced it is
``SessionExists``). It is tagged ``{"eval": name, "eval_case": turn id, "source_session": id}``, so
it stays apart from production (a dataset leaves such sessions out). A case whose message opened
the conversation has no revision to fork at: its session is a new root with no history, of the
source's owner, tagged the same way. The fork's metadata also keeps the case's recorded tool
results (``replay.RECORDED_KEY``), which is all its replay tools read.
"""

from __future__ import annotations

import uuid

from pydantic import JsonValue

from repertory.core.budget import Budget
from repertory.errors import SessionExists, SessionNotFound
from repertory.evals.records import CaseInput
from repertory.evals.replay import RECORDED_KEY
from repertory.evals.select import EVAL_TAG
from repertory.tree import Runtime, SessionHandle

__all__ = ["CASE_TAG", "SOURCE_TAG", "case_fork", "find_fork", "fork_id"]

_IDS = uuid.UUID("6b0f3c52-8e7d-5a14-b9c2-e7a1e7a1e7a1")
"""The namespace of the fork ids (uuid5): fixed, so every process derives the same id for a case."""

CASE_TAG = "eval_case"
"""The fork metadata key naming its case (the source turn's submission id)."""

SOURCE_TAG = "source_session"
"""The fork metadata key naming the session it was forked from."""


def fork_id(eval_name: str, turn_id: str) -> str:
    """The id of the fork of the eval ``eval_name`` for the case of source turn ``turn_id``."""
    return f"eval-{uuid.uuid5(_IDS, f'{eval_name}/{turn_id}').hex}"


async def find_fork(runtime: Runtime, eval_name: str, inputs: CaseInput) -> SessionHandle | None:
    """The fork the eval ``eval_name`` made for this case, if it made one."""
    try:
        return await runtime.session(fork_id(eval_name, inputs.turn_id))
    except SessionNotFound:
        return None


async def case_fork(
    runtime: Runtime,
    eval_name: str,
    inputs: CaseInput,
    *,
    agent: str,
    recorded: dict[str, JsonValue],
    budget: Budget | None = None,
) -> SessionHandle:
    """The case's fork, bound to the variant ``agent``: found, or made now with ``budget`` as its tree's.

    The metadata is written with the session itself, so a crash right after the fork leaves a fork
    the next run finds. Binding the agent happens before the first turn is sent (the only time the
    tree allows it), and is done again by a run that finds a fork still on the source's agent.
    """
    handle = await find_fork(runtime, eval_name, inputs)
    if handle is None:
        source = await runtime.session(inputs.session_id)
        metadata: dict[str, JsonValue] = {
            EVAL_TAG: eval_name,
            CASE_TAG: inputs.turn_id,
            SOURCE_TAG: inputs.session_id,
            RECORDED_KEY: recorded,
        }
        title, sid = f"eval {eval_name}", fork_id(eval_name, inputs.turn_id)
        try:
            if inputs.revision_id is None:
                handle = await runtime.create_session(
                    agent, title=title, metadata=metadata, session_id=sid, owner=source.record.owner, budget=budget
                )
            else:
                handle = await source.fork(
                    title=title,
                    at_revision=inputs.revision_id,
                    metadata=metadata,
                    own_tree=True,
                    budget=budget,
                    session_id=sid,
                )
        except SessionExists:  # another run of this eval made it meanwhile
            handle = await runtime.session(sid)
    if handle.record.agent != agent:
        await handle.amend(agent=agent)
    return handle
