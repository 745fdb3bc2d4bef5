"""The top-level ``repertory.__all__``, pinned: a name leaves or joins it only with this list.

Outside tests call these names exactly (``../shared/API.md``); removing one breaks them, and adding
one is a promise to keep it. So a change here is deliberate: edit ``repertory/__init__.py`` and
this list together.
"""

from __future__ import annotations

import repertory

PINNED = [
    "AbortSignal",
    "Agent",
    "ApprovalRecord",
    "Clock",
    "CommitConflict",
    "Compaction",
    "CompactionResult",
    "Disposable",
    "ErrorInfo",
    "GuardrailContext",
    "GuardrailTripped",
    "HistoryEntry",
    "HistoryRevision",
    "InMemorySessionStore",
    "InvalidResumeToken",
    "Lineage",
    "Memory",
    "MessageHistory",
    "Model",
    "ModelError",
    "ModelEvent",
    "ModelMessage",
    "ModelResponse",
    "ModelSettings",
    "NotSuspended",
    "NotificationMessage",
    "Origin",
    "OutputValidationError",
    "Part",
    "PendingCall",
    "Principal",
    "ReasoningDelta",
    "ReasoningPart",
    "RecalledContext",
    "RepertoryError",
    "RevisionNotFound",
    "RunCancelled",
    "RunNotFound",
    "RunResult",
    "RunState",
    "RunStatus",
    "RunSuspended",
    "Runtime",
    "Schedule",
    "ScheduleNotFound",
    "Session",
    "SessionBusy",
    "SessionEvent",
    "SessionHandle",
    "SessionMetadata",
    "SessionNotFound",
    "SessionStore",
    "Signal",
    "SleepSignal",
    "SqliteSessionStore",
    "StepBudgetExceeded",
    "StoreError",
    "SuspendReason",
    "SuspendSignal",
    "TextDelta",
    "TextPart",
    "ThreadState",
    "Tool",
    "ToolCallPart",
    "ToolContext",
    "ToolError",
    "ToolResultPart",
    "ToolSpec",
    "TreeStore",
    "TurnHandle",
    "TurnRecord",
    "Usage",
    "UserMessage",
    "WrongSuspensionKind",
    "agent_tool",
    "open_store",
    "sleep",
    "suspend",
    "tool",
]

# The names of API.md sections 1-7 and 10 that live at the top level (sections 2 and 6 name their own
# modules: repertory.storage, repertory.storage.export, repertory.analytics, repertory.models).
API_TOP_LEVEL = {
    # 1. records
    "RunStatus", "Usage", "SuspendReason", "RunState", "ErrorInfo", "ThreadState", "ModelMessage", "Part",
    "TextPart", "ReasoningPart", "ToolCallPart", "ToolResultPart", "Origin", "HistoryEntry", "HistoryRevision",
    "MessageHistory",
    # 2. stores (also importable from the top level)
    "SessionStore", "InMemorySessionStore", "SqliteSessionStore", "open_store",
    # 3. agents, tools, models
    "Agent", "tool", "suspend", "ToolContext", "Model", "ModelEvent", "ModelResponse",
    # 4. durable runs
    "Session", "RunResult", "AbortSignal", "Signal",
    # 5. the runtime and the session tree
    "Runtime", "Principal", "SessionHandle", "TurnHandle", "Lineage", "SessionMetadata", "UserMessage",
    "NotificationMessage", "Disposable", "SessionEvent",
    # 7. errors
    "RepertoryError", "StoreError", "CommitConflict", "RunNotFound", "SessionNotFound", "InvalidResumeToken",
    "WrongSuspensionKind", "NotSuspended", "RunSuspended", "RunCancelled", "SessionBusy", "StepBudgetExceeded",
    "OutputValidationError", "ModelError", "ToolError", "SuspendSignal", "RevisionNotFound",
    "GuardrailTripped",
    # 10. context: compaction and forks at any revision
    "Compaction",
    # 14. delegation and guardrails
    "agent_tool",
}  # fmt: skip


def test_top_level_all_is_sorted_and_pinned() -> None:
    assert repertory.__all__ == sorted(repertory.__all__)
    assert repertory.__all__ == PINNED


def test_every_name_resolves_and_the_api_names_are_all_there() -> None:
    assert [name for name in repertory.__all__ if not hasattr(repertory, name)] == []
    assert sorted(API_TOP_LEVEL - set(repertory.__all__)) == []
