"""The ``SessionStore`` protocol: the one seam between the engine and a database.

Every backend (memory, SQLite, PostgreSQL) implements it and passes the same conformance suite in
``repertory.testing.conformance``. The engine never reaches past this protocol for runs, threads and history.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import NamedTuple, Protocol, Self, runtime_checkable

from pydantic import BaseModel, ConfigDict, JsonValue

from repertory.core.budget import SpendDelta
from repertory.core.history import MessageHistory
from repertory.core.messages import Role
from repertory.core.state import RunState, RunStatus, ThreadState
from repertory.core.tree import SessionEvent, SessionRecord, SessionStatus, TurnRecord, TurnStatus

__all__ = ["AcceptedTurn", "DeletedRows", "SessionStore", "StoreAliases", "TreeStore"]


@runtime_checkable
class SessionStore(Protocol):
    """Durable home of runs, thread heads and the immutable history graph.

    Returned records are copies: mutating one never changes the store. ``commit_session`` is the
    one atomic write of a checkpoint; ``save`` is the seed's unconditional low-level escape hatch.
    """

    async def load_run(self, run_id: str) -> RunState | None:
        """A copy of the run's checkpoint, or ``None`` for an unknown id."""

    async def list_runs(
        self, thread_id: str | None = None, *, statuses: Sequence[RunStatus] | None = None, limit: int | None = None
    ) -> list[RunState]:
        """Runs, ``updated_at`` descending, then most recent write first; optionally one thread's.

        ``statuses`` keeps only runs in those statuses and ``limit`` caps the list (extensions the
        engine uses to ask bounded questions on every turn).
        """

    async def delete_run(self, run_id: str) -> None:
        """Remove a run row; history and threads are untouched (they are shared)."""

    async def load_thread(self, thread_id: str) -> ThreadState | None:
        """A copy of the thread head, or ``None`` for an unknown id."""

    async def load_history(self, revision_id: str) -> MessageHistory | None:
        """The revision and its whole lineage, root first, or ``None`` for an unknown revision."""

    async def commit_session(
        self,
        *,
        run: RunState,
        thread: ThreadState,
        history: MessageHistory,
        base_revision_id: str | None = None,
        redeem_token: str | None = None,
        events: Sequence[SessionEvent] = (),
        turn: TurnRecord | None = None,
        session: SessionRecord | None = None,
        spend: SpendDelta | None = None,
    ) -> None:
        """Atomically write the history delta since ``base_revision_id``, the run row and the thread head.

        Raises ``CommitConflict`` and writes nothing when the three revision pointers disagree,
        when the stored thread head is not ``base_revision_id`` (``None``: the thread must not
        have a head yet), or when the stored run is already ``done`` or ``cancelled``.
        With ``redeem_token`` (an engine extension) it also raises unless that token is the stored
        run's live token: the redemption and the decision it records are one transaction.
        ``events`` (also an extension) are appended in the same transaction, so a session's event
        log never runs ahead of, or behind, its checkpoints.
        ``turn`` and ``session`` (extensions of a ``TreeStore``) rewrite that turn's and that
        session's mutable fields as ``update_turn``/``update_session`` do, in the same transaction:
        a turn's start and end ride its first and last checkpoints instead of costing transactions
        of their own. An unknown turn or session is ``StoreError`` and nothing is written.
        ``spend`` (an extension of a ``BudgetStore``) is added to the ledgers of its scopes that
        exist (``core.budget``), in the same transaction: a budget is checked against what is stored.
        """

    async def save(self, run: RunState) -> None:
        """Write a run checkpoint alone, unconditionally."""

    async def close(self) -> None:
        """Release connections; the store is unusable afterwards."""

    async def __aenter__(self) -> Self:
        """``async with store:`` closes it on exit."""

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the store."""


class DeletedRows(BaseModel):
    """What ``TreeStore.delete_sessions`` removed, counted by table.

    ``revisions`` and ``entries`` count only the history rows no remaining thread reaches any
    more (the rest are shared with a surviving lineage, and stay).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    sessions: int = 0
    runs: int = 0
    turns: int = 0
    events: int = 0
    revisions: int = 0
    entries: int = 0
    memory_records: int = 0
    timers: int = 0
    schedules: int = 0

    def __add__(self, other: DeletedRows) -> DeletedRows:
        return DeletedRows(**{k: getattr(self, k) + getattr(other, k) for k in DeletedRows.model_fields})


class AcceptedTurn(NamedTuple):
    """What ``TreeStore.accept_turn`` returns: the queued turn (with its seq) and its session's thread.

    ``thread`` is the thread row as the accepting write saw it (``None``: the session has no
    thread), so a turn that starts at once knows its head without reading it again.
    """

    turn: TurnRecord
    thread: ThreadState | None


