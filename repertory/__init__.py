"""repertory: a Python runtime for durable LLM agent sessions.

Checkpoints after every step, an immutable history graph that makes forks free, single-use resume
tokens, and stores from in-memory to SQLite to PostgreSQL. See README.md for a tour.
"""

from repertory.errors import (
    CommitConflict,
    RepertoryError,
    StoreError,
)
from repertory.runtime import (
    ErrorInfo,
    HistoryEntry,
    HistoryRevision,
    MessageHistory,
    ModelMessage,
    Origin,
    Part,
    ReasoningPart,
    RunState,
    RunStatus,
    SuspendReason,
    TextPart,
    ThreadState,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from repertory.storage import InMemorySessionStore, SessionStore, SqliteSessionStore, open_store

__version__ = "0.1.0"

__all__ = [
    "CommitConflict",
    "ErrorInfo",
    "HistoryEntry",
    "HistoryRevision",
    "InMemorySessionStore",
    "MessageHistory",
    "ModelMessage",
    "Origin",
    "Part",
    "ReasoningPart",
    "RepertoryError",
    "RunState",
    "RunStatus",
    "SessionStore",
    "SqliteSessionStore",
    "StoreError",
    "SuspendReason",
    "TextPart",
    "ThreadState",
    "ToolCallPart",
    "ToolResultPart",
    "Usage",
    "open_store",
]
