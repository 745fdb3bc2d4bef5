"""The fork of a case: made once per eval and case through the session tree, found again by its metadata.

A case's fork is a child of the source session that shares its conversation up to the case's
revision (``SessionHandle.fork(at_revision=...)``: no copy), tagged ``{"eval": name, "eval_case":
turn id, "source_session": id}`` so it is apart from production (a dataset leaves such sessions
out) and so a second run of the same eval finds it instead of forking again. A case whose message
opened the conversation has no revision to fork at: its session is a child with no history
(``spawn``), tagged the same way. The fork's metadata also keeps the case's recorded tool results
(``replay.RECORDED_KEY``), which is all its replay tools read.
"""

from __future__ import annotations

from pydantic import JsonValue

from repertory.evals.records import CaseInput
from repertory.evals.replay import RECORDED_KEY
from repertory.evals.select import EVAL_TAG
from repertory.tree import Runtime, SessionHandle

__all__ = ["CASE_TAG", "SOURCE_TAG", "case_fork", "find_fork"]

CASE_TAG = "eval_case"
"""The fork metadata key naming its case (the source turn's submission id)."""

SOURCE_TAG = "source_session"
"""The fork metadata key naming the session it was forked from."""


async def find_fork(runtime: Runtime, eval_name: str, inputs: CaseInput) -> SessionHandle | None:
    """The fork the eval ``eval_name`` made for this case, if it made one (the oldest, should there be two)."""
    for child in await runtime.store.list_children(inputs.session_id):
        if child.metadata.get(EVAL_TAG) == eval_name and child.metadata.get(CASE_TAG) == inputs.turn_id:
            return await runtime.session(child.session_id)
    return None


async def case_fork(
    runtime: Runtime, eval_name: str, inputs: CaseInput, *, agent: str, recorded: dict[str, JsonValue]
) -> SessionHandle:
    """The case's fork, bound to the variant ``agent``: found, or made now.

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
        title = f"eval {eval_name}"
        if inputs.revision_id is None:
            handle = await source.spawn(agent=agent, title=title, metadata=metadata)
        else:
            handle = await source.fork(title=title, at_revision=inputs.revision_id, metadata=metadata)
    if handle.record.agent != agent:
        await handle.amend(agent=agent)
    return handle
