"""The step loop's helpers return what they decided and touch nothing: a guardrail verdict, a compaction.

The drive applies both (records the trip and raises it; inserts and commits the summary), so a
helper called on its own leaves the messages and history it was given as they were.
"""

from __future__ import annotations

import pytest

from repertory.core.history import MessageHistory
from repertory.core.messages import ModelMessage
from repertory.errors import GuardrailTripped, ModelError
from repertory.runtime._compact import plan_compaction
from repertory.runtime.compaction import SUMMARY_PREFIX, Compaction
from repertory.runtime.guardrails import GuardrailContext, check_guardrails
from repertory.testing import ScriptedModel

CTX = GuardrailContext(run_id="r1", thread_id="t1", agent="a", stage="input", messages=())


def passes(ctx: GuardrailContext, text: str) -> str | None:
    return None


async def no_secrets(ctx: GuardrailContext, text: str) -> str | None:
    return "no secrets" if "password" in text else None


def never(ctx: GuardrailContext, text: str) -> str | None:
    raise AssertionError("a guardrail after the first trip ran")


async def test_the_verdict_is_none_or_the_first_trip_to_raise() -> None:
    assert await check_guardrails([passes, no_secrets], CTX, "hello") is None
    tripped = await check_guardrails([passes, no_secrets, never], CTX, "my password is x")
    assert isinstance(tripped, GuardrailTripped)
    assert (tripped.message, tripped.details) == ("no secrets", {"guardrail": "no_secrets", "stage": "input"})


def history_of(*texts: str) -> MessageHistory:
    history = MessageHistory()
    for i, text in enumerate(texts):
        history.append(ModelMessage.user(text) if i % 2 == 0 else ModelMessage.assistant(text))
    return history


async def test_a_compaction_is_decided_without_touching_the_history() -> None:
    history = history_of(*(f"message {i} " + "x" * 200 for i in range(6)))
    before = history.revision_id
    compaction = Compaction(max_input_tokens=1000, keep_last=2, summary_tokens=50)
    model = ScriptedModel([{"text": "the gist"}])
    decided = await plan_compaction(
        compaction, model, history.context_messages(), history.context_revisions(), 10, "t1"
    )
    assert decided is not None
    assert (decided.summarized, decided.kept) == (4, 2)
    assert decided.boundary.boundary and decided.boundary.text == SUMMARY_PREFIX + "the gist"
    assert decided.after == history.context_revisions()[3]
    assert decided.usage.requests == 1
    assert history.revision_id == before and len(history.messages) == 6


async def test_nothing_to_cut_is_none_and_a_message_over_the_budget_is_a_model_error() -> None:
    compaction = Compaction(max_input_tokens=400, keep_last=2, summary_tokens=50)
    assert await plan_compaction(compaction, ScriptedModel([]), [], [], 10, "t1") is None
    huge = history_of("x" * 4000)
    with pytest.raises(ModelError, match="larger than max_input_tokens=400"):
        await plan_compaction(compaction, ScriptedModel([]), huge.messages, huge.context_revisions(), 10, "t1")
