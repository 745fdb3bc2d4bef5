"""``SessionHandle`` and ``TurnHandle``: the session tree as a caller holds it.

Handles are cheap and addressable: a handle is a session id, its lineage and the principal it
speaks for. Reads go to the store; everything that changes a session goes through the runtime's
``SessionBackend`` (``Runtime.host``) to the session's actor, so a handle behaves the same on any
backend.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

from pydantic import BaseModel, JsonValue

from repertory.core.budget import Budget, BudgetStore, Ledger, tree_scope
from repertory.core.decisions import Approve, Reject, Resume
from repertory.core.history import MessageHistory
from repertory.core.ids import new_id
from repertory.core.messages import ModelMessage
from repertory.core.principal import Message, NotificationMessage, Principal, to_model_message
from repertory.core.result import RunResult
from repertory.core.state import SuspendReason, Usage
from repertory.core.toolspec import ToolSpec
from repertory.core.tree import IfBusy, Lineage, NewSession, SessionEvent, SessionMetadata, SessionRecord, TurnStatus
from repertory.errors import RepertoryError, RunSuspended
from repertory.runtime.compaction import CompactionResult
from repertory.runtime.forks import FORK_REASON, fork_point, pair_open_calls
from repertory.runtime.results import turn_result
from repertory.tree.cancel import cancel_subtree, subtree

if TYPE_CHECKING:
    from repertory.tree.runtime import Runtime
    from repertory.tree.schedules import Schedule

__all__ = ["Disposable", "SessionHandle", "TurnHandle"]

M = TypeVar("M", bound=BaseModel)


class Disposable:
    """What ``on_progress`` returns: call ``dispose()`` to stop listening (idempotent)."""

    def __init__(self, dispose: Callable[[], None]) -> None:
        self._dispose: Callable[[], None] | None = dispose

    def dispose(self) -> None:
        """Stop listening."""
        if self._dispose is not None:
            fn, self._dispose = self._dispose, None
            fn()


class TurnHandle:
    """One submission: its result, status, events, and a way to cancel it."""

    def __init__(
        self, runtime: Runtime, session_id: str, submission_id: str, output_type: type[BaseModel] | None = None
    ) -> None:
        self._rt = runtime
        self.session_id = session_id
        self.submission_id = submission_id
        self._output_type = output_type

    async def result(self) -> RunResult:
        """Wait until the turn rests (done or suspended) and return its result.

        A failed turn raises its error (``StepBudgetExceeded``, ``ModelError``, ...); a cancelled
        one raises ``RunCancelled``.
        """
        await self.wait()
        output_type_for = self._rt.host.output_type_for
        return await turn_result(
            self._rt.store, output_type_for, self.session_id, self.submission_id, self._output_type
        )

    async def wait(self) -> None:
        """Wait until the turn rests (done, error, cancelled or suspended), without reading its result."""
        await self._rt.host.wait_turn(self.session_id, self.submission_id)

    async def status(self) -> TurnStatus:
        """``queued``, ``running``, ``suspended``, ``done``, ``error`` or ``cancelled``."""
        turn = await self._rt.store.load_turn(self.submission_id)
        if turn is None:
            raise RepertoryError(f"no turn {self.submission_id!r}")
        return turn.status

    async def cancel(self) -> None:
        """Cancel this turn: queued, it never runs; running, it stops; suspended, it is closed."""
        await self._rt.host.cancel_turn(self.session_id, self.submission_id)

    async def events(self) -> AsyncIterator[SessionEvent]:
        """This turn's events, stored then live, ending with its ``turn.completed``."""
        async for event in self._rt.host.events(self.session_id, 0):
            if event.submission_id != self.submission_id:
                continue
            yield event
            if event.type == "turn.completed":
                return


