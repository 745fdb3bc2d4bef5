"""The engine: records, the history graph, agents, tools and sessions. Imports no Ray and no driver."""

from repertory.runtime.history import HistoryEntry, HistoryRevision, MessageHistory
from repertory.runtime.messages import (
    ModelMessage,
    Origin,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from repertory.runtime.state import ErrorInfo, RunState, RunStatus, SuspendReason, ThreadState, Usage

__all__ = [
    "ErrorInfo",
    "HistoryEntry",
    "HistoryRevision",
    "MessageHistory",
    "ModelMessage",
    "Origin",
    "Part",
    "ReasoningPart",
    "RunState",
    "RunStatus",
    "SuspendReason",
    "TextPart",
    "ThreadState",
    "ToolCallPart",
    "ToolResultPart",
    "Usage",
]