@runtime_checkable
class TreeStore(SessionStore, Protocol):
    """The tables the runtime keeps beside runs and history: sessions, turns and events.

    Every built-in store implements it and passes ``repertory.testing.conformance.TreeConformance``.
    """

    async def create_session(self, session: SessionRecord, *, head: str | None = None) -> None:
        """Insert a session and its thread (pointing at ``head``: a fork's shared revision) atomically.

        Raises ``CommitConflict`` if the session or its thread already exists.
        """

    async def move_head(self, thread_id: str, *, history: MessageHistory, base_revision_id: str | None) -> None:
        """Point an existing thread's head at ``history.revision_id``, writing what of ``history`` is new.

        ``commit_session`` without a run, for the head moves no run makes: a fork's first revision
        (error results for calls left open where it forked) and a thread set back to an earlier
        revision (an HTTP run from a checkpoint). The same compare-and-set guards it: it raises
        ``CommitConflict`` and writes nothing unless the thread exists and its stored head is
        ``base_revision_id``. The revisions and entries written are those walked back from the new
        head until one the store holds, as for a fork's first commit; ``history.revision_id`` may be
        ``None`` (the thread is set back to empty). Nothing is deleted: the old head's revisions stay.
        """

    async def load_session(self, session_id: str) -> SessionRecord | None:
        """A copy of the session row, or ``None``."""

    async def update_session(self, session: SessionRecord) -> None:
        """Rewrite a session row's mutable fields (title, model, cwd, updated_at)."""

    async def amend_session(
        self, session_id: str, *, agent: str | None = None, metadata: Mapping[str, JsonValue] | None = None
    ) -> SessionRecord:
        """Rewrite the session's agent and/or metadata (what ``update_session`` keeps); returns the new row.

        ``None`` leaves a field as it is; ``metadata`` replaces the whole document. Raises
        ``StoreError`` for an unknown session. When a change is allowed (an agent only before the
        first turn) is the runtime's rule, not the store's.
        """

    async def delete_sessions(self, session_ids: Sequence[str]) -> DeletedRows:
        """Delete sessions and everything that is theirs alone, in one transaction; unknown ids are skipped.

        Goes: each session's row, its thread, runs, turns, events and memory records of its
        thread (``MemoryStore`` rows whose ``thread_id`` is the session's, in any resource).
        History revisions on a deleted thread's lineage go too unless another thread's lineage
        still reaches them (a fork, a parent the fork shares a prefix with), and entries go with
        the last revision that holds them. Children not in ``session_ids`` stay as they are (their
        ``lineage.parent_id`` then names a session that no longer exists).
        """

    async def list_children(self, parent_id: str) -> list[SessionRecord]:
        """Sessions spawned or forked from ``parent_id``, oldest first."""

    async def list_sessions(self, *, roots_only: bool = False, limit: int | None = None) -> list[SessionRecord]:
        """Sessions oldest first (``roots_only``: only roots), at most ``limit``."""

    async def page_sessions(
        self,
        *,
        before: str | None = None,
        limit: int = 50,
        roots_only: bool = False,
        agent: str | None = None,
        status: SessionStatus | None = None,
        search: str | None = None,
        owner: str | None = None,
    ) -> list[SessionRecord]:
        """One page of sessions, newest first: at most ``limit`` created before session ``before``.

        Keyset pagination (the next page starts ``before`` the last id of this one), so a page
        costs the rows it returns and those its filters skip, never an offset into the table; an
        unknown ``before`` gives an empty page. Filters combine: ``agent`` exactly; ``search`` an
        id prefix or a title substring, ignoring (at least ASCII) case; ``status`` by the store's rule: ``running``
        while a turn is queued or running, else ``suspended`` or ``error`` when the thread's latest
        run is, else ``idle`` (a live host may know a moment sooner); ``owner`` only the sessions
        whose ``SessionRecord.owner`` it is (the HTTP server's tenancy; ``None``: every session).
        """

    async def session_counts(self, *, owner: str | None = None) -> dict[SessionStatus, int]:
        """How many sessions are ``running``, ``suspended`` and ``error`` by ``page_sessions``' rule.

        ``owner``: only the sessions of that owner, as ``page_sessions`` filters them.
        """

    async def add_turn(self, turn: TurnRecord, *, events: Sequence[SessionEvent] = ()) -> TurnRecord:
        """Queue a turn durably; returns it with its per-session ``seq``. A known id is ``CommitConflict``.

        ``events`` are appended in the same transaction, as ``append_events`` would (a gap or a
        repeated seq is ``CommitConflict`` and nothing is written): a turn accepted by an idle
        session starts at once, and its ``turn.started`` is then durable with the turn itself.
        """

    async def accept_turn(self, turn: TurnRecord, *, events: Sequence[SessionEvent] = ()) -> AcceptedTurn:
        """``add_turn``, also returning the session's thread (its id is the session's) as that write saw it.

        For a turn that starts at once: the model must see the thread as it is (an HTTP run from an
        earlier checkpoint moves the head through the store, not through the session), and read
        inside the accepting write the head costs no statement of its own. Errors as ``add_turn``.
        """

    async def update_turn(self, turn: TurnRecord, *, events: Sequence[SessionEvent] = ()) -> None:
        """Rewrite a turn's status, error and times; append ``events`` in the same transaction.

        A turn that ends writes its status and its ``turn.completed`` event together: written
        apart, a crash between the two left a finished turn whose log never said so (found by
        the chaos soak), and nothing re-drives a finished turn to write it. An event seq that is
        not the next one is ``CommitConflict`` and nothing is written.
        """

    async def load_turn(self, submission_id: str) -> TurnRecord | None:
        """A copy of the turn, or ``None``."""

    async def list_turns(self, session_id: str, statuses: Sequence[TurnStatus] | None = None) -> list[TurnRecord]:
        """A session's turns in queue order, optionally only those in ``statuses``."""

    async def list_open_turns(self) -> list[TurnRecord]:
        """Every ``queued`` or ``running`` turn of every session (what a restart must finish)."""

    async def append_events(self, events: Sequence[SessionEvent]) -> None:
        """Append events; a ``(session_id, seq)`` already stored is ``CommitConflict`` and nothing is written."""

    async def load_events(self, session_id: str, after_seq: int = 0, limit: int | None = None) -> list[SessionEvent]:
        """Stored events with ``seq > after_seq``, in order."""

    async def last_event_seq(self, session_id: str) -> int:
        """The highest stored seq of the session (0 when it has none)."""


