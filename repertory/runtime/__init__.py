"""The engine: records, history, agents, tools, sessions and the host running them here. No Ray, no driver."""

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
from repertory.runtime.cron import next_fire
from repertory.runtime.deltas import DeltaWindow
from repertory.runtime.forks import fork_point, rewind
from repertory.runtime.gc_tuning import freeze_startup, tune_gc
from repertory.runtime.guardrails import GuardrailContext
from repertory.runtime.host import LocalHost
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
    "DeltaWindow",
    "Delegation",
    "ErrorInfo",
    "GuardrailContext",
    "HistoryEntry",
    "HistoryRevision",
    "LocalHost",
    "Memory",
    "MessageHistory",
    "Model",
    "ModelEvent",
    "ModelMessage",
    "ModelResponse",
    "ModelSettings",
    "Origin",
    "Part",
    "PendingCall",
    "ReasoningDelta",
    "ReasoningPart",
    "RecalledContext",
    "RunResult",
    "RunState",
    "RunStatus",
    "Session",
    "SessionServices",
    "Signal",
    "SuspendReason",
    "TextDelta",
    "TextPart",
    "ThreadState",
    "Tool",
    "ToolCallPart",
    "ToolContext",
    "ToolResultPart",
    "ToolSpec",
    "Usage",
    "fork_point",
    "next_fire",
    "rewind",
    "sleep",
    "suspend",
    "tool",
    "freeze_startup",
    "tune_gc",
]
