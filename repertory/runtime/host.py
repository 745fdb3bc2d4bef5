"""``LocalHost``: session actors hosted in this process (the ``backend="local"`` runtime).

Actors are virtual (Orleans-style): activated from the store on first use, passivated after
``idle_timeout`` seconds with nothing to do and nobody watching. A million suspended sessions are
a million rows, not a million objects. On start the host finishes every turn a previous process
left ``queued`` or ``running``; on close it detaches (runs stay as last committed, as after a
crash) instead of cancelling anything.

Time: when the store keeps time (every built-in store does, ``TimedStore``), the host runs one
``TimeKeeper`` task that wakes the timers and fires the schedules of the sessions it owns; timers
are armed by its actors' drives through ``_TimerRows``, and an overdue timer fires at start.

``LocalHost`` is the reference implementation of ``SessionBackend`` (``repertory.runtime.backend``,
the one written statement of what a backend does) and declares it: it subclasses the protocol, so
mypy checks each method against the protocol's signature here, where it is written, and a method
the host lacked would make it abstract. A Ray ``SessionHost`` runs one of these in its process.

Why one module past 600 lines: it is that protocol's one implementation, each operation a few lines
that find (or activate) the actor of a session and hand it on; what those operations lean on lives
beside it (the actors in ``actor``, timers and schedules in ``timekeeper``, cross-process decisions
in ``inbox_keeper``), and splitting the operations apart would scatter one written contract.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, assert_never

from pydantic import BaseModel, JsonValue

from repertory.core.budget import BudgetStore, budget_scopes
from repertory.core.clock import Clock, SystemClock
from repertory.core.decisions import Approve, Decision, Reject, Resume
from repertory.core.ids import new_id, now_ms
from repertory.core.inbox import DecisionInbox
from repertory.core.memory import MemoryFactory
from repertory.core.messages import ModelMessage
from repertory.core.principal import Principal
from repertory.core.result import RunResult
from repertory.core.state import SuspendReason
from repertory.core.store import DeletedRows, TreeStore
from repertory.core.timing import (
    FiringWebhook,
    ScheduleRecord,
    TimedStore,
    TimerRecord,
    WebhookRecord,
    firing_session,
    firing_submission_id,
    firing_webhook_id,
    is_own_firing_session,
)
from repertory.core.toolspec import ToolSpec
from repertory.core.tree import (
    IfBusy,
    NewSession,
    SessionEvent,
    SessionMetadata,
    SessionRecord,
    TurnKind,
    TurnRecord,
)
from repertory.errors import CommitConflict, RepertoryError, SessionExists, SessionNotFound, StoreError
from repertory.runtime.actor import SessionActor, type_path
from repertory.runtime.agent import Agent
from repertory.runtime.backend import SessionBackend, Submission
from repertory.runtime.compaction import CompactionResult
from repertory.runtime.inbox_keeper import InboxKeeper
from repertory.runtime.services import SessionServices
from repertory.runtime.session import Session
from repertory.runtime.timekeeper import TimeKeeper, log

__all__ = ["LocalHost", "lookup_agent", "resolve_output_type"]

_log = logging.getLogger(__name__)


def lookup_agent(agents: dict[str, Agent], name: str) -> Agent:
    """The agent registered as ``name``; a clear error naming the registered ones otherwise."""
    try:
        return agents[name]
    except KeyError:
        known = ", ".join(sorted(agents)) or "none"
        raise RepertoryError(f"no agent named {name!r} is registered (registered: {known})") from None


def resolve_output_type(path: str | None) -> type[BaseModel] | None:
    """Import ``module:qualname`` back into a pydantic model class (``None`` if it is not importable)."""
    if path is None:
        return None
    module, _, qualname = path.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return None  # defined inside a function: the reply is kept, unvalidated, after a restart
    return obj if isinstance(obj, type) and issubclass(obj, BaseModel) else None


def _resolve_output(known: dict[str, type[BaseModel]], path: str | None) -> type[BaseModel] | None:
    """An output type registered in this process by its path, else imported (``resolve_output_type``)."""
    if path is None:
        return None
    return known.get(path) or resolve_output_type(path)


class _TimerRows:
    """The ``TimerArm`` every actor of a host shares: writes a timer's row, then nudges the scheduler.

    Its own small object rather than the host, so actors hold no reference back to their host.
    """

    def __init__(self, store: TreeStore, keeper: TimeKeeper | None) -> None:
        self.store = store
        self.keeper = keeper

    async def arm(self, run_id: str, session_id: str, token: str, wake_at: int) -> None:
        """Persist the timer (before the suspension commits) and tell the scheduler."""
        if not isinstance(self.store, TimedStore):
            raise StoreError(f"{type(self.store).__name__} keeps no timers (a TimeStore), so sleep() cannot wait")
        await self.store.arm_timer(
            TimerRecord(run_id=run_id, session_id=session_id, token=token, wake_at=wake_at, due_at=wake_at)
        )
        if self.keeper is not None:
            self.keeper.nudge(wake_at)


class _Abandoned(Exception):
    """The caller that was activating a session was cancelled before it finished."""


class LocalHost(SessionBackend):
    """Owns the ``SessionActor``s of this process: the local ``SessionBackend``, and its reference implementation."""

    def __init__(
        self,
        store: TreeStore,
        agents: dict[str, Agent],
        *,
        idle_timeout: float = 300.0,
        memory: MemoryFactory | None = None,
        clock: Clock | None = None,
        poll_interval: float = 5.0,
        dedicated: bool = False,
    ) -> None:
        if idle_timeout <= 0:
            raise ValueError("idle_timeout must be > 0 seconds")
        self.store = store
        # Whether sessions placed "dedicated" may be created here: a backend that gives each such
        # session a process of its own builds its hosts with it; in one process there is none to give.
        self.dedicated = dedicated
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.timekeeper: TimeKeeper | None = None
        if isinstance(store, TimedStore):
            self.timekeeper = TimeKeeper(
                store, self.clock, wake=self._wake_timer, fire=self._fire_schedule, poll_interval=poll_interval
            )
        self._timer_rows = _TimerRows(store, self.timekeeper)
        # Decisions taken in other processes for the sessions this host drives (repertory.core.inbox).
        self.inbox: InboxKeeper | None = None
        if isinstance(store, DecisionInbox):
            self.inbox = InboxKeeper(store, host_id=new_id(), decide=self.decide)
        self.memory = memory
        self._agents = dict(agents)
        self.idle_timeout = idle_timeout
        self._actors: dict[str, SessionActor] = {}
        self._activating: dict[str, asyncio.Future[SessionActor]] = {}
        self._output_types: dict[str, type[BaseModel]] = {}
        # One resolver shared by every actor (a bound method each was an object per session); over
        # the dict, not the host, so it makes no reference cycle that would outlive close().
        self._resolve = functools.partial(_resolve_output, self._output_types)
        self._reaper: asyncio.Task[None] | None = None
        self._listeners: dict[str, list[Callable[[SessionEvent], None]]] = {}
        self._retiring: set[str] = set()  # sessions being deleted: never activated again
        self.activations = 0
        # The session tree its sessions' tools reach (agent_tool): set by whoever builds the host
        # (repertory.tree.local, a Ray SessionHost) before ``start``, which may re-drive delegations.
        self.services: SessionServices | None = None

    @property
    def agents(self) -> dict[str, Agent]:
        """The agents this host runs, by name: the live mapping (a Ray host registers more into it)."""
        return self._agents

    # -- lifecycle ----------------------------------------------------------------------------------

    async def start(self, owns: Callable[[str], bool] | None = None, *, recover: bool = True) -> None:
        """Finish what a previous process left open, then start passivating idle actors.

        ``owns`` limits recovery to the sessions placed on this host (several hosts share a store).
        ``recover=False`` neither re-drives open turns nor runs the timer scheduler: a process that
        reads beside the process that runs the fleet must not drive the turns that process is
        running, which would then run in two places at once (and it decides nothing for sessions
        that process holds: a session is driven by one process at a time).
        """
        if not recover:
            self._reaper = asyncio.get_running_loop().create_task(self._reap(), name="repertory-passivation")
            return
        by_session: dict[str, list[TurnRecord]] = {}
        for turn in await self.store.list_open_turns():
            if owns is not None and not owns(turn.session_id):
                continue
            by_session.setdefault(turn.session_id, []).append(turn)
        for session_id, turns in by_session.items():
            record = await self.store.load_session(session_id)
            if record is not None and record.agent not in self.agents:
                # Served elsewhere, or no more (an eval's variant): its turns wait for a runtime
                # that has the agent, instead of failing this start for every other session.
                _log.warning(
                    "session %s has %d open turn(s) for agent %r, which is not served here; left open",
                    session_id,
                    len(turns),
                    record.agent,
                )
                continue
            actor = await self.actor(session_id)
            actor.resume_open_turns(turns)
        self._reaper = asyncio.get_running_loop().create_task(self._reap(), name="repertory-passivation")
        if self.timekeeper is not None:
            self.timekeeper.start(owns)
        if self.inbox is not None:
            self.inbox.start(owns)

    async def close(self) -> None:
        """Stop every actor without touching durable state; open turns resume on the next start."""
        if self.timekeeper is not None:
            await self.timekeeper.close()
        if self.inbox is not None:
            await self.inbox.close()
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        await asyncio.gather(*(a.detach() for a in self._actors.values()), return_exceptions=True)
        self._actors.clear()
        # The agents' tool sources (MCP connections, started on first use) close with the host.
        unique = {id(a): a for a in self.agents.values()}.values()
        await asyncio.gather(*(a.aclose() for a in unique), return_exceptions=True)

    async def _reap(self) -> None:
        interval = min(self.idle_timeout / 2, 30.0)
        while True:
            await asyncio.sleep(interval)
            self.passivate_idle(self.idle_timeout)

    def passivate_idle(self, older_than: float) -> int:
        """Drop actors idle for ``older_than`` seconds; they come back from the store on next use."""
        cutoff = time.monotonic() - older_than
        gone = [sid for sid, a in self._actors.items() if a.idle and a.last_active <= cutoff]
        for sid in gone:
            del self._actors[sid]
            if not self._listeners.get(sid):
                self._listeners.pop(sid, None)
        return len(gone)

    @property
    def resident(self) -> int:
        """How many actors are in memory now."""
        return len(self._actors)

    # -- activation ---------------------------------------------------------------------------------

    def agent(self, name: str) -> Agent:
        """The registered agent called ``name``."""
        return lookup_agent(self.agents, name)

    async def actor(self, session_id: str) -> SessionActor:
        """The live actor of a session, activated from the store if needed.

        Concurrent first calls for one session share one activation; activations of different
        sessions run side by side (a host-wide lock made 10,000 first turns queue one by one).
        """
        while True:
            if session_id in self._retiring:
                raise SessionNotFound(f"session {session_id!r} is being deleted", session_id=session_id)
            actor = self._actors.get(session_id)
            if actor is not None:
                return actor
            pending = self._activating.get(session_id)
            if pending is None:
                return await self._activate_here(session_id)
            try:
                return await asyncio.shield(pending)  # a waiter cancelled here leaves the activation alone
            except _Abandoned:
                continue  # the caller activating it was cancelled first: activate it ourselves

    async def _activate_here(self, session_id: str) -> SessionActor:
        """Activate in the caller's own task (no task of its own: ~20 us and a dozen objects less).

        Callers that arrive meanwhile wait on ``done``; if this caller is cancelled half-way, they
        are told so (``_Abandoned``) and one of them starts again.
        """
        done: asyncio.Future[SessionActor] = asyncio.get_running_loop().create_future()
        self._activating[session_id] = done
        try:
            actor = await self._activate(session_id)
        except BaseException as exc:
            done.set_exception(exc if isinstance(exc, Exception) else _Abandoned())
            done.exception()  # retrieved: with no waiter, an unread error would be logged
            raise
        finally:
            del self._activating[session_id]
        done.set_result(actor)
        return actor

    async def _activate(self, session_id: str) -> SessionActor:
        record = await self.store.load_session(session_id)
        if record is None:
            raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
        latest = await self.store.list_runs(session_id, limit=1)
        ledgered = await self._ledgered(record)
        actor = SessionActor(
            store=self.store,
            agent=self.agent(record.agent),
            record=record,
            last_seq=None,  # read when the actor first writes an event (EventBus.load_seq)
            last_run=latest[0] if latest else None,
            resolve_output=self._resolve,
            listeners=self._listeners.setdefault(session_id, []),
            memory=None if self.memory is None else self.memory(record, self.store),
            clock=self.clock,
            timers=self._timer_rows,
            services=self.services,
            ledgered=ledgered,
        )
        self._actors[session_id] = actor
        self.activations += 1
        return actor

    async def _ledgered(self, record: SessionRecord) -> tuple[str, ...]:
        """The budget scopes of ``record`` that have a ledger (one read per activation, none per turn)."""
        if not isinstance(self.store, BudgetStore):
            return ()
        return tuple(await self.store.load_ledgers(budget_scopes(record)))

    async def budget_set(self, scope: str) -> None:
        """A budget of ``scope`` was set or removed: the live sessions it covers see it from their next turn."""
        for actor in list(self._actors.values()):
            if scope in budget_scopes(actor.record):
                actor.session.budget_scopes = await self._ledgered(actor.record)

    # -- the SessionBackend operations (repertory.runtime.backend) ----------------------------------

    async def create_session(self, spec: NewSession) -> SessionRecord:
        """Persist a new session (and its thread, at ``spec.head`` for a fork).

        An id that is already a session's (or a thread's) raises ``SessionExists`` and creates nothing;
        ``placement="dedicated"`` on a host built without ``dedicated`` is a ``ValueError``, before anything is written.
        """
        if spec.placement == "dedicated" and not self.dedicated:
            raise ValueError("placement='dedicated' needs a backend that gives a session a process of its own")
        self.agent(spec.agent)
        record = spec.record(now_ms())
        try:
            await self.store.create_session(record, head=spec.head)
        except CommitConflict as exc:  # a store's only conflict on a creation: the id is taken
            raise SessionExists(
                f"a session or thread with id {spec.session_id!r} already exists", session_id=spec.session_id
            ) from exc
        return record

    async def create_sessions(self, specs: list[NewSession]) -> list[SessionRecord]:
        """Persist many new sessions, in order (the first taken id raises ``SessionExists``)."""
        return [await self.create_session(spec) for spec in specs]

    async def amend_session(
        self, session_id: str, *, agent: str | None = None, metadata: dict[str, JsonValue] | None = None
    ) -> SessionRecord:
        """Rebind the session's agent (only before its first turn) and/or replace its metadata."""
        resolved = None if agent is None else self.agent(agent)
        actor = await self.actor(session_id)  # the check and the write happen under its send lock
        return await actor.amend(agent, resolved, metadata)

    async def retire(self, session_ids: list[str]) -> None:
        """Stop these sessions for good before they are deleted: no activation from now on, work cancelled.

        In order (a parent before the children it may be waiting for, so a cancelled child cannot
        wake a parent that is about to stop too). Safe to repeat; ``release`` forgets the marks.
        """
        self._retiring.update(session_ids)
        for session_id in session_ids:
            pending = self._activating.get(session_id)
            if pending is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(pending)  # an activation under way lands first, then stops
            actor = self._actors.pop(session_id, None)
            if actor is not None:
                await actor.retire()

    def release(self, session_ids: list[str]) -> None:
        """Forget the marks ``retire`` left (their rows are gone, so an activation finds nothing anyway)."""
        self._retiring.difference_update(session_ids)

    async def delete_sessions(self, session_ids: list[str]) -> DeletedRows:
        """Retire the sessions, then delete them from the store in one transaction (``TreeStore.delete_sessions``)."""
        ids = list(dict.fromkeys(session_ids))
        try:
            await self.retire(ids)
            return await self.store.delete_sessions(ids)
        finally:
            self.release(ids)

    async def send_many(self, batch: list[Submission]) -> list[TurnRecord]:
        """Queue ``(session_id, message, kind, submission_id)`` turns, each enqueued behind any running one."""
        return [await self.send(sid, msg, kind, "enqueue", None, sub) for sid, msg, kind, sub in batch]

    async def send(
        self,
        session_id: str,
        message: ModelMessage,
        kind: TurnKind,
        if_busy: IfBusy,
        output_type: type[BaseModel] | None,
        submission_id: str | None = None,
        client_tools: Sequence[ToolSpec] = (),
    ) -> TurnRecord:
        """Queue a turn on a session."""
        if output_type is not None:
            path = type_path(output_type)
            assert path is not None
            self._output_types[path] = output_type
        actor = await self.actor(session_id)
        return await actor.send(message, kind, if_busy, output_type, submission_id, client_tools)

    async def metadata(self, session_id: str) -> SessionMetadata:
        """Title, model, live status, cwd and times."""
        actor = await self.actor(session_id)
        record = actor.record
        return SessionMetadata(
            title=record.title,
            model=record.model,
            status=actor.status(),
            cwd=record.cwd,
            created_at=record.created_at,
            updated_at=record.updated_at,
        )

    async def events(self, session_id: str, after_seq: int = 0) -> AsyncIterator[SessionEvent]:
        """Stored events after ``after_seq``, then live ones, until the caller stops."""
        actor = await self.actor(session_id)
        queue = actor.bus.subscribe()
        try:
            last = after_seq
            for event in await self.store.load_events(session_id, after_seq):
                last = event.seq or last
                yield event
            while True:
                event = await queue.get()
                if event.seq is None:
                    yield event
                elif event.seq > last:
                    last = event.seq
                    yield event
        finally:
            actor.bus.unsubscribe(queue)
            actor.touch()

    def listen(self, session_id: str, listener: Callable[[SessionEvent], None]) -> Callable[[], None]:
        """Call ``listener`` with every event of the session from now on; returns the remover.

        Synchronous on purpose: the listener is in place before the caller's next line runs,
        whether or not the session is in memory (an actor activated later picks it up).
        """
        listeners = self._listeners.setdefault(session_id, [])
        listeners.append(listener)

        def remove() -> None:
            if listener in listeners:
                listeners.remove(listener)
            if not listeners and self._listeners.get(session_id) is listeners and session_id not in self._actors:
                del self._listeners[session_id]

        return remove

    def output_type_for(self, path: str | None, agent: str) -> type[BaseModel] | None:
        """The output type a turn asked for, else its agent's ``output_type``."""
        return self._resolve(path) or self.agent(agent).output_type

    async def wait_turn(self, session_id: str, submission_id: str) -> None:
        """Return once the turn is at rest."""
        actor = await self.actor(session_id)
        await actor.wait_turn(submission_id)

    async def cancel_turn(self, session_id: str, submission_id: str) -> None:
        """Cancel one turn."""
        actor = await self.actor(session_id)
        await actor.cancel_turn(submission_id)

    async def cancel(self, session_id: str) -> None:
        """Cancel every turn of a session and its suspended run."""
        actor = await self.actor(session_id)
        await actor.cancel()

    async def pending_approvals(self, session_id: str) -> list[SuspendReason]:
        """The live approval request of the session, if any."""
        actor = await self.actor(session_id)
        return await actor.pending_approvals()

    async def recover(self, session_id: str) -> list[str]:
        """Queue the session's open turns on its actor (``SessionBackend.recover``)."""
        turns = await self.store.list_turns(session_id, ("queued", "running"))
        if not turns:
            return []
        actor = await self.actor(session_id)
        actor.resume_open_turns(turns)
        return [t.submission_id for t in turns]

    async def compact(self, session_id: str) -> CompactionResult | None:
        """Compact the session's context now, in its mailbox order (``SessionHandle.compact()``)."""
        actor = await self.actor(session_id)
        return await actor.compact()

    async def run_turn(
        self,
        session_id: str,
        message: ModelMessage,
        kind: TurnKind,
        output_type: type[BaseModel] | None,
        submission_id: str | None = None,
    ) -> RunResult:
        """Queue a turn behind any running one, wait until it rests, and return its result (``handle.run()``).

        ``submission_id`` makes the call safe to repeat (a Ray host retried by its client): a
        repeat finds the turn queued already and returns its result.
        """
        turn = await self.send(session_id, message, kind, "enqueue", output_type, submission_id)
        return await self.turn_outcome(session_id, turn.submission_id, output_type)

    async def turn_outcome(self, session_id: str, submission_id: str, output_type: type[BaseModel] | None) -> RunResult:
        """Wait until the turn rests and return its result (``SessionActor.turn_outcome``)."""
        actor = await self.actor(session_id)
        return await actor.turn_outcome(submission_id, output_type, self.output_type_for)

    async def decide(self, session_id: str, decision: Decision, principal: Principal) -> RunResult:
        """Approve, reject or resume the session's suspended run, in mailbox order."""
        actor = await self.actor(session_id)

        async def run(session: Session) -> RunResult:
            session.origin = principal.origin  # a resume value is said by the deciding principal
            match decision:
                case Approve():
                    return await session.approve_tool(decision.token, decision.approval, decision.args)
                case Reject():
                    return await session.reject_tool(decision.token, decision.reason)
                case Resume():
                    return await session.resume(decision.token, decision.value)
                case _:
                    assert_never(decision)

        return await actor.decide(run)

    # -- time ---------------------------------------------------------------------------------------

    def nudge_timers(self, session_id: str | None) -> None:
        """A timer or schedule of ``session_id`` (``None``: of no session) changed: the scheduler looks again now."""
        if self.timekeeper is not None:
            self.timekeeper.nudge()

    async def _wake_timer(self, timer: TimerRecord, now: int) -> None:
        """Redeem a due timer's token in the session's mailbox, as a human resume would be."""
        actor = await self.actor(timer.session_id)
        await actor.decide(functools.partial(_wake, timer.token, now))

    async def _fire_schedule(self, schedule: ScheduleRecord, fire_at: int) -> None:
        """Queue a firing's turn under its derived submission id (a second attempt finds it queued).

        A stateless firing's session is made here under the firing's id; one found there already is
        used only if this schedule made it (``is_own_firing_session``), else the firing is refused
        and logged: its message and reply never land in a session someone else made.
        """
        submission_id = firing_submission_id(schedule.schedule_id, fire_at)
        session_id = schedule.session_id
        if session_id is None:  # each firing on a session of its own, whose id is the firing's
            spec = firing_session(schedule, fire_at)
            session_id = spec.session_id
            try:
                await self.create_session(spec)
            except SessionExists:
                found = await self.store.load_session(session_id)
                if found is None or not is_own_firing_session(found, schedule):
                    log.warning("schedule %s fires into session %s, which it did not create: this firing is "
                                "refused", schedule.schedule_id, session_id)  # fmt: skip
                    return
        try:
            await self.send(session_id, schedule.message, schedule.kind, "enqueue", None, submission_id)
        except SessionNotFound:
            log.warning("schedule %s names session %s, which is gone; the schedule is removed", schedule.schedule_id,
                        session_id)  # fmt: skip
            assert isinstance(self.store, TimedStore)
            await self.store.delete_schedule(schedule.schedule_id)
            return
        except CommitConflict:
            pass  # another host queued this firing's turn at the same moment: it runs there, once
        if schedule.webhook is not None:
            await self._promise_webhook(
                schedule.webhook, firing_webhook_id(schedule.schedule_id, fire_at), submission_id
            )

    async def _promise_webhook(self, webhook: FiringWebhook, delivery_id: str, submission_id: str) -> None:
        """A firing's completion webhook row, for the HTTP server to deliver; written once (its id is the firing's).

        Written before the schedule moves on, so a firing tried again after a crash here finds its
        turn queued and writes the row it may not have written; a second write is a no-op.
        """
        assert isinstance(self.store, TimedStore)
        turn = await self.store.load_turn(submission_id)
        if turn is None:
            return  # deleted since it was queued: no run to report
        record = WebhookRecord(
            delivery_id=delivery_id,
            session_id=turn.session_id,
            submission_id=submission_id,
            run_id=turn.run_id,
            url=webhook.url,
            metadata=dict(webhook.metadata),
        )
        with contextlib.suppress(CommitConflict):
            await self.store.add_webhook(record)


async def _wake(token: str, at: int, session: Session) -> RunResult:
    return await session.wake(token, at=at)
