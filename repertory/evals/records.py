"""The typed parts of an eval case: its input, the outcome of a turn, and one recorded tool call.

A case is one user turn of a stored session. Its input says where the conversation stood before
the user spoke (``revision_id``) and what the user said; its expected output is what the stored
turn did (``TurnOutcome``), and the output a variant produces is the same record read from the
variant's own fork, so an evaluator compares like with like. They are pydantic models so a dataset
saved by pydantic-evals (YAML or JSON) loads back into the same classes.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from repertory.core.state import RunStatus, Usage

__all__ = ["CaseInput", "CaseMeta", "RecordedCall", "TurnOutcome", "call_key"]


def call_key(tool_name: str, args: dict[str, JsonValue]) -> str:
    """The identity of a call for replay: its tool and its arguments as canonical JSON (sorted keys, no spaces).

    Two calls with the same key asked the same thing, whatever order the model wrote the arguments in.
    """
    return json.dumps([tool_name, args], sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class CaseInput(BaseModel):
    """Where a case starts: the source session, the revision before the user's message, and that message.

    ``revision_id`` is ``None`` when the message opened the conversation (the case starts from an
    empty history). ``turn_id`` is the source turn's submission id: what names the case's fork.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    session_id: str
    turn_id: str
    revision_id: str | None
    message: str


class RecordedCall(BaseModel):
    """One tool call of a turn, in call order, with the result it got.

    ``idempotent`` is what the agent's tool says, where the agent was known when the dataset was
    built (``None``: not known). ``answered`` is false for a call the turn left without a result
    (a run that stopped at an approval, say); replay answers only answered calls.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    tool_name: str
    args: dict[str, JsonValue] = Field(default_factory=dict)
    result: JsonValue = None
    is_error: bool = False
    answered: bool = True
    idempotent: bool | None = None

    @property
    def key(self) -> str:
        """``call_key`` of this call: what a replayed call must match."""
        return call_key(self.tool_name, self.args)


class TurnOutcome(BaseModel):
    """What one turn did, read from the store: the reply, the tool calls, how the run ended and what it cost.

    ``latency_ms`` runs from the turn being queued to its rest (a human's approval wait included).
    ``session_id`` and ``run_id`` say where to look: the source session for an expected output, the
    variant's fork for a variant's output.
    """

    model_config = ConfigDict(extra="forbid")
    text: str | None = None
    tool_calls: list[RecordedCall] = Field(default_factory=list)
    status: RunStatus
    usage: Usage = Field(default_factory=Usage)
    cost: float | None = None
    latency_ms: int | None = None
    model: str | None = None
    session_id: str
    run_id: str | None = None


class CaseMeta(BaseModel):
    """Facts about a case's source kept with it: the agent, the owner, the turn's place and time."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    agent: str
    owner: str | None = None
    turn_seq: int = 0
    created_at: int = 0
