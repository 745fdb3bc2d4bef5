"""Builders for the records the conformance suites write: messages of every part type, runs, commits.

Public so a store's own tests can build the same data the suites do.
"""

from __future__ import annotations

from typing import Any

from repertory.core.history import MessageHistory
from repertory.core.messages import ModelMessage, Origin, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from repertory.core.state import ErrorInfo, RunState, SuspendReason, ThreadState, Usage
from repertory.core.store import SessionStore

__all__ = ["commit", "full_runs", "history_of", "pointers", "rich_messages"]


def rich_messages() -> list[ModelMessage]:
    """A conversation using every role, every part type and every origin shape."""
    return [
        ModelMessage.system("You are terse.", origin=Origin(kind="system")),
        ModelMessage(
            role="user",
            parts=[TextPart(text="What is 2+2? "), TextPart(text="Use the tool.")],
            origin=Origin(kind="user", id="user-1"),
        ),
        ModelMessage(
            role="assistant",
            parts=[
                ReasoningPart(text="I should call add."),
                TextPart(text="Calling add."),
                ToolCallPart(
                    tool_call_id="call-1",
                    tool_name="add",
                    args={"a": 2, "b": 2.5, "opts": {"list": [1, "x", None, True], "empty": {}}},
                ),
                ToolCallPart(tool_call_id="call-2", tool_name="divide"),
            ],
            origin=Origin(kind="model", id="scripted"),
        ),
        ModelMessage(
            role="tool",
            parts=[
                ToolResultPart(tool_call_id="call-1", tool_name="add", result={"sum": 4.5, "raw": [None, False]}),
                ToolResultPart(tool_call_id="call-2", tool_name="divide", result="division by zero", is_error=True),
                ToolResultPart(tool_call_id="call-3", tool_name="noop"),
            ],
            origin=Origin(kind="tool", id="add"),
        ),
        ModelMessage(role="user", parts=[TextPart(text="from a mod")], origin=Origin(kind="mod", id="mod-7")),
        ModelMessage(role="user", parts=[TextPart(text="from a session")], origin=Origin(kind="session")),
        ModelMessage(role="assistant", parts=[TextPart(text="4.5")]),
        ModelMessage(role="assistant", parts=[]),
    ]


def history_of(*texts: str) -> MessageHistory:
    """A linear history of user messages with these texts."""
    history = MessageHistory()
    for text in texts:
        history.append(ModelMessage.user(text))
    return history


def full_runs(thread_id: str, revision_id: str | None) -> list[RunState]:
    """Runs that between them set every RunState field to a non-default value."""
    common: dict[str, Any] = {
        "thread_id": thread_id,
        "history_revision_id": revision_id,
        "usage": Usage(input_tokens=11, output_tokens=7, total_tokens=18, requests=2),
        "scratch": {"counter": 3, "nested": {"list": [1, 2.5, "three", None, False]}, "text": "ünïcödé"},
    }
    return [
        RunState(
            run_id="run-suspended",
            status="suspended",
            step_index=4,
            cost=0.125,
            suspended_on=SuspendReason(
                token="tok-abc",
                kind="approval",
                reason="needs a human",
                payload={"amount": 12.5, "to": ["alice"]},
                tool_call_id="call-1",
            ),
            created_at=1_000,
            updated_at=2_000,
            **common,
        ),
        RunState(
            run_id="run-error",
            status="error",
            step_index=2,
            error=ErrorInfo(message="boom", type="ValueError", stack="Traceback...\n  line 1"),
            created_at=1_001,
            updated_at=2_001,
            **common,
        ),
        RunState(
            run_id="run-done",
            status="done",
            step_index=9,
            cost=1e-9,
            result={"answer": "4.5", "items": [1, 2]},
            created_at=1_002,
            updated_at=2_002,
            **common,
        ),
    ]


def pointers(
    history: MessageHistory, *, thread_id: str = "t", run_id: str = "r", **run_fields: Any
) -> tuple[RunState, ThreadState]:
    """A run and a thread that both point at ``history``'s head."""
    run = RunState(run_id=run_id, thread_id=thread_id, history_revision_id=history.revision_id, **run_fields)
    thread = ThreadState(thread_id=thread_id, history_revision_id=history.revision_id)
    return run, thread


async def commit(
    store: SessionStore,
    history: MessageHistory,
    *,
    thread_id: str = "t",
    run_id: str = "r",
    base: str | None = None,
    **run_fields: Any,
) -> RunState:
    """Commit ``history``'s head as the run's and thread's head; returns the run written."""
    run, thread = pointers(history, thread_id=thread_id, run_id=run_id, **run_fields)
    await store.commit_session(run=run, thread=thread, history=history, base_revision_id=base)
    return run
