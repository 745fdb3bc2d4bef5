"""The bottom layer: records and seam protocols. Imports only pydantic and ``repertory.errors``.

Everything a store persists (runs, threads, the history graph, sessions, turns, events), what the
step loop asks of a model (``Model``) and of memory (``Memory``), and the protocols a store
implements (``SessionStore``, ``TreeStore``). Every other package builds on these; none of them
is imported from here.
"""

from repertory.core.history import HistoryEntry, HistoryRevision, MessageHistory
from repertory.core.memory import Memory, RecalledContext
from repertory.core.messages import ModelMessage, Origin, Part, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from repertory.core.model import (
    Model,
    ModelEvent,
    ModelResponse,
    ModelSettings,
    ReasoningDelta,
    TextDelta,
    TokenCounter,
    ToolSpec,
)
from repertory.core.principal import NotificationMessage, Principal, UserMessage
from repertory.core.result import RunResult
from repertory.core.state import (
    ApprovalRecord,
    ErrorInfo,
    PendingCall,
    RunState,
    RunStatus,
    SuspendReason,
    ThreadState,
    Usage,
)
from repertory.core.store import SessionStore, TreeStore
from repertory.core.tree import Lineage, SessionEvent, SessionMetadata, SessionRecord, TurnRecord

__all__ = [
    "ApprovalRecord",
    "ErrorInfo",
    "HistoryEntry",
    "HistoryRevision",
    "Lineage",
    "Memory",
    "MessageHistory",
    "Model",
    "ModelEvent",
    "ModelMessage",
    "ModelResponse",
    "ModelSettings",
    "NotificationMessage",
    "Origin",
    "Part",
    "PendingCall",
    "Principal",
    "ReasoningDelta",
    "ReasoningPart",
    "RecalledContext",
    "RunResult",
    "RunState",
    "RunStatus",
    "SessionEvent",
    "SessionMetadata",
    "SessionRecord",
    "SessionStore",
    "SuspendReason",
    "TextDelta",
    "TextPart",
    "ThreadState",
    "TokenCounter",
    "ToolCallPart",
    "ToolResultPart",
    "ToolSpec",
    "TreeStore",
    "TurnRecord",
    "Usage",
    "UserMessage",
]
