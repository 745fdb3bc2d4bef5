"""``SessionActor``: one session's mailbox, follow-up queue, approval gate and event bus.

Why one module past 600 lines: the mailbox, the follow-up queue, the approval gate and the turn's
bookkeeping riding its run's commits (``_TurnRider``) share one invariant (one job at a time, and
the stored turn status advanced only by a commit that landed); split, each part would read the
others' private state.

A session is a logical actor: an asyncio object that processes one job at a time (a turn, or a
decision on a suspended run), so many thousands can share one process. Turns are durable before
``send()`` returns (a ``queued`` turn row); the worker drives them in queue order, exactly once,
and a restarted host finishes every turn left ``queued`` or ``running``. Decisions (approve, reject,
resume) go through the same mailbox, so they never race a turn.

Cancellation uses one ``AbortSignal`` per job: aborting before the run starts commits it
``cancelled`` at once, aborting mid-run stops the model or tool it waits on.

What a turn costs the store (issue 21; ``tests/runtime/test_turn_cost.py`` counts it): accepting it
is one transaction (the turn row, and when the session is idle, so the turn starts at once, its
``running`` status and ``turn.started`` event with it); its bookkeeping then rides the run's own
commits (``_TurnRider``): the turn's end, ``turn.completed`` and the session's ``updated_at`` go
with the final checkpoint, and the run's input with its first step (the turn row holds it
durably: ``Session.start(durable_input=True)``). The actor keeps what it wrote (its record, its
event position, its turns, its last result) and reads none of it again; the thread head, which an
HTTP run from an earlier checkpoint moves through the store, comes back from the statement that
accepts the turn (``TreeStore.accept_turn``) and is handed to the run (``Session.start(thread=)``).
A turn queued behind another, or one a restart resumes, still writes its start (its status and
``turn.started``, in one transaction) on its own, and its run reads the head.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from repertory.core.budget import cancels_tree
from repertory.core.clock import Clock
from repertory.core.ids import new_id, now_ms
from repertory.core.memory import Memory
from repertory.core.messages import ModelMessage
from repertory.core.result import RunResult
from repertory.core.state import ErrorInfo, RunState, SuspendReason, ThreadState
from repertory.core.store import TreeStore
from repertory.core.toolspec import ToolSpec
from repertory.core.tree import (
    OPEN_TURN_STATUSES,
    IfBusy,
    SessionEvent,
    SessionRecord,
    SessionStatus,
    TurnKind,
    TurnRecord,
    TurnStatus,
)
from repertory.core.trusted import copied
from repertory.errors import CommitConflict, RepertoryError, RunCancelled, SessionBusy, SessionNotFound, StoreError
from repertory.runtime._control import commit_cancelled, commit_failed
from repertory.runtime._loop import Riding
from repertory.runtime.agent import Agent
from repertory.runtime.compaction import CompactionResult
from repertory.runtime.events import EventBus
from repertory.runtime.results import OutputTypeFor, turn_result
from repertory.runtime.services import SessionServices
from repertory.runtime.session import Session
from repertory.runtime.signals import AbortSignal
from repertory.runtime.timekeeper import TimerArm
from repertory.runtime.tools import abandon_calls
from repertory.tracing import current_traceparent, in_caller_context, tracing_on, turn_span

__all__ = ["SessionActor"]

_TERMINAL: tuple[TurnStatus, ...] = ("done", "error", "cancelled")
_log = logging.getLogger(__name__)
_REDRIVE_FIRST_S = 0.5
"""The pause before a turn whose drive failed on the store is driven again; it doubles each time."""
_REDRIVE_MAX_S = 10.0
"""The longest pause between two such attempts (a store that stays away is tried this often)."""


def _store_failed(exc: BaseException) -> bool:
    """Whether ``exc`` says the store could not be read or written (not that a commit lost a race).

    Such a failure leaves a run as its last commit left it, as a crash would; a ``CommitConflict``
    is an answer from the store (the thread moved on), which driving again would only repeat.
    """
    return isinstance(exc, StoreError) and not isinstance(exc, CommitConflict)


def type_path(kind: type[BaseModel] | None) -> str | None:
    """``module:qualname`` of an output type, so a restarted host can import it again."""
    return None if kind is None else f"{kind.__module__}:{kind.__qualname__}"


@dataclass(eq=False)
class _Job:
    kind: Literal["turn", "decision", "compaction"]
    turn: TurnRecord | None = None
    output_type: type[BaseModel] | None = None
    decide: Callable[[Session], Awaitable[RunResult]] | None = None
    future: asyncio.Future[Any] | None = None
    signal: AbortSignal = field(default_factory=AbortSignal)
    over: asyncio.Event = field(default_factory=asyncio.Event)
    # A turn this actor accepted (its run cannot exist yet) that was already started durably at
    # accept (``running``, ``turn.started``): the worker writes neither again.
    fresh: bool = False
    started: bool = False
    # How many times this turn was handed back to the mailbox because a drive of it failed on the
    # store (``_drive_again``); such a job waits a little, then drives the turn as the store holds it.
    redrives: int = 0
    # The session's thread as the write that accepted a started turn read it: its run starts from
    # that head without reading it again (taken once: a retry reads the store).
    thread: ThreadState | None = None


class _DrivenOn(Exception):
    """A decision's job to its decider: the decision landed and its turn was handed back (``_drive_again``)."""

    def __init__(self, submission_id: str) -> None:
        super().__init__(submission_id)
        self.submission_id = submission_id


