"""``Session``: durable runs on one thread, one run at a time (the seed's session API).

Why one module past 600 lines: every way a thread's runs begin or change (start, the three
decisions, fork, compaction on demand, cancel, recovery) claims the session's one run slot and
enters the one step loop; they are one state machine over one thread head and share that plumbing.

A session starts runs, answers their suspensions (resume, approve, reject), forks its thread and
cancels. Every path ends in the same step loop (``Drive``); the static helpers do the same from
nothing but the store, for stateless callers such as HTTP handlers and crash recovery.

Token checks happen in this order: the run exists (``RunNotFound``); the token is the run's live
token, whatever its status (``InvalidResumeToken``); the suspension kind (``WrongSuspensionKind``,
which leaves the token live). The token is then consumed by the same commit that records the
decision, so of several racing redemptions exactly one proceeds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

from repertory.core.clock import Clock, SystemClock
from repertory.core.history import MessageHistory
from repertory.core.ids import new_id, now_ms
from repertory.core.memory import Memory, fold_context
from repertory.core.messages import ModelMessage, Origin
from repertory.core.result import RunResult
from repertory.core.state import RunState, ThreadState, snapshot
from repertory.core.store import SessionStore, TreeStore
from repertory.core.toolspec import ToolSpec
from repertory.errors import (
    CommitConflict,
    InvalidResumeToken,
    RevisionNotFound,
    RunCancelled,
    RunNotFound,
    RunSuspended,
    SessionBusy,
    StoreError,
    TreeSessionRun,
)
from repertory.runtime._control import commit_cancelled, pair_unanswered, supersede_open_runs
from repertory.runtime._decisions import (
    Decider,
    SessionInput,
    SuspendKinds,
    approve,
    checked_run,
    held_run,
    input_messages,
    reject,
    resume,
    stored_run,
    wake_timer,
)
from repertory.runtime._loop import CommitRider, Drive, DriveDeps
from repertory.runtime.agent import Agent
from repertory.runtime.compaction import CompactionResult
from repertory.runtime.events import Outbox
from repertory.runtime.forks import FORK_REASON, fork_point
from repertory.runtime.results import stored_result
from repertory.runtime.services import SessionServices
from repertory.runtime.signals import AbortSignal, Signal
from repertory.runtime.timekeeper import TimerArm
from repertory.tracing import DriveCause, drive_span

__all__ = ["Session", "SessionInput", "snapshot"]

USER_ORIGIN = Origin(kind="user")
_COMPACT_ATTEMPTS = 5


class Session:
    """Durable runs on one thread; every step is checkpointed to ``store``.

    ``thread_id`` continues an existing conversation (default: a fresh one). ``on_checkpoint`` is
    called after every commit with a copy of the run state; ``watch()`` offers the same as a signal.
    ``clock`` is what a tool's ``sleep()`` reads (default: the wall clock); ``timers`` makes a
    timer durable when a run sleeps (a runtime's host passes its own; a bare session has none, so
    only ``wake()`` or ``resume()`` ends its sleep).
    ``services`` is the session tree its tools reach (``ToolContext.services``): a runtime's host
    supplies it; a bare session has none, so a delegating tool (``agent_tool``) raises ``ValueError``.
    ``budget_scopes`` name the stored budgets its runs spend against (a tree's, an owner's, those
    with a ledger: ``repertory.core.budget``); the agent's own ``budget`` bounds each run besides.
    A host sets them when it activates the session and again when a budget is set (the attribute
    is read by each new drive).
    """

    def __init__(
        self,
        *,
        store: SessionStore,
        agent: Agent,
        memory: Memory | None = None,
        thread_id: str | None = None,
        on_checkpoint: Callable[[RunState], None] | None = None,
        outbox: Outbox | None = None,
        origin: Origin | None = USER_ORIGIN,
        clock: Clock | None = None,
        timers: TimerArm | None = None,
        services: SessionServices | None = None,
        budget_scopes: Sequence[str] = (),
    ) -> None:
        self.store = store
        self.budget_scopes = tuple(budget_scopes)
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.timers = timers
        self.agent = agent
        self.memory = memory
        self.thread_id = thread_id or new_id()
        self.on_checkpoint = on_checkpoint
        self.outbox = outbox
        self.detach_on_cancel = False
        self.origin = origin
        self.services = services
        self._state: RunState | None = None
        self._history: MessageHistory | None = None
        # What rides this session's commits (a session actor's turn), handed to each drive it makes.
        self.rider: CommitRider | None = None
        self._signal: Signal[RunState | None] = Signal(None)
        self._busy = False
        self._drive: Drive | None = None
        self._drive_task: asyncio.Task[Any] | None = None
        self._drive_over: asyncio.Event | None = None  # made by whoever waits for a drive to end

    # -- observation ------------------------------------------------------------------------------

    @property
    def state(self) -> RunState | None:
        """The latest run state this session holds, or ``None`` before a run started."""
        return self._state

    def adopt_state(self, run: RunState | None) -> None:
        """Take ``run``, read from the store by the caller, as ``state``, announcing nothing.

        For an owner that already read the run (an actor activating from its store row): a
        ``resume()``/``approve_tool()``/``reject_tool()`` of that run then redeems its token without
        reading the run again. ``on_checkpoint`` and ``watch()`` hear nothing: nothing was committed.
        """
        self._state = run

    def watch(self) -> Signal[RunState | None]:
        """A signal of the latest run state: ``.value``, ``.subscribe(fn)``, ``async for``."""
        return self._signal

    def drop_cached_history(self) -> bool:
        """Forget the history kept from the last run (the next run reloads it); whether one was kept.

        It frees that memory while the session stays resident: ``benchmarks.sessions`` measures an
        idle session with and without it.
        """
        kept = self._history is not None
        self._history = None
        return kept

    def _committed(self, run: RunState) -> None:
        """After each commit: the committed state becomes ``state``/``watch().value`` and is announced.

        The drive keeps mutating its own run object between commits, so what is published is a
        snapshot that shares only immutable parts (``snapshot``), at a few microseconds a commit.
        """
        snap = snapshot(run)
        self._state = snap
        if self.on_checkpoint is not None:
            self.on_checkpoint(snapshot(snap))  # the callback's own copy: it may keep or change it
        self._signal.set(snap)

    def _observe(self, run: RunState) -> None:
        """Take a stored state as the latest without announcing a checkpoint (nothing was committed)."""
        self._state = run
        self._signal.set(run)

    # -- drive plumbing ---------------------------------------------------------------------------

    def _claim(self) -> None:
        if self._busy:
            raise SessionBusy(f"session on thread {self.thread_id!r} is already driving a run")
        self._busy = True

    async def _load_history(self, head: str | None) -> MessageHistory:
        if head is None:
            return MessageHistory()
        if self._history is not None and self._history.revision_id == head:
            return self._history
        history = await self.store.load_history(head)
        if history is None:
            raise StoreError(f"thread {self.thread_id!r} points at revision {head!r}, which the store lacks")
        return history

    def _new_drive(
        self,
        run: RunState,
        history: MessageHistory,
        base: str | None,
        created_at: int,
        signal: AbortSignal | None,
        output_type: type[BaseModel] | None,
        *,
        durable_input: bool = False,
        on_commit: Callable[[RunState], None] | None = None,
        recovering: bool = False,
    ) -> Drive:
        """A drive built whole from this session's parts and the run it drives."""
        deps = DriveDeps(
            store=self.store,
            agent=self.agent,
            memory=self.memory,
            output_type=output_type or self.agent.output_type,
            outbox=self.outbox,
            on_commit=on_commit or self._committed,
            signal=signal,
            services=self.services,
            clock=self.clock,
            timers=self.timers,
            rider=self.rider,
            durable_input=durable_input,
            budget_scopes=self.budget_scopes,
        )
        return Drive(
            deps,
            run=run,
            history=history,
            base_revision_id=base,
            thread_created_at=created_at,
            detach_on_cancel=self.detach_on_cancel,
            recovering=recovering,
        )

    async def _drive_for(
        self,
        run: RunState,
        signal: AbortSignal | None,
        output_type: type[BaseModel] | None = None,
        *,
        recovering: bool = False,
    ) -> Drive:
        """A drive of a stored run, from the thread head it must still own (``recovering``: its last drive died)."""
        # Before a decision is recorded: approving with edited arguments validates them with the tool.
        await self.agent.refresh_tools()
        thread = await self.store.load_thread(run.thread_id)
        head = None if thread is None else thread.history_revision_id
        if head != run.history_revision_id:
            raise CommitConflict(
                f"run {run.run_id!r} is at revision {run.history_revision_id!r} but its thread moved to "
                f"{head!r}; it can no longer continue",
                run_id=run.run_id,
            )
        history = await self._load_history(head)
        created = now_ms() if thread is None else thread.created_at
        return self._new_drive(run, history, head, created, signal, output_type, recovering=recovering)

    async def _run(
        self, drive: Drive, first_commit: str | None = None, *, commit: bool = False, start: bool = False
    ) -> RunResult:
        """Run a claimed drive to rest inside its ``invoke_agent`` span (``repertory.tracing``)."""
        cause: DriveCause = (
            "start" if start else "recover" if not commit else "start" if first_commit is None else "decision"
        )
        with drive_span(drive.run_state, self.agent, drive.messages, cause):
            return await self._drive_to_rest(drive, first_commit, commit=commit)

    async def _drive_to_rest(self, drive: Drive, first_commit: str | None, *, commit: bool) -> RunResult:
        """Run a claimed drive to rest; keeps the history cache only when the drive ended cleanly."""
        self._drive, self._drive_task = drive, asyncio.current_task()
        self._state = drive.run_state
        ok = False
        try:
            if commit:
                try:
                    await drive.commit(redeem_token=first_commit)
                except CommitConflict:
                    if first_commit is None:
                        raise
                    if self.outbox is not None:
                        # The decision never happened: what its drive said (``approval.decided``, its
                        # checkpoint) goes nowhere, rather than out with the session's next write.
                        self.outbox.take()
                    raise InvalidResumeToken(
                        "the resume token was already used", run_id=drive.run_state.run_id
                    ) from None
            result = await drive.run()
            ok = True
            return result
        finally:
            self._history = drive.history if ok else None
            if not ok:
                stored = await self._reload_state(drive.run_state.run_id)
                if stored is not None:
                    self._observe(stored)
            self._drive, self._drive_task, self._busy = None, None, False
            over, self._drive_over = self._drive_over, None
            if over is not None:
                over.set()

    async def _reload_state(self, run_id: str) -> RunState | None:
        try:
            return await asyncio.shield(self.store.load_run(run_id))
        except (StoreError, asyncio.CancelledError):
            return None

    # -- starting runs ----------------------------------------------------------------------------

    async def start(
        self,
        input: SessionInput | None,
        *,
        run_id: str | None = None,
        signal: AbortSignal | None = None,
        output_type: type[BaseModel] | None = None,
        durable_input: bool = False,
        thread: ThreadState | None = None,
        client_tools: Sequence[ToolSpec] = (),
    ) -> RunResult:
        """Start a run on this thread from its head; returns once it is ``done`` or ``suspended``.

        ``input`` is what the run says first; ``None`` says nothing: the model answers the thread as
        it stands (a ``reply`` turn: a reply regenerated after the head was set back to a checkpoint).
        A suspended or running run on the thread is superseded first (committed ``cancelled``, its
        pending calls answered with errors, its token dead). The run row is committed before the
        first model call. Errors and an exceeded ``max_steps`` commit ``error`` and raise; an abort
        through ``signal`` commits ``cancelled`` and raises ``RunCancelled``.

        ``durable_input`` is the session actor's: its turn row already holds the input durably and
        ``run_id`` is new, so the existence check is skipped, and the input is committed with the first step, not
        before the first model call: a crash before that commit re-drives the turn from its row.
        A step that must be durable before it acts (a tool that is not idempotent or needs an
        approval, a delegation) still commits first, so only idempotent work can happen twice.

        ``thread`` is the session actor's too: this session's thread as the write that accepted the
        turn read it (``TreeStore.accept_turn``), so the head is not read a second time; ``None``
        reads it here. Once a turn is accepted only its session moves the head until the turn ends
        (an HTTP run from an earlier checkpoint refuses a busy thread, or cancels its turn first).

        ``client_tools`` are tools the caller runs itself (``RunState.client_tools``): the model
        sees them beside the agent's; a call to one suspends the run, and the value it is resumed
        with becomes the call's result. A name the agent's tools already use raises ``ValueError``.
        """
        clash = sorted({t.name for t in client_tools} & set(self.agent.tools))
        if clash:
            raise ValueError(f"client tools {clash} have the names of agent {self.agent.name!r}'s own tools")
        if thread is not None and thread.thread_id != self.thread_id:
            raise ValueError(f"thread {thread.thread_id!r} is not this session's thread {self.thread_id!r}")
        return await self._start(
            input,
            run_id=run_id,
            signal=signal,
            output_type=output_type,
            fork_of=None,
            durable_input=durable_input,
            thread=thread,
            client_tools=client_tools,
        )

    async def _start(
        self,
        input: SessionInput | None,
        *,
        run_id: str | None,
        signal: AbortSignal | None,
        output_type: type[BaseModel] | None,
        fork_of: MessageHistory | None,
        unanswered: str = "superseded: the conversation moved on before this call was answered",
        durable_input: bool = False,
        thread: ThreadState | None = None,
        client_tools: Sequence[ToolSpec] = (),
    ) -> RunResult:
        messages = [] if input is None else input_messages(input, self.origin)
        self._claim()
        try:
            # Tool sources (MCP servers) list their tools before anything is written: a server that
            # cannot start fails the start with nothing superseded.
            await self.agent.refresh_tools()
            run_id = run_id or new_id()
            if not durable_input and await self.store.load_run(run_id) is not None:
                raise CommitConflict(f"a run with id {run_id!r} already exists", run_id=run_id)
            # Read even on a session actor's turn (in the write that accepted it, when the caller
            # passes ``thread``): the head may have moved without this session (an HTTP run from an
            # earlier checkpoint rewinds it through the store), and the model must see the thread as it is.
            if thread is None:
                thread = await self.store.load_thread(self.thread_id)
            if fork_of is None and not self._nothing_open(thread):
                await supersede_open_runs(self.store, self.thread_id, memory=self.memory)
                thread = await self.store.load_thread(self.thread_id)
            base = None if thread is None else thread.history_revision_id
            history = fork_of if fork_of is not None else await self._load_history(base)
            if input is None and history.revision_id is None:
                raise ValueError("a reply (no input) answers a conversation, and this thread has none yet")
            started_at_depth = history.depth  # where a refused input puts the head back (RunState.input_depth)
            pair_unanswered(history, unanswered)
            context: list[ModelMessage] = []
            if self.memory is not None:
                # A reply (no input) recalls for what it answers: the thread's last user message.
                query = messages or [m for m in history.messages[-8:] if m.role == "user"][-1:]
                context = fold_context(await self.memory.recall(thread_id=self.thread_id, query=query))
            run = RunState(
                run_id=run_id,
                thread_id=self.thread_id,
                agent=self.agent.name,
                context=context,
                context_depth=history.depth if context else None,
                input_depth=started_at_depth,
                client_tools=list(client_tools),
            )
            history.extend(messages)
            created = now_ms() if thread is None else thread.created_at
            drive = self._new_drive(run, history, base, created, signal, output_type, durable_input=durable_input)
        except BaseException:
            self._busy = False
            self._history = None
            raise
        return await self._run(drive, commit=not durable_input, start=True)

    def _nothing_open(self, thread: ThreadState | None) -> bool:
        """True when no run of the thread can be open, so superseding (a scan of its runs) is skipped.

        That holds when the last run this session saw is finished and still owns the thread's head:
        every run commits its input before anything else, moving the head, so a run begun since
        would have moved it, and every run open before that one began was superseded when it began
        (or it was the run a decision or a recovery drove). A thread of 100,000 turns otherwise
        reads its 100,000 runs before every turn.
        """
        last = self._state
        return (
            thread is not None
            and last is not None
            and last.thread_id == self.thread_id
            and last.status in ("done", "cancelled", "error")
            and last.history_revision_id is not None
            and last.history_revision_id == thread.history_revision_id
        )

    async def fork(
        self,
        input: SessionInput,
        at_revision: str | None = None,
        *,
        run_id: str | None = None,
        signal: AbortSignal | None = None,
    ) -> RunResult:
        """Start a run on a new thread that shares this thread's history up to ``at_revision`` (default: now).

        ``at_revision`` is any revision of this thread's lineage (a run's ``history_revision_id``,
        also one read before a compaction re-added it); anything else raises ``RevisionNotFound``.
        Calls left without a result at that revision get error results in the fork ("not run in
        this fork"). Costs no copy: the new thread's head is built on the shared revisions. This
        session stays on its own thread; continue the fork with ``Session(thread_id=result.state.thread_id)``.
        """
        if self._state is None and at_revision is None:
            raise RunNotFound("this session has not started a run, so there is nothing to fork")
        thread = await self.store.load_thread(self.thread_id)
        head = None if thread is None else thread.history_revision_id
        if head is None:
            if at_revision is not None:
                raise RevisionNotFound(f"thread {self.thread_id!r} has no history, so no revision {at_revision!r}")
            raise RunNotFound(f"thread {self.thread_id!r} has no committed history to fork")
        cached = self._history if self._history is not None and self._history.revision_id == head else None
        shared = await fork_point(self.store, head, at_revision, history=cached)
        alt = Session(
            store=self.store,
            agent=self.agent,
            memory=self.memory,
            thread_id=new_id(),
            on_checkpoint=self.on_checkpoint,
            origin=self.origin,
        )
        return await alt._start(
            input, run_id=run_id, signal=signal, output_type=None, fork_of=shared, unanswered=FORK_REASON
        )

    # -- compaction -------------------------------------------------------------------------------

    async def compact(self) -> CompactionResult | None:
        """Compact this thread's context now, whatever its size; ``None`` when there is nothing to compact.

        Needs ``Agent(compaction=...)`` (its ``keep_last``, model and instructions). The summary is
        committed through the run that owns the thread's head when there is one (a suspended run,
        whose token stays live, or an ``error`` run, which ``recover()`` then continues from the
        compacted context); otherwise it is recorded as a run of its own, ``done`` with no result,
        so its usage counts like any model request. A concurrent writer makes the commit fail
        whole; the compaction then reads the thread again and retries (a few times, then
        ``CommitConflict``). While this session drives a run it raises ``SessionBusy``.
        """
        if self.agent.compaction is None:
            raise ValueError(f"agent {self.agent.name!r} has no Compaction (Agent(compaction=Compaction(...)))")
        self._claim()
        try:
            for _ in range(_COMPACT_ATTEMPTS):
                drive = await self._compaction_drive()
                if drive is None:
                    return None
                events = self.outbox
                try:
                    result = await drive.compact()
                except (CommitConflict, RunCancelled):
                    # A concurrent writer moved the head (or cancelled the run that owned it): read again.
                    self._history = None
                    if events is not None:
                        events.take()  # the failed commit's events (its context.compacted) never happened
                    continue
                self._history = drive.history
                return result
            raise CommitConflict(
                f"could not compact thread {self.thread_id!r}: it kept changing", thread_id=self.thread_id
            )
        finally:
            self._busy = False

    async def _compaction_drive(self) -> Drive | None:
        """A drive of the run owning the thread's head (or of a new compaction run), ``None`` if empty."""
        thread = await self.store.load_thread(self.thread_id)
        head = None if thread is None else thread.history_revision_id
        if thread is None or head is None:
            return None
        history = await self._load_history(head)
        owner = None
        for run in await self.store.list_runs(self.thread_id, statuses=("suspended", "error", "running"), limit=8):
            if run.history_revision_id == head:
                owner = run
                break
        if owner is not None:
            return self._new_drive(owner, history, head, thread.created_at, None, None)
        # A compaction recorded as a run of its own: ``done`` from the start, heard but never ``state``.
        run = RunState(run_id=new_id(), thread_id=self.thread_id, agent=self.agent.name, status="done")
        return self._new_drive(run, history, head, thread.created_at, None, None, on_commit=self._observe_compaction)

    def _observe_compaction(self, run: RunState) -> None:
        """A compaction run of its own committed: ``on_checkpoint`` hears it, ``state`` stays the last real run."""
        if self.on_checkpoint is not None:
            self.on_checkpoint(snapshot(run))

    # -- decisions --------------------------------------------------------------------------------

    async def _redeem(
        self,
        run_id: str,
        token: str,
        kind: SuspendKinds,
        signal: AbortSignal | None,
        decide: Decider,
    ) -> RunResult:
        """Check a token in the documented order, record the decision and drive on.

        The token is consumed by the commit that records the decision (``redeem_token``), so of
        several racing redemptions exactly one proceeds; the others get ``InvalidResumeToken``.
        """
        held = held_run(self._state, run_id, token, kind)
        run = held if held is not None else await checked_run(self.store, run_id, token, kind)
        self._claim()
        self.thread_id = run.thread_id
        try:
            try:
                drive = await self._drive_for(run, signal)
            except CommitConflict:
                # Another redemption won and moved the thread on between our read and now.
                used = f"the resume token of run {run_id!r} was already used"
                raise InvalidResumeToken(used, run_id=run_id) from None
            drive.decided(decide(drive.run_state, drive.tools))
        except BaseException:
            self._busy = False
            self._history = None
            raise
        try:
            return await self._run(drive, token, commit=True)
        except InvalidResumeToken:
            if held is not None and await self.store.load_run(run_id) is None:
                # What reading the store first would have said: the run was deleted since it was held.
                raise RunNotFound(f"no run {run_id!r}", run_id=run_id) from None
            raise

    async def resume(self, token: str, value: Any, *, signal: AbortSignal | None = None) -> RunResult:
        """Answer a ``suspend()``: ``value`` becomes a user message (a string verbatim, else JSON).

        The token of a ``timer`` is accepted too: the sleep ends early, and the call's result says
        so (with ``value`` in it); the timer itself then finds its token used and does nothing.
        """
        run = self._require_run()
        decide = resume(value, self.origin, self.clock)
        return await self._redeem(run.run_id, token, ("suspend", "timer"), signal, decide)

    async def wake(self, token: str, *, at: int | None = None, signal: AbortSignal | None = None) -> RunResult:
        """Wake a run sleeping on a timer (what the runtime does at ``wake_at``): the call's result says when.

        The token is redeemed exactly as by ``resume()``, single-use, so of a timer firing in two
        processes and a human resuming early only one proceeds; the others get ``InvalidResumeToken``.
        ``at`` is the wake time written in the result (default: the session's clock now).
        """
        run = self._require_run()
        woke = self.clock.now_ms() if at is None else at
        return await self._redeem(run.run_id, token, "timer", signal, wake_timer(woke, False))

    async def approve_tool(
        self, token: str, approval: Any = None, args: dict[str, Any] | None = None, *, signal: AbortSignal | None = None
    ) -> RunResult:
        """Approve the pending tool call: it runs exactly once, with ``ctx.approval``; ``args`` replace its own."""
        run = self._require_run()
        decided_by = None if self.origin is None else self.origin.label
        return await self._redeem(run.run_id, token, "approval", signal, approve(approval, args, decided_by))

    async def reject_tool(
        self, token: str, reason: str = "not approved", *, signal: AbortSignal | None = None
    ) -> RunResult:
        """Reject the pending tool call: it never runs; ``reason`` is the error result the model reads."""
        run = self._require_run()
        decided_by = None if self.origin is None else self.origin.label
        return await self._redeem(run.run_id, token, "approval", signal, reject(reason, decided_by))

    def _require_run(self) -> RunState:
        if self._state is None:
            raise RunNotFound("this session has not started a run")
        return self._state

    # -- cancel -----------------------------------------------------------------------------------

    async def cancel(self) -> None:
        """Commit the current run ``cancelled`` and stop its drive in this session (a no-op if finished).

        A ``start()``/``resume()`` driving it here raises ``RunCancelled``; a drive elsewhere fails
        its next commit and stops.
        """
        if self._drive is not None and self._drive_task is not None:
            self._drive.will_cancel()
            self._drive_task.cancel("cancel() was called")
            await self._drive_ended()
            return
        if self._state is None:
            return
        before = self._state.status
        run = await commit_cancelled(self.store, self._state.run_id, "the run was cancelled", self.memory)
        self._history = None
        if run is not None and run.status == "cancelled" and before != "cancelled":
            self._committed(run)  # a real commit: announce it
        elif run is not None:
            self._observe(run)

    # -- stateless helpers ------------------------------------------------------------------------

    async def detach(self) -> None:
        """Stop driving without changing the run (a host shutting down): it stays as last committed.

        The run is left ``running`` exactly as a crash would leave it, so ``recover()`` (or the
        next host start) re-drives it; nothing is committed ``cancelled``.
        """
        self.detach_on_cancel = True
        if self._drive is not None and self._drive_task is not None:
            self._drive.will_detach()
            self._drive_task.cancel("detached")
            await self._drive_ended()

    async def _drive_ended(self) -> None:
        """Wait for the drive in progress to end (unless it is the caller itself)."""
        if asyncio.current_task() is self._drive_task:
            return
        if self._drive_over is None:
            self._drive_over = asyncio.Event()
        await self._drive_over.wait()

    async def continue_run(
        self, run_id: str, *, signal: AbortSignal | None = None, output_type: type[BaseModel] | None = None
    ) -> RunResult:
        """Re-drive a stored ``running`` or ``error`` run of this thread; see ``recover``."""
        run = await self.store.load_run(run_id)
        if run is None:
            raise RunNotFound(f"no run {run_id!r}", run_id=run_id)
        if run.is_terminal:
            self._state = run
            return stored_result(run, output_type or self.agent.output_type)
        if run.status == "suspended":
            raise RunSuspended(f"run {run_id!r} is suspended and needs its resume token", run_id=run_id)
        self._claim()
        self.thread_id = run.thread_id
        try:
            drive = await self._drive_for(run, signal, output_type, recovering=True)
        except BaseException:
            self._busy = False
            raise
        return await self._run(drive)

    @classmethod
    async def recover(
        cls,
        *,
        store: SessionStore,
        agent: Agent,
        run_id: str,
        memory: Memory | None = None,
        on_checkpoint: Callable[[RunState], None] | None = None,
        signal: AbortSignal | None = None,
    ) -> RunResult:
        """Re-drive a ``running`` or ``error`` run from its last checkpoint (crash recovery).

        ``done`` and ``cancelled`` runs return their stored result without calling the model;
        a ``suspended`` run raises ``RunSuspended`` (it needs its token).
        """
        run = await bare_run(store, run_id)
        sess = cls(store=store, agent=agent, memory=memory, thread_id=run.thread_id, on_checkpoint=on_checkpoint)
        return await sess.continue_run(run_id, signal=signal)

    @classmethod
    async def resume_suspended(
        cls,
        *,
        store: SessionStore,
        agent: Agent,
        run_id: str,
        resume_token: str,
        value: Any,
        memory: Memory | None = None,
        on_checkpoint: Callable[[RunState], None] | None = None,
        signal: AbortSignal | None = None,
    ) -> RunResult:
        """``resume()`` from nothing but the store, e.g. in a stateless HTTP handler."""
        sess = cls(store=store, agent=agent, memory=memory, on_checkpoint=on_checkpoint)
        sess._state = await bare_run(store, run_id)
        return await sess.resume(resume_token, value, signal=signal)

    @classmethod
    async def approve_suspended(
        cls,
        *,
        store: SessionStore,
        agent: Agent,
        run_id: str,
        resume_token: str,
        approval: Any = None,
        args: dict[str, Any] | None = None,
        memory: Memory | None = None,
        on_checkpoint: Callable[[RunState], None] | None = None,
        signal: AbortSignal | None = None,
    ) -> RunResult:
        """``approve_tool()`` after a restart: the pending tool runs exactly once."""
        sess = cls(store=store, agent=agent, memory=memory, on_checkpoint=on_checkpoint)
        sess._state = await bare_run(store, run_id)
        return await sess.approve_tool(resume_token, approval, args, signal=signal)

    @classmethod
    async def reject_suspended(
        cls,
        *,
        store: SessionStore,
        agent: Agent,
        run_id: str,
        resume_token: str,
        reason: str = "not approved",
        memory: Memory | None = None,
        on_checkpoint: Callable[[RunState], None] | None = None,
        signal: AbortSignal | None = None,
    ) -> RunResult:
        """``reject_tool()`` after a restart: the pending tool never runs."""
        sess = cls(store=store, agent=agent, memory=memory, on_checkpoint=on_checkpoint)
        sess._state = await bare_run(store, run_id)
        return await sess.reject_tool(resume_token, reason, signal=signal)


async def bare_run(store: SessionStore, run_id: str) -> RunState:
    """The stored run a stateless ``Session`` call works on; ``TreeSessionRun`` when a session of the tree owns it.

    The bare calls write the run alone; a session's run also has a turn, events and waiters that
    only the tree's front door (a handle, the CLI, the HTTP server) keeps with it.
    """
    run = await stored_run(store, run_id)
    if isinstance(store, TreeStore) and await store.load_session(run.thread_id) is not None:
        raise TreeSessionRun(
            f"run {run_id!r} belongs to session {run.thread_id!r} of the session tree: decide or recover it "
            "through its handle (Runtime.session(...).approve/reject/resume), the CLI or the HTTP server, "
            "which end its turn with it",
            run_id=run_id,
        )
    return run
