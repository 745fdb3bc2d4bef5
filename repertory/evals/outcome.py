"""What a stored turn did: its reply, tool trajectory, status, usage and latency, read from the store.

Both sides of an eval read turns this way: the dataset reads the source session's turns (the
expected outputs) and the runner reads each fork's turn (the variant's output), so the two records
are built by one rule. A turn's run knows where its input went on (``RunState.input_depth``) and
where it ended (``history_revision_id``); the messages between the two are the turn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from repertory.core.history import MessageHistory
from repertory.core.messages import ModelMessage, ToolResultPart
from repertory.core.state import RunState
from repertory.core.store import SessionStore
from repertory.core.tree import TurnRecord
from repertory.evals.records import RecordedCall, TurnOutcome

__all__ = ["TurnRead", "outcome_of", "read_turn"]


@dataclass(frozen=True)
class TurnRead:
    """A turn with its run and the messages it added: ``cut`` is the revision before its input.

    ``messages`` starts with the turn's own input message. ``cut`` is ``None`` when that message
    opened the conversation.
    """

    turn: TurnRecord
    run: RunState
    cut: str | None
    messages: list[ModelMessage]


def _same_message(a: ModelMessage, b: ModelMessage) -> bool:
    return a.role == b.role and a.parts == b.parts


async def read_turn(store: SessionStore, turn: TurnRecord) -> TurnRead | None:
    """The turn's run and messages, or ``None`` for a turn that has none yet (queued, or its run unknown).

    The input is looked for from the depth the run started at: a compaction during the run puts its
    summary before the messages it keeps, so the input may sit further on than that depth.
    """
    run = await store.load_run(turn.run_id)
    if run is None or run.input_depth is None or run.history_revision_id is None:
        return None
    history: MessageHistory | None = await store.load_history(run.history_revision_id)
    if history is None:
        return None
    lineage = history.lineage()
    for i in range(run.input_depth, len(lineage)):
        entry = history.entry(lineage[i].entry_id)
        if entry is not None and _same_message(entry.message, turn.message):
            cut = lineage[i].parent_id
            messages = [e.message for e in (history.entry(r.entry_id) for r in lineage[i:]) if e is not None]
            return TurnRead(turn=turn, run=run, cut=cut, messages=messages)
    return None


def outcome_of(read: TurnRead, *, idempotent: Mapping[str, bool] | None = None) -> TurnOutcome:
    """The ``TurnOutcome`` of a read turn; ``idempotent`` maps tool names to their flag, where known."""
    results: dict[str, ToolResultPart] = {}
    for message in read.messages:
        for part in message.tool_results:
            results[part.tool_call_id] = part
    calls: list[RecordedCall] = []
    model: str | None = None
    for message in read.messages:
        if message.role != "assistant":
            continue
        model = message.model or model
        for call in message.tool_calls:
            result = results.get(call.tool_call_id)
            calls.append(
                RecordedCall(
                    tool_name=call.tool_name,
                    args=dict(call.args),
                    result=None if result is None else result.result,
                    is_error=False if result is None else result.is_error,
                    answered=result is not None,
                    idempotent=None if idempotent is None else idempotent.get(call.tool_name),
                )
            )
    run = read.run
    text: str | None = None
    if run.status == "done" and run.result is not None:
        # A structured output (an agent's output_type) is kept as its JSON text, so it compares as text.
        text = run.result if isinstance(run.result, str) else json.dumps(run.result, sort_keys=True)
    return TurnOutcome(
        text=text,
        tool_calls=calls,
        status=run.status,
        usage=run.usage,
        cost=run.cost,
        latency_ms=max(0, read.turn.updated_at - read.turn.created_at),
        model=model,
        session_id=read.turn.session_id,
        run_id=run.run_id,
    )