class _TurnRider:
    """A turn's row and its end, riding the drive's commits (``CommitRider``) instead of writes of their own.

    A commit whose run is at rest carries the turn's status (``suspended``, or a terminal one with
    ``turn.completed`` and the session's ``updated_at``); a commit while the turn's stored status
    is not yet ``running`` carries that. ``stored`` is the status the store holds, advanced only
    by a commit that landed, so ``SessionActor._finish`` writes only what no commit carried.
    """

    def __init__(self, actor: SessionActor, turn: TurnRecord) -> None:
        self.actor = actor
        self.turn = turn
        self.stored: TurnStatus = turn.status

    def ride(self, run: RunState) -> Riding | None:
        status = _turn_status(run.status)
        if status == self.stored:
            return None
        error = run.error if status == "error" else None
        # The engine's own records with values it made: copied, not validated (``core.trusted``).
        turn = copied(self.turn, status=status, updated_at=now_ms(), error=error)
        if status not in _TERMINAL:
            return Riding(turn=turn)
        return Riding(
            turn=turn,
            session=copied(self.actor.record, updated_at=turn.updated_at),
            events=(("turn.completed", _completed(turn, status)),),
        )

    def landed(self, riding: Riding) -> None:
        turn = riding.turn
        if turn is None:
            return
        self.stored = turn.status
        self.turn.status, self.turn.updated_at, self.turn.error = turn.status, turn.updated_at, turn.error
        if riding.session is not None:
            self.actor.record.updated_at = riding.session.updated_at


def _completed(turn: TurnRecord, status: TurnStatus) -> dict[str, Any]:
    """The data of a turn's ``turn.completed`` event."""
    data: dict[str, Any] = {"submission_id": turn.submission_id, "status": status, "run_id": turn.run_id}
    if turn.error is not None:
        data["error"] = {"type": turn.error.type, "message": turn.error.message}
    return data


