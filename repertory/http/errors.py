"""The HTTP layer's one fault, and how repertory's faults become status codes.

Every failure a client can cause is a 4xx answer with a one-line ``detail`` (the field
``langgraph-sdk`` reads into its exception message); a 5xx answer means a bug or a store that is
down, never bad input.
"""

from __future__ import annotations

from repertory.errors import (
    CommitConflict,
    InvalidResumeToken,
    NotSuspended,
    RepertoryError,
    RevisionNotFound,
    RunCancelled,
    RunNotFound,
    RunSuspended,
    SessionBusy,
    SessionNotFound,
    StoreError,
    ToolError,
    WrongSuspensionKind,
)

__all__ = ["HttpError", "status_for"]


class HttpError(RepertoryError):
    """A request the server refuses, with the status code to answer and a message that says why."""

    status: int

    def __init__(self, message: str = "", *, status: int = 400, **details: object) -> None:
        super().__init__(message, status=status, **details)


_STATUS: tuple[tuple[type[RepertoryError], int], ...] = (
    (HttpError, 400),  # overridden by the error's own status
    (SessionNotFound, 404),
    (RunNotFound, 404),
    (RevisionNotFound, 404),  # a checkpoint that is not on the thread's lineage
    # A token used by a racing request, a decision of the wrong kind, a busy thread: the request
    # was well formed but conflicts with the thread's current state.
    (InvalidResumeToken, 409),
    (WrongSuspensionKind, 409),
    (NotSuspended, 409),
    (RunSuspended, 409),
    (RunCancelled, 409),
    (SessionBusy, 409),
    (CommitConflict, 409),
    (ToolError, 422),  # edited arguments that do not validate against the tool
    (StoreError, 503),
)


def status_for(error: RepertoryError) -> int:
    """The status code that answers ``error`` (500 for a repertory fault no client can cause)."""
    if isinstance(error, HttpError):
        return error.status
    for cls, status in _STATUS:
        if isinstance(error, cls):
            return status
    return 500
