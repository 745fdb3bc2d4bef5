"""The error tree of repertory: faults under one root, control signals apart.

::

    RepertoryError                 every fault repertory raises
    ├── StoreError                 a store cannot open, read or write
    │   ├── CommitConflict         a commit lost a race or disagrees with itself; nothing was written
    │   │   └── SessionExists      a new session's id is already a session's (or a thread's)
    │   ├── StoreFull              the store's disk is full; the write was rolled back whole
    │   └── RecordUnreadable       a stored row cannot be read back as its record (listings skip it)
    ├── RunNotFound                no run with that id
    ├── SessionNotFound            no session with that id
    ├── ScheduleNotFound           no schedule with that id (cancelled, or never was)
    ├── InvalidResumeToken         not the run's live token (wrong, used, expired)
    ├── WrongSuspensionKind        the token is live but the decision is of the other kind
    ├── NotSuspended               the run is not waiting for anything
    ├── RunSuspended               the run needs its token (recover() cannot drive it)
    ├── RunCancelled               the run was cancelled while this call drove it
    ├── TreeSessionRun             a bare Session call named a run of a session of the tree
    ├── SessionBusy                a turn runs or is queued and if_busy="reject"
    ├── StepBudgetExceeded         the run asked for more model requests than max_steps
    ├── BudgetExceeded             a run, tree or owner budget was spent; the request was not sent
    ├── OutputValidationError      the final reply never validated into the output type
    ├── ModelError                 the model failed or a scripted model ran out of steps
    ├── RevisionNotFound           a fork or a rewind named a revision that is not on the thread's lineage
    ├── IllegalTransition          a run was moved to a status its own cannot reach (``RUN_TRANSITIONS``)
    ├── ToolError                  raised by a tool to choose the message the model reads
    └── GuardrailTripped           an input or output guardrail refused the turn (the run ends ``error``)

    SuspendSignal                  control flow: a tool called suspend(); not a fault
    └── SleepSignal                control flow: a tool called sleep(); the runtime wakes the run
    MissingExtra (an ImportError)  a part was imported without its extra's packages; not a fault

Every error pickles with its message and attributes intact, because errors cross Ray actor and
process boundaries. That is why each class keeps its constructor arguments in ``args`` order and
defines ``__reduce__`` where it holds keyword state.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BudgetExceeded",
    "CommitConflict",
    "GuardrailTripped",
    "IllegalTransition",
    "InvalidResumeToken",
    "MissingExtra",
    "ModelError",
    "NotSuspended",
    "OutputValidationError",
    "RecordUnreadable",
    "RepertoryError",
    "RevisionNotFound",
    "RunCancelled",
    "RunNotFound",
    "RunSuspended",
    "SessionBusy",
    "SessionExists",
    "ScheduleNotFound",
    "SessionNotFound",
    "StepBudgetExceeded",
    "StoreError",
    "StoreFull",
    "SleepSignal",
    "SuspendSignal",
    "ToolError",
    "TreeSessionRun",
    "WrongSuspensionKind",
]


class RepertoryError(Exception):
    """Root of every fault repertory raises; catch it to catch them all."""

    def __init__(self, message: str = "", **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details
        for key, value in details.items():
            setattr(self, key, value)

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuild through the constructor with keyword details, so subclasses pickle without effort.
        return (_rebuild, (type(self), self.message, self.details))

    def __str__(self) -> str:
        return self.message


def _rebuild(cls: type[RepertoryError], message: str, details: dict[str, Any]) -> RepertoryError:
    err = cls.__new__(cls)
    RepertoryError.__init__(err, message, **details)
    return err


class StoreError(RepertoryError):
    """A store could not open, read or write; the message names the problem (never a password)."""


class CommitConflict(StoreError):
    """A commit disagrees with itself or lost a compare-and-set race; it wrote nothing."""


class SessionExists(CommitConflict):
    """A session (or thread) with the id a new session asked for already exists; nothing was created.

    A ``CommitConflict``, because that is what a store raises for it: code that caught the
    conflict keeps working, and code that wants the duplicate id catches this (``session_id``).
    """


class StoreFull(StoreError):
    """The store's disk is full (SQLite's ``SQLITE_FULL``, PostgreSQL's ``disk_full``): nothing of the write landed.

    Measured on a full tmpfs (``tests/storage/sqlite/test_store_full.py``): SQLite fails the ``COMMIT`` and rolls
    the whole transaction back itself, the store's connection stays usable (reads go on), and the
    very same write succeeds once space is freed. So it is safe to retry, and worth retrying for a
    while: the failure cannot even be recorded (ending a run ``error`` is a write too), and space
    often comes back (a log rotated, a temporary file removed). Unlike ``CommitConflict``, the
    stored state did not refuse the write; it was never looked at.
    """


class RecordUnreadable(StoreError):
    """A stored row cannot be read back as its record; the message names the table, the row and why.

    Written by hand, by an older version, or cut short: whatever the cause, one such row must not
    fail a listing or a start, so listings skip it (and log it) and only a read of that one row
    by its id raises this. ``row_id`` is the row's id and ``reason`` the error, without either.
    """

    row_id: str
    reason: str


class RunNotFound(RepertoryError):
    """No run with that id exists in the store."""


class SessionNotFound(RepertoryError):
    """No session with that id exists in the store."""


class ScheduleNotFound(RepertoryError):
    """No schedule with that id exists (it was cancelled, or never was)."""


class InvalidResumeToken(RepertoryError):
    """The token is not the run's live token: wrong, already used, or from an older suspension."""