class SessionHandle:
    """A live handle to one durable session, speaking for ``principal``."""

    def __init__(self, runtime: Runtime, record: SessionRecord, principal: Principal) -> None:
        self._rt = runtime
        self._record = record
        self.principal = principal

    @property
    def id(self) -> str:
        """The session id (also its thread id)."""
        return self._record.session_id

    @property
    def lineage(self) -> Lineage:
        """How this session came to exist: root, spawned or forked."""
        return self._record.lineage

    @property
    def record(self) -> SessionRecord:
        """A copy of the session's stored row as this handle read it (agent, metadata, placement, times)."""
        return self._record.model_copy(deep=True)

    @property
    def resource(self) -> str:
        """The canonical URI of this session."""
        return f"repertory://sessions/{self.id}"

    def __repr__(self) -> str:
        return f"SessionHandle({self.id!r}, {self.lineage.kind}, principal={self.principal.kind})"

    # -- the tree -----------------------------------------------------------------------------------

    async def children(self) -> list[SessionHandle]:
        """Sessions spawned or forked from this one, oldest first."""
        return [SessionHandle(self._rt, r, self.principal) for r in await self._rt.store.list_children(self.id)]

    async def parent(self) -> SessionHandle | None:
        """The session this one was spawned or forked from, or ``None`` for a root."""
        parent_id = self.lineage.parent_id
        return None if parent_id is None else await self._rt.session(parent_id, principal=self.principal)

    async def spawn(
        self,
        agent: str | None = None,
        title: str | None = None,
        model: str | None = None,
        cwd: str | None = None,
        *,
        metadata: Mapping[str, JsonValue] | None = None,
    ) -> SessionHandle:
        """A child with no history; inherits this session's agent, model and cwd unless given, and its owner."""
        spec = NewSession(
            agent=agent or self._record.agent,
            title=title,
            model=model if model is not None else self._record.model,
            cwd=cwd if cwd is not None else self._record.cwd,
            lineage=Lineage(kind="spawned", parent_id=self.id),
            root_id=self._record.root_id,
            metadata=dict(metadata or {}),
            owner=self._record.owner,
        )
        return SessionHandle(self._rt, await self._rt.host.create_session(spec), self.principal)

    async def fork(
        self,
        title: str | None = None,
        at_revision: str | None = None,
        *,
        metadata: Mapping[str, JsonValue] | None = None,
        own_tree: bool = False,
        budget: Budget | None = None,
        session_id: str | None = None,
    ) -> SessionHandle:
        """A child sharing this conversation up to ``at_revision`` (default: now), with no copy.

        ``at_revision`` is any revision of this session's lineage (``Lineage.forked_at_revision_id``
        of the child is that revision); another thread's revision, or an unknown one, raises
        ``RevisionNotFound``. Calls left without a result there (a pending approval, a step cut
        short) get error results in the child ("not run in this fork"). Nothing said afterwards
        crosses, either way. ``metadata`` is the child's (nothing of this session's is copied unless
        passed); the owner is this session's.

        ``own_tree=True`` makes the fork the root of a tree of its own (an eval's variant, a what-if
        kept apart from production): it is not this session's child (its lineage names no parent;
        ``forked_at_revision_id`` says where it started), a walk or a cancel of this tree never
        reaches it, and what it spends counts against its own ``budget``, not this tree's.
        ``session_id`` chooses the fork's id, for a caller that must find its fork again after a
        crash: an id a session already has raises ``SessionExists`` and forks nothing.
        """
        if budget is not None and not own_tree:
            raise ValueError("a fork in this tree spends against the tree's budget: give budget= with own_tree=True")
        store = self._rt.store
        thread = await store.load_thread(self.id)
        head = None if thread is None else thread.history_revision_id
        start: MessageHistory | None = None
        if (at_revision is None or at_revision == head) and await self._rests_paired(head):
            point, paired = head, False  # O(1): nothing to read, nothing open at the head
        else:
            start = await fork_point(store, head, at_revision)
            point = start.revision_id
            paired = pair_open_calls(start, FORK_REASON) is not None
        spec = NewSession(
            agent=self._record.agent,
            session_id=session_id if session_id is not None else new_id(),
            title=title,
            model=self._record.model,
            cwd=self._record.cwd,
            lineage=Lineage(kind="forked", parent_id=None if own_tree else self.id, forked_at_revision_id=point),
            root_id=None if own_tree else self._record.root_id,
            head=point,
            metadata=dict(metadata or {}),
            owner=self._record.owner,
        )
        if budget is not None:
            await self._rt.set_budget(tree_scope(spec.session_id), budget)  # before its first run, as a root's
        record = await self._rt.host.create_session(spec)
        if paired and start is not None:
            # The child's own first revision: the error results, on top of the shared one. Made
            # after the child exists (a crash in between leaves the calls open, and its first turn
            # answers them as superseded), through the store like any head move.
            await store.move_head(record.session_id, history=start, base_revision_id=point)
        return SessionHandle(self._rt, record, self.principal)

    async def _rests_paired(self, head: str | None) -> bool:
        """Whether the thread's head pairs every call with a result, known without reading the history.

        True for an empty thread, and when the latest run ended ``done`` or ``cancelled`` at the
        head (a finished run pairs every call); otherwise the fork reads the history to find open
        calls. This keeps a fork at the head O(1) whatever the conversation's length.
        """
        if head is None:
            return True
        latest = await self._rt.store.list_runs(self.id, limit=1)
        return bool(latest) and latest[0].status in ("done", "cancelled") and latest[0].history_revision_id == head

    async def compact(self) -> CompactionResult | None:
        """Compact this session's context now (``Agent(compaction=...)``), after any turn in progress.

        ``None`` when there is nothing to compact. See ``Session.compact()``: the summary is one
        more revision, nothing is deleted, and a suspended run keeps its token.
        """
        return await self._rt.host.compact(self.id)

    async def metadata(self) -> SessionMetadata:
        """Title, model, live status, cwd and times."""
        return await self._rt.host.metadata(self.id)

    async def amend(
        self, *, agent: str | None = None, metadata: Mapping[str, JsonValue] | None = None
    ) -> SessionRecord:
        """Rebind the session to another agent and/or replace its metadata; returns the new record.

        The agent can change only until the first turn is queued (``ValueError`` afterwards: the
        history was written by the other one); a thread an HTTP client created without naming an
        assistant is bound this way by its first run. ``None`` leaves a field as it is. The handle
        reads the new record.
        """
        record = await self._rt.host.amend_session(
            self.id, agent=agent, metadata=None if metadata is None else dict(metadata)
        )
        self._record = record
        return record.model_copy(deep=True)

    # -- turns --------------------------------------------------------------------------------------

    async def send(
        self,
        message: Message,
        if_busy: IfBusy = "enqueue",
        *,
        output: type[BaseModel] | None = None,
        client_tools: Sequence[ToolSpec] = (),
    ) -> TurnHandle:
        """Queue a message as a turn; returns once the turn is durable (it runs exactly once).

        ``client_tools`` are tools the caller runs itself (a browser's): the model may call them,
        the turn then suspends, and ``resume(token, value)`` answers the call with ``value`` as its
        result. Their names must differ from the agent's own tools (``ValueError``).
        """
        model_message, kind = to_model_message(message, self.principal)
        turn = await self._rt.host.send(self.id, model_message, kind, if_busy, output, client_tools=client_tools)
        return TurnHandle(self._rt, self.id, turn.submission_id, output)

    async def reply(self, if_busy: IfBusy = "enqueue") -> TurnHandle:
        """Queue a turn that adds no message: the model answers the thread as it stands.

        What regenerating a reply is once the thread's head was set back to a checkpoint (the HTTP
        server's run from an earlier checkpoint without input): the calls answered at that
        checkpoint are never run again, only the model's reply and what follows it are made afresh.
        The turn records who asked (this handle's principal) with an empty message.
        """
        asking = ModelMessage.user("", origin=self.principal.origin)
        turn = await self._rt.host.send(self.id, asking, "reply", if_busy, None)
        return TurnHandle(self._rt, self.id, turn.submission_id)

    def get_turn(self, submission_id: str) -> TurnHandle:
        """Re-acquire a handle to a turn started earlier."""
        return TurnHandle(self._rt, self.id, submission_id)

    async def notify(self, *, title: str, body: str, if_busy: IfBusy = "enqueue") -> TurnHandle:
        """Send a notification: a system-role turn, stamped as a system event, not as the user."""
        return await self.send(NotificationMessage(title=title, body=body), if_busy)

    @overload
    async def run(self, prompt: Message) -> RunResult: ...
    @overload
    async def run(self, prompt: Message, output: type[M]) -> M: ...
    async def run(self, prompt: Message, output: type[M] | None = None) -> RunResult | M:
        """Send and wait for the answer; with ``output=M`` the reply is validated into ``M``.

        An invalid reply goes back to the model with the validation error, at most twice, then
        ``OutputValidationError``. A run that suspends raises ``RunSuspended`` when ``output`` is
        given (there is no reply to validate yet); without ``output`` its ``RunResult`` says so.
        """
        model_message, kind = to_model_message(prompt, self.principal)
        # One call: where the backend is remote it queues, waits and reads the result over there.
        result = await self._rt.host.run_turn(self.id, model_message, kind, output)
        if output is None:
            return result
        if result.status != "done" or result.output is None:
            raise RunSuspended(
                f"run {result.run_id!r} is {result.status}; no reply to validate yet", run_id=result.run_id
            )
        out: M = result.output
        return out

    # -- events -------------------------------------------------------------------------------------

    def on_progress(self, listener: Callable[[SessionEvent], None]) -> Disposable:
        """Call ``listener`` with everything this session emits from now on; dispose to stop.

        A listener that raises is logged and skipped; it never stops the session.
        """
        return Disposable(self._rt.host.listen(self.id, listener))

    def events(self, after_seq: int = 0) -> AsyncIterator[SessionEvent]:
        """Stored events with ``seq > after_seq``, then live ones; ends only when the caller stops."""
        return self._rt.host.events(self.id, after_seq)

    # -- approvals and control ----------------------------------------------------------------------

    async def pending_approvals(self, tree: bool = False) -> list[SuspendReason]:
        """The approval the session waits for, with its token (only a handle can see tokens).

        ``tree=True`` lists every approval and suspension of this session and its descendants
        (delegated children, grandchildren, ...), this session first, then breadth-first, each with
        its ``session_id``: what a human at the root must answer, wherever in the tree it waits.
        ``approve``/``reject``/``resume`` on this handle accept any of those tokens.
        """
        if not tree:
            return await self._rt.host.pending_approvals(self.id)
        found: list[SuspendReason] = []
        for session_id in await self._subtree():
            for run in await self._rt.store.list_runs(session_id, statuses=("suspended",)):
                if run.suspended_on is not None:
                    found.append(run.suspended_on.model_copy(update={"session_id": session_id}))
        return found

    async def _subtree(self) -> list[str]:
        """This session and its descendants, breadth-first."""
        return await subtree(self._rt.store, self.id)

    async def _holder(self, token: str) -> str:
        """The session of this subtree whose suspended run holds ``token`` (this one if none does).

        Deciding on this session when the token is not its own would queue the decision behind a
        turn that may be waiting for that very decision (a parent waiting for its child), so the
        holder is found in the store first: one read of this session's suspended run when the token
        is its own (~10 us on SQLite), the subtree only otherwise. The backend checks the token as ever.
        """
        if not isinstance(token, str):
            return self.id  # the backend's own check says what is wrong with it
        wanted = token.encode()
        frontier = [self.id]
        while frontier:
            level: list[str] = []
            for session_id in frontier:
                for run in await self._rt.store.list_runs(session_id, statuses=("suspended",)):
                    live = run.suspended_on.token if run.suspended_on is not None else None
                    if live is not None and secrets.compare_digest(live.encode(), wanted):
                        return session_id
                level.extend(r.session_id for r in await self._rt.store.list_children(session_id))
            frontier = level
        return self.id

    async def approve(self, token: str, approval: Any = None, args: dict[str, Any] | None = None) -> RunResult:
        """Approve the pending tool call; it runs exactly once and the run goes on.

        A descendant's token (``pending_approvals(tree=True)``) is decided in that descendant, whose
        run goes on; a parent waiting for it (a delegation) goes on when it ends.
        """
        holder = await self._holder(token)
        return await self._rt.host.decide(holder, Approve(token=token, approval=approval, args=args), self.principal)

    async def reject(self, token: str, reason: str = "not approved") -> RunResult:
        """Reject the pending tool call; the model reads ``reason`` as an error result (a descendant's token too)."""
        holder = await self._holder(token)
        return await self._rt.host.decide(holder, Reject(token=token, reason=reason), self.principal)

    async def resume(self, token: str, value: Any) -> RunResult:
        """Answer a ``suspend()``: ``value`` arrives as a message from this handle's principal (a descendant's too)."""
        holder = await self._holder(token)
        return await self._rt.host.decide(holder, Resume(token=token, value=value), self.principal)

    async def cancel(self, tree: bool = False) -> None:
        """Cancel the running turn, every queued one, and a suspended run.

        ``tree=True`` does so for this session and every descendant, and returns only once no
        turn of the tree is left queued, running or suspended: from then on no model request
        and no tool call of the tree starts (``repertory.tree.cancel``).
        """
        if not tree:
            await self._rt.host.cancel(self.id)
            return
        await cancel_subtree(self._rt.store, self._rt.host, self.id)

    async def recover(self) -> list[TurnHandle]:
        """Drive again this session's turns that a crashed process left queued or running; their handles.

        What a restarted server does for every session, for this one (the web UI's "recover"):
        each turn goes on from its last checkpoint, non-idempotent calls are never run twice, and
        its run and turn end together. A turn already driven here is not driven twice.
        """
        return [self.get_turn(sid) for sid in await self._rt.host.recover(self.id)]

    # -- schedules ----------------------------------------------------------------------------------

    async def schedule(self, cron: str, message: Message, tz: str = "UTC", *, end_at: int | None = None) -> Schedule:
        """Send ``message`` as one durable turn at every fire time of ``cron`` in time zone ``tz``.

        Each firing runs at most once, also across restarts and runtimes; firings missed while
        nothing ran are caught up once. The message's origin is this handle's principal.
        """
        return await self._rt.create_schedule(
            cron, message, session_id=self.id, tz=tz, principal=self.principal, end_at=end_at
        )

    async def schedules(self) -> list[Schedule]:
        """This session's schedules, oldest first."""
        return await self._rt.schedules(self.id)

    async def budget(self) -> Ledger | None:
        """The budget of this session's tree with what the tree has spent against it, or ``None`` without one."""
        store = self._rt.store
        if not isinstance(store, BudgetStore):
            return None
        scope = tree_scope(self._record.root_id)
        return (await store.load_ledgers([scope])).get(scope)

    async def usage(self, tree: bool = False) -> Usage:
        """Token usage of this session's runs; ``tree=True`` adds every descendant's."""
        total = Usage()
        pending = [self.id]
        while pending:
            sid = pending.pop()
            for run in await self._rt.store.list_runs(sid):
                total = total + run.usage
            if tree:
                pending.extend(r.session_id for r in await self._rt.store.list_children(sid))
        return total
