"""The top-level ``repertory.__all__``, pinned: a name leaves or joins it only with this list.

Outside tests call these names exactly (``docs/contract.md`` promises each); removing one breaks
them, and adding one is a promise to keep it. So a change here is deliberate: edit
``repertory/__init__.py``, this list and the contract page together.
"""

from __future__ import annotations

from pathlib import Path

import repertory

CONTRACT = Path(__file__).resolve().parent.parent / "docs" / "contract.md"

PINNED = [
    "AbortSignal",
    "Agent",
    "ApprovalRecord",
    "Budget",
    "BudgetExceeded",
    "Clock",
    "CommitConflict",
    "Compaction",
    "CompactionResult",
    "DeltaWindow",
    "Disposable",
    "ErrorInfo",
    "GuardrailContext",
    "GuardrailTripped",
    "HistoryEntry",
    "HistoryRevision",
    "InMemorySessionStore",
    "InvalidResumeToken",
    "Ledger",
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
    "Spend",
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

# The names the contract's sections promise at the top level (stores, the export, analytics and models
# also name their own modules: repertory.storage, repertory.storage.export, repertory.analytics,
# repertory.models).
API_TOP_LEVEL = {
    # records
    "RunStatus", "Usage", "SuspendReason", "RunState", "ErrorInfo", "ThreadState", "ModelMessage", "Part",
    "TextPart", "ReasoningPart", "ToolCallPart", "ToolResultPart", "Origin", "HistoryEntry", "HistoryRevision",
    "MessageHistory",
    # stores (also importable from the top level)
    "SessionStore", "InMemorySessionStore", "SqliteSessionStore", "open_store",
    # agents, tools, models
    "Agent", "tool", "suspend", "ToolContext", "Model", "ModelEvent", "ModelResponse",
    # durable runs
    "Session", "RunResult", "AbortSignal", "Signal",
    # the runtime and the session tree
    "Runtime", "Principal", "SessionHandle", "TurnHandle", "Lineage", "SessionMetadata", "UserMessage",
    "NotificationMessage", "Disposable", "SessionEvent",
    # errors
    "RepertoryError", "StoreError", "CommitConflict", "RunNotFound", "SessionNotFound", "InvalidResumeToken",
    "WrongSuspensionKind", "NotSuspended", "RunSuspended", "RunCancelled", "SessionBusy", "StepBudgetExceeded",
    "OutputValidationError", "ModelError", "ToolError", "SuspendSignal", "RevisionNotFound",
    "GuardrailTripped", "BudgetExceeded",
    # budgets
    "Budget",
    # context: compaction and forks at any revision
    "Compaction",
    # delegation and guardrails
    "agent_tool",
}  # fmt: skip


def test_top_level_all_is_sorted_and_pinned() -> None:
    assert repertory.__all__ == sorted(repertory.__all__)
    assert repertory.__all__ == PINNED


def test_every_name_resolves_and_the_api_names_are_all_there() -> None:
    assert [name for name in repertory.__all__ if not hasattr(repertory, name)] == []
    assert sorted(API_TOP_LEVEL - set(repertory.__all__)) == []


def test_the_contract_page_promises_every_top_level_name() -> None:
    # Each name links to its generated reference there (`make docs` fails on a link that does not resolve).
    text = CONTRACT.read_text()
    assert [name for name in repertory.__all__ if f"[repertory.{name}]" not in text] == []