class StoreAliases:
    """The seed's short aliases (``load``, ``list``, ``delete``) and ``async with`` for a store class."""

    async def load(self, run_id: str) -> RunState | None:
        """Alias of ``load_run``."""
        return await self.load_run(run_id)  # type: ignore[attr-defined, no-any-return]

    async def list(self, thread_id: str | None = None) -> list[RunState]:
        """Alias of ``list_runs``."""
        return await self.list_runs(thread_id)  # type: ignore[attr-defined, no-any-return]

    async def delete(self, run_id: str) -> None:
        """Alias of ``delete_run``."""
        await self.delete_run(run_id)  # type: ignore[attr-defined]

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()  # type: ignore[attr-defined]


# -- long-term memory (``repertory.memory``) ------------------------------------------------------

__all__ += ["MemoryRecord", "MemoryStore", "MemoryVectors", "WorkingMemory"]


class MemoryRecord(BaseModel):
    """One remembered message of a resource (a user, a tenant): its text, thread and place in order.

    ``seq`` is the resource's own gap-free order, assigned by the store when the record is appended
    (commit order, also across processes), so a reader that has seen up to ``seq`` n can ask for
    what came after without missing a row. ``embedding`` is float32 bytes in the vector space named
    by ``embedder``; reads of text leave both out (``None``) to keep them small.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    thread_id: str
    role: Role
    text: str
    created_at: int
    seq: int = 0
    embedder: str | None = None
    embedding: bytes | None = None


class MemoryVectors(NamedTuple):
    """The embeddings of a resource's records, as columns (cheap to build for 100,000 rows)."""

    seqs: list[int]
    thread_ids: list[str]
    embeddings: list[bytes]


class WorkingMemory(BaseModel):
    """A resource's working-memory document and when it was last written."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    document: JsonValue
    updated_at: int


@runtime_checkable
class MemoryStore(Protocol):
    """The memory tables every built-in store keeps beside its sessions, scoped by ``resource``.

    Every read and write names one resource and never returns another's rows: isolation between
    resources is a security property, and ``repertory.testing.conformance.MemoryConformance`` checks it.
    """

    async def append_memory(self, resource: str, records: Sequence[MemoryRecord]) -> list[int]:
        """Store records in one transaction (their ``seq`` is ignored); returns the seqs given, in order."""

    async def recent_memory(
        self, resource: str, *, limit: int, exclude_thread: str | None = None
    ) -> list[MemoryRecord]:
        """The last ``limit`` records (of threads other than ``exclude_thread``), oldest first, no embeddings."""

    async def load_memory(self, resource: str, seqs: Sequence[int]) -> list[MemoryRecord]:
        """The records with these seqs, in seq order, no embeddings; unknown seqs are skipped."""

    async def memory_vectors(self, resource: str, *, embedder: str, after_seq: int = 0) -> MemoryVectors:
        """Embeddings made by ``embedder`` of records after ``after_seq``, in seq order."""

    async def load_working_memory(self, resource: str) -> WorkingMemory | None:
        """The resource's working-memory document, or ``None`` before the first write."""

    async def save_working_memory(self, resource: str, document: JsonValue, updated_at: int) -> None:
        """Replace the resource's working-memory document."""

    async def forget_memory(self, resource: str) -> None:
        """Delete the resource's records and working memory (its seq counter stays, so order holds)."""
