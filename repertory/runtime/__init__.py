"""The engine: records, the history graph, agents, tools and sessions. Imports no Ray and no driver."""

from repertory.core.history import HistoryEntry, HistoryRevision, MessageHistory
from repertory.core.memory import Memory, RecalledContext
from repertory.core.messages import (
    ModelMessage,
    Origin,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from repertory.core.model import (
    Model,
    ModelEvent,
    ModelResponse,
    ModelSettings,
    ReasoningDelta,
    TextDelta,
    ToolSpec,
)
from repertory.core.result import RunResult
from repertory.core.state import (
    ApprovalRecord,
    Delegation,
    ErrorInfo,
    PendingCall,
    RunState,
    RunStatus,
    SuspendReason,
    ThreadState,
    Usage,
)
from repertory.runtime.agent import Agent
from repertory.runtime.compaction import Compaction, CompactionResult
from repertory.runtime.guardrails import GuardrailContext
from repertory.runtime.services import SessionServices
from repertory.runtime.session import Session
from repertory.runtime.signals import AbortSignal, Signal
from repertory.runtime.tools import Tool, ToolContext, sleep, suspend, tool

__all__ = [
    "AbortSignal",
    "Agent",
    "ApprovalRecord",
    "Compaction",
    "CompactionResult",
    "Delegation",
    "GuardrailContext",
    "Memory",
    "Model",
    "ModelEvent",
    "ModelResponse",
    "ModelSettings",
    "PendingCall",
    "ReasoningDelta",
    "RecalledContext",
    "RunResult",
    "Session",
    "SessionServices",
    "Signal",
    "TextDelta",
    "Tool",
    "ToolContext",
    "ToolSpec",
    "sleep",
    "suspend",
    "tool",
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