class SessionActor:
    """The live half of one session; its state is in the store, so it can leave memory when idle."""

    def __init__(
        self,
        *,
        store: TreeStore,
        agent: Agent,
        record: SessionRecord,
        last_seq: int | None,
        last_run: RunState | None,
        resolve_output: Callable[[str | None], type[BaseModel] | None],
        listeners: list[Callable[[SessionEvent], None]] | None = None,
        memory: Memory | None = None,
        clock: Clock | None = None,
        timers: TimerArm | None = None,
        services: SessionServices | None = None,
        ledgered: Sequence[str] = (),
    ) -> None:
        self.id = record.session_id
        self.record = record
        self.store = store
        self.bus = EventBus(self.id, last_seq, listeners, store=store)
        self.session = Session(
            store=store,
            agent=agent,
            memory=memory,
            thread_id=self.id,
            outbox=self.bus,
            origin=None,
            clock=clock,
            timers=timers,
            services=services,
            budget_scopes=ledgered,
        )
        self.session.adopt_state(last_run)
        self._resolve_output = resolve_output
        self._jobs: collections.deque[_Job] = collections.deque()
        self._worker: asyncio.Task[None] | None = None
        self._current: _Job | None = None
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}
        self._send_lock: asyncio.Lock | None = None  # made on the first send
        self._suspended: dict[str, TurnRecord] | None = None  # loaded on first need
        self._retired = False  # set by retire(): the session is being deleted, nothing new may start
        self._rider: _TurnRider | None = None  # the running turn's, while its drive runs
        self._outcome: tuple[str, RunResult] | None = None  # the last turn's result, for run_turn
        self.last_active = time.monotonic()

    # -- state --------------------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """A turn or decision is running, or a turn is queued."""
        return self._current is not None or bool(self._jobs)

    @property
    def idle(self) -> bool:
        """Nothing to do and nobody watching: the host may passivate this actor."""
        return not self.busy and not self.bus.watched and not any(self._waiters.values())

    def status(self) -> SessionStatus:
        """``running`` while busy, else what the latest run says."""
        if self.busy:
            return "running"
        run = self.session.state
        if run is not None and run.status in ("suspended", "error"):
            return run.status
        return "idle"

    def touch(self) -> None:
        """Mark the actor active now (the host passivates actors idle for longer than its timeout)."""
        self.last_active = time.monotonic()

    # -- the mailbox --------------------------------------------------------------------------------

    def resume_open_turns(self, turns: list[TurnRecord]) -> None:
        """Queue turns a previous host left ``queued`` or ``running`` (restart recovery).

        A turn already queued or being driven here is not queued again, so a recovery that is
        run again (a host whose first start failed half-way on the store) drives each turn once.
        """
        current = self._current
        known = {j.turn.submission_id for j in (*self._jobs, *([current] if current else [])) if j.turn is not None}
        for turn in turns:
            if turn.submission_id not in known:
                self._jobs.append(_Job("turn", turn, self._resolve_output(turn.output_type)))
        self._ensure_worker()

    async def send(
        self,
        message: ModelMessage,
        kind: TurnKind,
        if_busy: IfBusy,
        output_type: type[BaseModel] | None,
        submission_id: str | None = None,
        client_tools: Sequence[ToolSpec] = (),
    ) -> TurnRecord:
        """Queue a turn durably and return it; ``if_busy`` decides what happens when the session is busy.

        A caller-chosen ``submission_id`` makes the send idempotent: a retry after a lost reply
        (a host that crashed mid-call) returns the turn already queued instead of a second one.
        """
        if if_busy not in ("enqueue", "reject", "interrupt"):
            raise ValueError(f"if_busy must be 'enqueue', 'reject' or 'interrupt', not {if_busy!r}")
        clash = sorted({t.name for t in client_tools} & set(self.session.agent.tools))
        if clash:
            raise ValueError(f"client tools {clash} have the names of agent {self.session.agent.name!r}'s own tools")
        if submission_id is not None:
            known = await self.store.load_turn(submission_id)
            if known is not None:
                if known.session_id != self.id:
                    raise ValueError(f"submission id {submission_id!r} belongs to another session")
                return known
        self.touch()
        # One send at a time: the busy check, the durable queue position and the in-memory queue
        # agree, so concurrent sends run in their stored order and "reject" cannot let two in.
        if self._send_lock is None:
            self._send_lock = asyncio.Lock()
        async with self._send_lock:
            self._refuse_if_retired()
            busy = self.busy
            if busy and if_busy == "reject":
                raise SessionBusy(f"session {self.id!r} has a turn running or queued", session_id=self.id)
            turn = TurnRecord(
                submission_id=submission_id or new_id(),
                session_id=self.id,
                kind=kind,
                message=message,
                # Nothing ahead of it: the worker takes it at once, so it is accepted as started.
                status="queued" if busy else "running",
                run_id=new_id(),
                output_type=type_path(output_type),
                traceparent=current_traceparent(),  # the turn's span continues the sender's trace
                client_tools=list(client_tools),
            )
            events: Sequence[SessionEvent] = ()
            mine = 0
            if not busy:
                await self.bus.load_seq(self.store)
                mine = self._emit_started(turn)
                events = self.bus.take()
            thread: ThreadState | None = None
            try:
                if busy:
                    turn = await self.store.add_turn(turn, events=events)
                else:
                    turn, thread = await self.store.accept_turn(turn, events=events)
            except BaseException:
                # The turn was not accepted, so neither was its start; events buffered before stay.
                self.bus.restore(events[: len(events) - mine])
                self.bus.submission_id = None
                raise
            self.bus.committed(events)
            if busy and if_busy == "interrupt" and self._current is not None and self._current.kind == "turn":
                self._current.signal.abort("interrupted by a new turn")
            self._jobs.append(_Job("turn", turn, output_type, fresh=True, started=not busy, thread=thread))
            self._ensure_worker()
        return turn

    def _emit_started(self, turn: TurnRecord) -> int:
        """Buffer a turn's ``turn.started`` (and a notification's text) for the next write; how many events."""
        self.bus.submission_id = turn.submission_id
        self.bus.emit("turn.started", {"submission_id": turn.submission_id, "kind": turn.kind, "run_id": turn.run_id})
        if turn.kind != "notification":
            return 1
        origin = turn.message.origin.model_dump() if turn.message.origin else None
        self.bus.emit("notification", {"text": turn.message.text, "origin": origin})
        return 2

    async def decide(self, decide: Callable[[Session], Awaitable[RunResult]]) -> RunResult:
        """Run a decision (approve, reject, resume) in mailbox order and return its result."""
        self._refuse_if_retired()
        self.touch()
        # Run by the mailbox worker, in the decider's trace context (an HTTP request, the caller's span).
        job = _Job("decision", decide=in_caller_context(decide), future=asyncio.get_running_loop().create_future())
        self._jobs.append(job)
        self._ensure_worker()
        assert job.future is not None
        try:
            result: RunResult = await job.future
        except _DrivenOn as on:
            # The decision landed (its token is spent) and a later write failed on the store: the
            # turn is back in the mailbox, first in line, and goes on from its last commit. The
            # decider waits for it to rest, as a turn's waiter does; the error it would hear
            # otherwise is about a decision that took, and a retry would only find the token used.
            return await self.turn_outcome(on.submission_id, None, self._output_type_for)
        return result

    def _output_type_for(self, path: str | None, agent: str) -> type[BaseModel] | None:
        """The output type of a turn of this session (``turn_result``'s ``output_type_for``)."""
        return self._resolve_output(path) or self.session.agent.output_type

    async def turn_outcome(
        self, submission_id: str, output_type: type[BaseModel] | None, output_type_for: OutputTypeFor
    ) -> RunResult:
        """Wait until the turn rests and return its result (``LocalHost.turn_outcome``, a decision driven on).

        The result this actor committed is held (reading the turn, its run and the session back
        would cost three statements); a failed or cancelled turn, or one another actor finished
        (or whose result a repeat already took), is read from the store, which says how it ended.
        """
        await self.wait_turn(submission_id)
        held = self.take_outcome(submission_id)
        if held is not None:
            return held
        return await turn_result(self.store, output_type_for, self.id, submission_id, output_type)

    async def compact(self) -> CompactionResult | None:
        """Compact the session's context now (``Session.compact()``), in mailbox order: never during a turn.

        A turn running or queued finishes first; a suspended run keeps its token (the summary is
        committed through it). The ``context.compacted`` event belongs to no turn.
        """
        self._refuse_if_retired()
        self.touch()
        job = _Job("compaction", future=asyncio.get_running_loop().create_future())
        self._jobs.append(job)
        self._ensure_worker()
        assert job.future is not None
        result: CompactionResult | None = await job.future
        return result

    def _refuse_if_retired(self) -> None:
        if self._retired:
            raise SessionNotFound(f"session {self.id!r} is being deleted", session_id=self.id)

    async def amend(
        self, agent_name: str | None, agent: Agent | None, metadata: dict[str, Any] | None
    ) -> SessionRecord:
        """Rebind the agent (only before the first turn) and/or replace the metadata, in the store and here.

        Under the send lock, so a turn cannot be queued between the check and the rebinding.
        Raises ``ValueError`` when the agent would change after a turn (its history was written by
        the other one).
        """
        if self._send_lock is None:
            self._send_lock = asyncio.Lock()
        async with self._send_lock:
            self._refuse_if_retired()
            if agent_name is not None and agent_name != self.record.agent:
                ran = self.busy or self.session.state is not None or bool(await self.store.list_turns(self.id))
                if ran:
                    raise ValueError(
                        f"session {self.id!r} has run agent {self.record.agent!r}; "
                        "its agent is fixed once its first turn is queued"
                    )
            record = await self.store.amend_session(self.id, agent=agent_name, metadata=metadata)
            if agent is not None:
                self.session.agent = agent
            self.record.agent, self.record.metadata = record.agent, dict(record.metadata)
            return record

    async def retire(self) -> None:
        """Refuse new work, cancel everything (the running turn first), and stop: the session is being deleted.

        Sends already past their check finish queueing first (they hold the send lock), so the
        cancel sees them.
        """
        self._retired = True
        if self._send_lock is not None:
            async with self._send_lock:
                pass
        await self.cancel()
        await self.detach()

    def _ensure_worker(self) -> None:
        if self._retired:
            return
        if self._jobs and (self._worker is None or self._worker.done()):
            self._worker = asyncio.get_running_loop().create_task(self._work(), name=f"session-{self.id}")

    async def _work(self) -> None:
        while self._jobs:
            job = self._jobs.popleft()
            self._current = job
            try:
                if job.kind == "turn":
                    await self._run_turn(job)
                elif job.kind == "compaction":
                    await self._run_compaction(job)
                else:
                    await self._run_decision(job)
            finally:
                self._current = None
                job.over.set()
                self.touch()
        if self._worker is asyncio.current_task():
            self._worker = None  # a finished task keeps its coroutine and context: let an idle actor drop them

    # -- turns --------------------------------------------------------------------------------------

    async def _run_turn(self, job: _Job) -> None:
        """Run a turn inside its ``turn`` span; a store failure hands it back to the mailbox (``_drive_again``)."""
        turn = job.turn
        assert turn is not None
        try:
            if job.redrives:
                stored = await self._stored_again(job, turn)
                if stored is None:
                    return
                turn = job.turn = stored
            # A turn left running by a previous host continues its run's trace, which the run row holds.
            resumed = not job.fresh and turn.status == "running"
            run = await self.store.load_run(turn.run_id) if resumed and tracing_on() else None
            with turn_span(self.record, turn, run):
                await self._drive_turn(job, turn)
        except Exception as exc:
            if not _store_failed(exc):
                raise
            self._drive_again(job, turn, exc)

    def _drive_again(self, job: _Job, turn: TurnRecord, cause: BaseException) -> None:
        """Hand a turn whose drive (or whose end) failed on the store, its run left open, back to the mailbox.

        First in line, and logged: an operator sees a store that keeps failing.

        The store holds the turn open (``running``, or ``queued``) and its run as last committed,
        exactly as a crash would leave them; a restarted host would drive it on from there, and
        this live one must, or nobody ever does (found by the chaos soak, issue 26: an approved
        worker run stayed ``running`` after its host's next commit met a locked SQLite, and the
        orchestrator waiting on it never ended). What the failed drive buffered never landed, so it
        is dropped: the next drive says again what it does. Waiters keep waiting for the turn.
        """
        why = f"{type(cause).__name__}: {cause}"
        _log.warning("turn %s of %s stopped with its run open (%s); driving it on", turn.submission_id, self.id, why)
        self.bus.discard()
        output_type = job.output_type or self._resolve_output(turn.output_type)  # a decision's job has none
        again = _Job("turn", turn, output_type, signal=job.signal, redrives=job.redrives + 1)
        self._jobs.appendleft(again)

    async def _stored_again(self, job: _Job, turn: TurnRecord) -> TurnRecord | None:
        """After a pause (cut short by a cancel), the turn as the store holds it; ``None`` when it is at rest.

        The store is read, not this actor's copy: the failed write may have changed the copy only.
        """
        pause = min(_REDRIVE_FIRST_S * 2 ** (job.redrives - 1), _REDRIVE_MAX_S)
        if job.signal.aborted:
            await asyncio.sleep(pause)  # cancelled already, and the store failed since: just the pause
        else:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(pause):
                    await job.signal.wait()
        stored = await self.store.load_turn(turn.submission_id)
        if stored is None or stored.status not in OPEN_TURN_STATUSES:
            # Ended, suspended or deleted meanwhile: nothing to drive or write; its waiters hear it now.
            status: TurnStatus = "cancelled" if stored is None else stored.status
            await self._finish(stored or turn, status, landed=status)
            return None
        job.started = stored.status == "running"  # its turn.started was written when it started
        if job.signal.aborted:
            # Cancelled while it waited: the run the store holds ends with the turn.
            await commit_cancelled(self.store, stored.run_id, "the turn was cancelled")
        return stored

    async def _drive_turn(self, job: _Job, turn: TurnRecord) -> None:
        if job.signal.aborted:
            await self._finish(turn, "cancelled")
            return
        for superseded in await self._suspended_turns():
            if superseded.submission_id != turn.submission_id:
                # The new run supersedes the suspended one (its token dies): its turn ends here.
                await self._finish(superseded, "cancelled")
        if job.started:
            self.bus.submission_id = turn.submission_id
        else:
            # Queued behind another turn, or resumed by a restart: its start is a write of its own,
            # before the model streams anything (readers see turn.started first): the turn's status
            # and its turn.started in one transaction, as at accept. A turn driven again after a
            # failed write knows, from its stored status, whether its turn.started is in the log.
            await self.bus.load_seq(self.store)
            mine = self._emit_started(turn)
            events = self.bus.take()
            turn.status, turn.updated_at = "running", now_ms()
            try:
                await self.store.update_turn(turn, events=events)
            except BaseException:
                # Not started, so neither is its turn.started; events buffered before go out later.
                self.bus.restore(events[: len(events) - mine])
                self.bus.submission_id = None
                raise
            self.bus.committed(events)
        status: TurnStatus
        rider = _TurnRider(self, turn)
        self.session.rider = self._rider = rider
        try:
            stored = None if job.fresh else await self.store.load_run(turn.run_id)
            if stored is None:
                thread, job.thread = job.thread, None
                result = await self.session.start(
                    None if turn.kind == "reply" else {"messages": [turn.message]},
                    run_id=turn.run_id,
                    signal=job.signal,
                    output_type=job.output_type,
                    durable_input=True,
                    thread=thread,
                    client_tools=turn.client_tools,
                )
            elif stored.status in ("running", "error"):
                result = await self.session.continue_run(turn.run_id, signal=job.signal, output_type=job.output_type)
            else:
                self.session.adopt_state(stored)
                result = RunResult.of(stored)
            status = _turn_status(result.status)
            self._outcome = (turn.submission_id, result)
        except RunCancelled:
            status = "cancelled"
        except asyncio.CancelledError:
            raise  # the host is shutting down: the turn stays 'running' and is finished on restart
        except Exception as exc:
            if _store_failed(exc):
                raise  # not the turn's outcome: the run is as last committed and is driven again
            status = "error"
            if rider.stored != "error":  # else the error commit carried the run's own account of it
                turn.error = ErrorInfo.of(exc)
                if not job.fresh:
                    self.session.rider = self._rider = None
                    if await self._fail_with_run(turn):
                        await self._finish(turn, status, landed=status)
                        return
        finally:
            self.session.rider = self._rider = None
        await self._finish(turn, status, landed=rider.stored)
        services = self.session.services
        if status == "error" and services is not None and cancels_tree(turn.error):
            # A budget with on_exceed="cancel_tree" was crossed: now that this turn has ended, the
            # tree goes (in the background: the cancel waits for this session's worker, which is us).
            services.cancel_tree(self.id)

    async def _fail_with_run(self, turn: TurnRecord) -> bool:
        """End a re-driven turn ``error`` together with its stored run when its drive failed before it began.

        Whether it did: a run still ``running`` in the store that no commit of this drive ended (a
        tool source that cannot start in this process fails the drive before its first commit).
        Returns ``False``, with nothing written, when the store's run says otherwise.
        """
        assert turn.error is not None
        error = turn.error
        ended = copied(turn, status="error", updated_at=now_ms())
        record = copied(self.record, updated_at=ended.updated_at)
        await self.bus.load_seq(self.store)
        self.bus.submission_id = turn.submission_id
        self.bus.emit("error", {"run_id": turn.run_id, "type": error.type, "message": error.message})
        events = await self.bus.stage(
            self.store, "turn.completed", _completed(ended, "error"), submission_id=turn.submission_id
        )
        try:
            run = await commit_failed(self.store, turn.run_id, error, turn=ended, session=record, events=events)
        except CommitConflict:
            run = None  # the run moved on meanwhile: the turn ends as it says
        except BaseException:
            self.bus.restore(events[:-2])  # neither the error nor the end landed; the next drive says them
            raise
        if run is None:
            self.bus.restore(events[:-1])  # the error event goes out with the turn's own end
            return False
        self.bus.committed(events)
        self.session.adopt_state(run)
        turn.status, turn.updated_at = ended.status, ended.updated_at
        self.record.updated_at = record.updated_at
        return True

    async def _run_decision(self, job: _Job) -> None:
        assert job.decide is not None and job.future is not None
        suspended = await self._suspended_turns()
        turn = suspended[-1] if suspended else None
        rider: _TurnRider | None = None
        if turn is not None:
            # The decision drives this turn now: waiting for the turn waits for it, cancelling stops it.
            job.turn = turn
            # Durably running again with the commit that records the decision (the token's
            # redemption, ``_TurnRider``): a restart after it re-drives the run through this turn,
            # one before it finds the turn suspended and its token live, as if nothing was decided.
            rider = _TurnRider(self, turn)
            self.session.rider = self._rider = rider
            self._suspended.pop(turn.submission_id, None)  # type: ignore[union-attr]
            self.bus.submission_id = turn.submission_id
        try:
            await self.bus.load_seq(self.store)  # the drive numbers its events from it
            result = await job.decide(self.session)
        except asyncio.CancelledError as exc:
            if not job.future.done():
                job.future.set_exception(exc)
            raise
        except BaseException as exc:
            driven_on = False
            try:
                if turn is not None:
                    self.session.rider = self._rider = None
                    # Before the caller hears back: the status is current.
                    driven_on = await self._settle_decided(job, turn, None if rider is None else rider.stored, exc)
            finally:
                if not job.future.done():
                    job.future.set_exception(_DrivenOn(turn.submission_id) if driven_on and turn else exc)
            return
        finally:
            self.session.rider = self._rider = None
        try:
            if turn is not None:
                await self._finish(turn, _turn_status(result.status), landed=None if rider is None else rider.stored)
        except Exception as exc:
            if not _store_failed(exc):
                raise
            assert turn is not None
            self._drive_again(job, turn, exc)  # the run is at rest; writing its turn's end is tried again
        if not job.future.done():  # a caller cancelled while it waited: the decision stands, nobody hears it
            job.future.set_result(result)

    async def _run_compaction(self, job: _Job) -> None:
        assert job.future is not None
        self.bus.submission_id = None
        try:
            await self.bus.load_seq(self.store)  # the compaction's event is numbered from it
            result = await self.session.compact()
        except asyncio.CancelledError as exc:
            if not job.future.done():
                job.future.set_exception(exc)
            raise
        except BaseException as exc:
            if not job.future.done():
                job.future.set_exception(exc)
            return
        job.future.set_result(result)

    async def _suspended_turns(self) -> list[TurnRecord]:
        if self._suspended is None:
            self._suspended = {t.submission_id: t for t in await self.store.list_turns(self.id, ["suspended"])}
        return sorted(self._suspended.values(), key=lambda t: t.seq)

    async def _settle_decided(self, job: _Job, turn: TurnRecord, landed: TurnStatus | None, exc: BaseException) -> bool:
        """Settle the turn a failed decision was driving, from its stored run; or drive that run on.

        ``landed`` is the turn status the decision's commits wrote. ``running`` means the decision
        landed (the token is spent): its run must go on, so a drive that failed on the store, or
        stopped with its run still ``running``, hands the turn back to the mailbox (``_drive_again``)
        instead of leaving a running turn that nothing drives. A decision that never landed leaves
        the turn suspended, its token live: the caller may decide again. Returns whether the turn
        was handed back (the decider then waits for it: ``decide``).
        """
        try:
            if landed == "running" and _store_failed(exc):
                self._drive_again(job, turn, exc)
                return True
            run = await self.store.load_run(turn.run_id)
            if run is None:
                return False
            self.session.adopt_state(run)
            status = _turn_status(run.status)
            if status == "running" and landed == "running":
                self._drive_again(job, turn, exc)
                return True
            await self._finish(turn, status, landed)
        except Exception as failed:
            if not _store_failed(failed):
                raise
            if landed == "running":
                self._drive_again(job, turn, failed)
                return True
            self._suspended = None  # where the turn stands is unknown here now: read again on next need
        return False

    async def _finish(self, turn: TurnRecord, status: TurnStatus, landed: TurnStatus | None = None) -> None:
        """End a turn at ``status``: its row, ``turn.completed`` and the session's time, unless a commit carried them.

        ``landed`` is the status the run's last commit already wrote with the turn (``_TurnRider``).
        """
        if landed != status:
            turn.status, turn.updated_at = status, now_ms()
            events: Sequence[SessionEvent] = ()
            if status in _TERMINAL:
                # The end and its event in one transaction: a crash between two writes left a finished
                # turn without its turn.completed, and nothing re-drives a finished turn to write it.
                events = await self.bus.stage(
                    self.store, "turn.completed", _completed(turn, status), submission_id=turn.submission_id
                )
            try:
                await self.store.update_turn(turn, events=events)
            except BaseException:
                # What was buffered before goes out with the next write; the turn.completed is made
                # again by whoever finishes this turn, so it must not go out alone.
                self.bus.restore(events[:-1])
                raise
            self.bus.committed(events)
        if self._suspended is not None:
            if status == "suspended":
                self._suspended[turn.submission_id] = turn
            else:
                self._suspended.pop(turn.submission_id, None)
        if status in _TERMINAL and landed != status:
            self.record.updated_at = turn.updated_at
            await self.store.update_session(self.record)
        if self.bus.submission_id == turn.submission_id:
            self.bus.submission_id = None
        for waiter in self._waiters.pop(turn.submission_id, []):
            if not waiter.done():
                waiter.set_result(None)

    def take_outcome(self, submission_id: str) -> RunResult | None:
        """The result of the turn finished last, if it is ``submission_id`` and ended ``done`` or ``suspended``.

        ``run_turn`` answers from it instead of reading the turn, its run and the session back.
        """
        outcome = self._outcome
        if outcome is None or outcome[0] != submission_id:
            return None
        self._outcome = None
        result = outcome[1]
        return result if result.status in ("done", "suspended") else None

    # -- waiting and control ------------------------------------------------------------------------

    async def wait_turn(self, submission_id: str) -> None:
        """Return once the turn is at rest (done, error, cancelled or suspended)."""
        while True:
            if not any(j.turn is not None and j.turn.submission_id == submission_id for j in self._jobs) and not (
                self._current is not None
                and self._current.turn is not None
                and self._current.turn.submission_id == submission_id
            ):
                return
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.setdefault(submission_id, []).append(waiter)
            await waiter

    async def cancel_turn(self, submission_id: str) -> None:
        """Cancel one turn: a queued one never runs, a running one stops, a suspended one is closed."""
        self.touch()
        for job in list(self._jobs):
            if job.turn is not None and job.turn.submission_id == submission_id:
                self._jobs.remove(job)
                await self._finish(job.turn, "cancelled")
                return
        current = self._current
        if current is not None and current.turn is not None and current.turn.submission_id == submission_id:
            await self._stop(current)
            return
        turn = await self.store.load_turn(submission_id)
        if turn is not None and turn.status == "suspended":
            await self._close_suspended(turn)

    async def cancel(self) -> None:
        """Cancel everything: queued turns, the running one, and a suspended run."""
        self.touch()
        for job in list(self._jobs):
            if job.kind == "turn" and job.turn is not None:
                self._jobs.remove(job)
                await self._finish(job.turn, "cancelled")
        current = self._current
        if current is not None and current.turn is not None:
            await self._stop(current)
        for turn in await self._suspended_turns():
            await self._close_suspended(turn)

    async def _stop(self, job: _Job) -> None:
        """Stop the running job: a turn through its signal, a decision by cancelling the run it drives."""
        if job.kind == "turn":
            job.signal.abort("cancelled")
        else:
            # A decision's drive has no signal of its own; Session.cancel() commits the run
            # cancelled (or stops its drive), and the decision settles the turn as cancelled.
            await self.session.cancel()
        await job.over.wait()

    async def _close_suspended(self, turn: TurnRecord) -> None:
        waiting = await self.store.load_run(turn.run_id)
        state = self.session.state
        if state is not None and state.run_id == turn.run_id:
            await self.session.cancel()
        else:
            await commit_cancelled(self.store, turn.run_id, "the turn was cancelled")
        if waiting is not None and waiting.status == "suspended":
            # What its calls hold elsewhere (a remote A2A task waiting for an answer) is let go too.
            await abandon_calls(self.session.agent.tools, waiting)
        await self._finish(turn, "cancelled")

    async def pending_approvals(self) -> list[SuspendReason]:
        """The live approval request of the latest run, if it waits for one."""
        state = self.session.state
        if state is None:
            return []
        run = await self.store.load_run(state.run_id)
        if run is None or run.status != "suspended" or run.suspended_on is None:
            return []
        return [run.suspended_on] if run.suspended_on.kind == "approval" else []

    async def detach(self) -> None:
        """Stop working without changing anything durable (host shutdown): turns resume on restart."""
        for job in list(self._jobs):
            if job.future is not None and not job.future.done():
                job.future.set_exception(RepertoryError("the runtime closed before this decision ran"))
        current = self._current
        if current is not None and current.future is not None and not current.future.done():
            current.future.set_exception(RepertoryError("the runtime closed while this decision ran"))
        await self.session.detach()
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)


_TURN_STATUS: dict[str, TurnStatus] = {s: s for s in ("done", "suspended", "cancelled", "error")}


def _turn_status(status: str) -> TurnStatus:
    return _TURN_STATUS.get(status, "running")
