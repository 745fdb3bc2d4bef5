"""The text form of ``handle.run()``'s one Ray call: its request and, when it has no output object, its result.

Ray serialises an argument or a return value that is not a primitive with pickle, and that costs
about 0.1 ms per value on each call whatever the value's size (measured: a call with the five
``run_turn`` arguments took 1.46-1.50 ms p50 against 1.36 with the same arguments as strings and
1.24 with one string; returning a ``RunResult`` took 1.13-1.15 ms against 1.00 for its JSON),
while strings travel as they are. Pickling faster (a ``__reduce__`` through JSON) gained nothing:
the cost is the pickled value's path through Ray, not the pickling. So the direct ``run_turn``
call carries one JSON text each way, built from the records' own JSON (what the store keeps of
them, so nothing is lost on the way) and validated on arrival in one call. A result holding an
output object (an output type's instance: any class) stays a ``RunResult`` and is pickled.
"""

from __future__ import annotations

import json

from pydantic import TypeAdapter

from repertory.core.messages import ModelMessage
from repertory.core.result import RunResult
from repertory.core.state import RunState, RunStatus
from repertory.core.tree import TurnKind

__all__ = ["decode_request", "decode_result", "encode_request", "encode_result"]

_REQUEST = TypeAdapter(tuple[str, TurnKind, str, str | None, ModelMessage])
_RESULT = TypeAdapter(tuple[str, RunStatus, str | None, RunState])


def encode_request(
    session_id: str, message: ModelMessage, kind: TurnKind, submission_id: str, traceparent: str | None = None
) -> str:
    """``run_turn``'s arguments (no output type) as one JSON array; ``traceparent`` is the caller's span."""
    head = json.dumps([session_id, kind, submission_id, traceparent])
    return f"{head[:-1]},{message.model_dump_json()}]"


def decode_request(request: str) -> tuple[str, ModelMessage, TurnKind, str, str | None]:
    """``(session_id, message, kind, submission_id, traceparent)`` from ``encode_request``'s text."""
    session_id, kind, submission_id, traceparent, message = _REQUEST.validate_json(request)
    return session_id, message, kind, submission_id, traceparent


def encode_result(result: RunResult) -> str | RunResult:
    """The result as one JSON array, or the result itself when it holds an output object."""
    if result.output is not None:
        return result
    head = json.dumps([result.run_id, result.status, result.text])
    return f"{head[:-1]},{result.state.model_dump_json()}]"


def decode_result(reply: str | RunResult) -> RunResult:
    """The ``RunResult`` that ``encode_result`` was given."""
    if isinstance(reply, RunResult):
        return reply
    if not isinstance(reply, str):
        raise TypeError(f"a host sent {type(reply).__name__} as a turn's result")
    run_id, status, text, state = _RESULT.validate_json(reply)
    return RunResult(run_id=run_id, status=status, state=state, text=text)