class WrongSuspensionKind(RepertoryError):
    """The token is live but names the other kind of suspension; the token is not used up."""


class NotSuspended(RepertoryError):
    """The run is not suspended, so there is nothing to resume, approve or reject."""


class RunSuspended(RepertoryError):
    """The run is suspended and can only go on through its resume token."""


class RunCancelled(RepertoryError):
    """The run was cancelled (abort signal or cancel()) and this drive stopped."""


class TreeSessionRun(RepertoryError):
    """A bare ``Session.*_suspended``/``recover`` named a run of a session of the tree.

    Such a run's turn, events and waiters belong to the tree: deciding it through the bare
    session would end the run but leave its turn open for good. Decide it through the session's
    handle (``approve``/``reject``/``resume``), the CLI or the HTTP server.
    """


class SessionBusy(RepertoryError):
    """The session has a turn running or queued and the caller asked to be rejected."""


class StepBudgetExceeded(RepertoryError):
    """The run wanted more model requests than the agent's max_steps allows."""


class BudgetExceeded(RepertoryError):
    """A ``Budget`` was spent: the model request or tool call that would have gone past it was not started.

    ``limit`` names the cap reached (``"max_cost"``, ``"max_tokens"``, ``"max_model_requests"`` or
    ``"max_tool_calls"``), ``allowed`` is its value and ``used`` what was spent of that measure;
    ``scope`` says whose budget: ``"run"`` (``Agent(budget=...)``), ``"tree:<root id>"`` or
    ``"owner:<owner>"``. The run ends ``error``; these attributes survive the store
    (``TurnHandle.result()`` raises them again).
    """

    limit: str
    allowed: float
    used: float
    scope: str
    on_exceed: str


class OutputValidationError(RepertoryError):
    """The model's final reply did not validate into the requested output type after all retries."""


class ModelError(RepertoryError):
    """The model failed to answer (transport, protocol, or a scripted model out of steps)."""


class RevisionNotFound(RepertoryError):
    """The revision is not on the thread's lineage (unknown, or another thread's): nothing was forked."""


class IllegalTransition(RepertoryError):
    """A run was moved to a status its status cannot reach: a bug where the move is written, not a user's fault.

    Raised by ``RunState``'s transition methods before anything changes; ``run_id``, ``status``
    (where it was) and ``target`` (where it was sent) say which move.
    """


class ToolError(RepertoryError):
    """Raised by a tool to choose the error message the model reads; never escapes the step loop."""


class GuardrailTripped(RepertoryError):
    """A guardrail refused the turn's input or its final reply; the message is the guardrail's own.

    ``guardrail`` names the guardrail (its function's name) and ``stage`` says which side it
    guards (``"input"`` or ``"output"``), where the raiser knew them; the run ends ``error``.
    """


class SuspendSignal(Exception):
    """Raised by ``suspend()`` inside a tool to pause the run; control flow, not a fault."""

    def __init__(self, reason: str | None = None, payload: Any = None, rerun: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.payload = payload
        self.rerun = rerun

    def __reduce__(self) -> tuple[Any, ...]:
        return (SuspendSignal, (self.reason, self.payload, self.rerun))


class SleepSignal(SuspendSignal):
    """Raised by ``sleep()`` inside a tool: suspend the run on a timer, for ``seconds`` or until ``until_ms``.

    Exactly one of the two is set; the engine turns it into a ``timer`` suspension whose
    ``wake_at`` it computes from its clock (so a test's clock decides what "in an hour" means).
    """

    def __init__(self, seconds: float | None = None, until_ms: int | None = None, reason: str | None = None) -> None:
        super().__init__(reason=reason)
        self.seconds = seconds
        self.until_ms = until_ms

    def __reduce__(self) -> tuple[Any, ...]:
        return (SleepSignal, (self.seconds, self.until_ms, self.reason))


class MissingExtra(ImportError):
    """A part of repertory was imported without the packages of its extra; the message is the fix.

    An ``ImportError``, so code that guards an optional import with ``except ImportError`` keeps
    working; ``extra`` names the extra (``pip install 'repertory[<extra>]'``) and ``name`` the first
    missing package. Raised by ``repertory._extras.require`` at the top of each optional package.
    """

    def __init__(self, message: str, *, extra: str = "", name: str | None = None) -> None:
        super().__init__(message, name=name)
        self.extra = extra

    def __reduce__(self) -> tuple[Any, ...]:
        return (MissingExtra, (self.msg,), {"extra": self.extra, "name": self.name})
