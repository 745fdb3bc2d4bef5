"""A turn's result once it rests, read from the store: the ``RunResult`` or the error it ended with.

Every backend answers ``TurnHandle.result()`` and ``SessionHandle.run()`` the same way, whether it
reads in the caller's process (the local host, a Ray client falling back after a lost channel) or
in a Ray host (one call for ``run()``): so the reading lives here, once, below all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

from pydantic import BaseModel

from repertory import errors as errors_module
from repertory.core.result import RunResult, reply_text
from repertory.core.state import ErrorInfo, RunState
from repertory.core.store import TreeStore
from repertory.errors import RepertoryError, RunCancelled
from repertory.runtime.output import parse_output

__all__ = ["OutputTypeFor", "raise_turn_error", "stored_result", "turn_result"]

OutputTypeFor = Callable[[str | None, str], type[BaseModel] | None]
"""``(turn's output type path, agent name) -> the output type``: what a backend's ``output_type_for`` is."""


def raise_turn_error(error: ErrorInfo | None, run_id: str) -> NoReturn:
    """Re-raise a failed turn's error as the repertory error class it was, where there is one."""
    name = error.type if error is not None else None
    cls = getattr(errors_module, name, None) if name else None
    if not (isinstance(cls, type) and issubclass(cls, RepertoryError)):
        cls = RepertoryError
    details = {} if error is None else {k: v for k, v in error.details.items() if k != "run_id"}
    raise cls(error.message if error is not None else "the turn failed", run_id=run_id, **details)


async def turn_result(
    store: TreeStore,
    output_type_for: OutputTypeFor,
    session_id: str,
    submission_id: str,
    output_type: type[BaseModel] | None,
) -> RunResult:
    """The result of a turn at rest: a failed turn raises its error, a cancelled one ``RunCancelled``.

    ``output_type`` is what the caller asked for; without it, the turn's stored output type (or
    its agent's) validates the reply, through the backend's ``output_type_for``.
    """
    turn = await store.load_turn(submission_id)
    if turn is None:
        raise RepertoryError(f"no turn {submission_id!r}")
    if turn.status == "error":
        raise_turn_error(turn.error, turn.run_id)
    if turn.status == "cancelled":
        raise RunCancelled(f"turn {submission_id!r} was cancelled", run_id=turn.run_id)
    run = await store.load_run(turn.run_id)
    if run is None:
        raise RepertoryError(f"turn {submission_id!r} has no run yet (status {turn.status})")
    if run.status == "cancelled":
        raise RunCancelled(f"the run of turn {submission_id!r} was cancelled", run_id=run.run_id)
    kind = output_type
    if kind is None:
        record = await store.load_session(session_id)
        kind = output_type_for(turn.output_type, record.agent) if record else None
    return stored_result(run, kind)


def stored_result(run: RunState, output_type: type[BaseModel] | None) -> RunResult:
    """The result of a run read back at rest, its reply validated into ``output_type`` again when it has one."""
    text = reply_text(run)
    return RunResult.of(run, parse_output(output_type, text) if output_type is not None and text is not None else None)
