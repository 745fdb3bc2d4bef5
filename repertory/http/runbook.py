"""Runs over HTTP: starting one (a turn, or decisions on an interrupt), waiting, cancelling, listing.

A LangGraph run is a turn's run here, so its id is the engine's run id and its status is the
turn's (``pending``, ``running``, ``interrupted``, ``success``, ``error``). A ``command.resume``
does not start a new engine run: it continues the suspended one, so the run id it answers with is
the id of the run it resumed. ``multitask_strategy`` maps onto the follow-up queue:
``enqueue`` queues behind the running turn, ``reject`` answers 409 while the thread is busy,
``interrupt`` cancels the running turn first, and ``rollback`` does the same (history is
immutable, so the interrupted run's messages stay, followed by error results for its calls).
A ``command.goto`` to ``__end__`` answers like a resume (same run id) and cancels the waiting
run instead of deciding it (``schemas.Command``).

A run from an earlier checkpoint (``checkpoint_id``, or ``checkpoint.checkpoint_id``: what
agent-chat-ui sends to edit a message or regenerate a reply) continues the *same* thread from
there, as LangGraph does: the thread's head goes back to that revision (``repertory.runtime.forks.rewind``;
nothing is deleted, the later revisions stay in the store and in any fork or run that points at
them) and the run's message starts a new branch. With no ``input`` it regenerates: the run adds no
message and answers the thread as it stands at the checkpoint (a ``reply`` turn), so the calls
answered there are never run again and only the model's reply is made afresh (a checkpoint that ends
with a final reply regenerates that reply). Re-running a turn's tools is a fork at an earlier
revision, never the default. The checkpoint must be on the thread's
lineage (404 otherwise). A thread that is busy cannot go back under ``multitask_strategy="enqueue"``
(its running run would lose its head): that answers 409, ``reject`` answers 409 as always, and
``interrupt``/``rollback`` cancel what runs first.

What the store does not keep about a run (its request metadata, the stream modes it asked for,
where its events begin, a decision still being applied) lives in an in-memory book bounded by
bytes (``ServerLimits.run_book_bytes``), not by count: each run costs the JSON length of what is
kept of its request (``metadata`` and ``kwargs``) plus ``ENTRY_OVERHEAD``, and the oldest runs are
forgotten first. A run forgotten is found again through the thread's turns, with ``{}`` for its
metadata and kwargs and its events read from the session's first (what ``GET .../runs/{run_id}``
then answers). A run whose request alone is larger than the whole budget is kept slim from the
start: its ids, stream modes, strategy, start seq and decision task, without its metadata and
kwargs, so its routes still answer (and ``interrupt`` still finds its decision in flight); a run
whose decision is still being applied is likewise slimmed, never dropped, when its turn to be
forgotten comes.
"""

from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass, field, replace
from typing import Any

import pydantic_core

from repertory.core.history import MessageHistory
from repertory.core.ids import now_ms
from repertory.core.principal import Principal
from repertory.core.tree import IfBusy, SessionRecord, TurnRecord, TurnStatus
from repertory.errors import CommitConflict, RunCancelled, SessionBusy
from repertory.http.auth import Caller
from repertory.http.convert import input_text
from repertory.http.errors import HttpError
from repertory.http.gateway import Gateway
from repertory.http.hitl import apply_decisions, parse_resume
from repertory.http.limits import DEFAULT_LIMITS
from repertory.http.schemas import RunCreate
from repertory.http.views import EMPTY_CHECKPOINT, nested_wait, run_status, run_view, thread_status, until_rest
from repertory.http.webhooks import Webhooks
from repertory.runtime import fork_point, rewind
from repertory.tree.handle import SessionHandle, TurnHandle

__all__ = ["ENTRY_OVERHEAD", "HttpRun", "RunBook"]

Dict = dict[str, Any]
_IF_BUSY: dict[str, IfBusy] = {
    "enqueue": "enqueue",
    "reject": "reject",
    "interrupt": "interrupt",
    "rollback": "interrupt",
}
ENTRY_OVERHEAD = 1024
"""Bytes one remembered run is counted for besides its request: the record, its ids and its slot."""


@dataclass(eq=False)
class HttpRun:
    """One run as this server knows it; ``start_seq`` is where its events begin in the session log."""

    run_id: str
    thread_id: str
    submission_id: str
    assistant_id: str
    start_seq: int
    modes: tuple[str, ...] = ("values",)
    metadata: Dict = field(default_factory=dict)
    multitask_strategy: str = "enqueue"
    kwargs: Dict = field(default_factory=dict)
    driver: asyncio.Task[Any] | None = None  # decisions being applied to an interrupt
    created_at: int = field(default_factory=now_ms)

    def driver_error(self) -> BaseException | None:
        """Why the decisions failed, once they have (a cancelled run is not a failure)."""
        driver = self.driver
        if driver is None or not driver.done() or driver.cancelled():
            return None
        error = driver.exception()
        return None if isinstance(error, RunCancelled) else error


def _size_of(run: HttpRun) -> int:
    """What remembering ``run`` costs: its kept request as JSON, plus ``ENTRY_OVERHEAD``."""
    try:
        kept = len(pydantic_core.to_json([run.metadata, run.kwargs], fallback=str))
    except (ValueError, RecursionError):
        return 1 << 62  # cannot be measured: counted as larger than any budget, so kept slim
    return kept + ENTRY_OVERHEAD


def _slim(run: HttpRun) -> HttpRun:
    """``run`` without its request's bulk (metadata and kwargs), as a run found through its turn has it."""
    return replace(run, metadata={}, kwargs={})


class RunBook:
    """Starts, finds, waits for and cancels runs; remembers recent ones within ``budget_bytes``."""

    def __init__(self, gateway: Gateway, budget_bytes: int = DEFAULT_LIMITS.run_book_bytes) -> None:
        if budget_bytes < 1:
            raise ValueError("run_book_bytes must be >= 1")
        self.gw = gateway
        self.budget_bytes = budget_bytes
        self._runs: collections.OrderedDict[str, HttpRun] = collections.OrderedDict()
        self._sizes: dict[str, int] = {}
        self._held = 0
        self.webhooks: Webhooks | None = None  # set by create_app: keeps the runs' ``webhook`` promises

    @property
    def held_bytes(self) -> int:
        """What the remembered runs are counted for now (at most the budget, but for slim runs still deciding)."""
        return self._held

    def _keep(self, run: HttpRun, size: int) -> None:
        self._held += size - self._sizes.get(run.run_id, 0)
        self._sizes[run.run_id] = size
        self._runs[run.run_id] = run
        self._runs.move_to_end(run.run_id)

    def _remember(self, run: HttpRun) -> None:
        size = _size_of(run)
        if size > self.budget_bytes:
            run, size = _slim(run), ENTRY_OVERHEAD  # the route answers from the store and this slim record
        self._keep(run, size)
        if self._held <= self.budget_bytes:
            return
        for run_id in list(self._runs):
            if self._held <= self.budget_bytes:
                break
            oldest = self._runs[run_id]
            if oldest.driver is not None and not oldest.driver.done():
                if self._sizes[run_id] > ENTRY_OVERHEAD:
                    # Its decision is in flight: ``driving`` must still find it, so only its bulk goes.
                    self._keep(_slim(oldest), ENTRY_OVERHEAD)
                    self._runs.move_to_end(run_id, last=False)
                continue
            del self._runs[run_id]
            self._held -= self._sizes.pop(run_id)

    def driving(self, thread_id: str) -> list[HttpRun]:
        """Runs of a thread whose decisions are still being applied."""
        return [
            r for r in self._runs.values() if r.thread_id == thread_id and r.driver is not None and not r.driver.done()
        ]

    # -- starting -----------------------------------------------------------------------------------

    async def thread_for(self, caller: Caller, thread_id: str | None, body: RunCreate) -> SessionRecord:
        """The thread a run goes to: a new one for a stateless run, created on demand with ``if_not_exists``."""
        gw = self.gw
        gw.agent(body.assistant_id)
        if thread_id is None:
            return await gw.create_thread(
                caller, thread_id=None, metadata=None, if_exists=None, agent=body.assistant_id
            )
        try:
            return await gw.record(thread_id, caller)
        except HttpError as exc:
            if exc.status != 404 or body.if_not_exists != "create":
                raise
        return await gw.create_thread(
            caller, thread_id=thread_id, metadata=None, if_exists="do_nothing", agent=body.assistant_id
        )

    async def start(
        self, caller: Caller, record: SessionRecord, body: RunCreate, start_seq: int | None = None
    ) -> HttpRun:
        """Start a run; returns once its turn is durably queued (or its decisions are under way)."""
        gw = self.gw
        principal = caller.principal
        agent = gw.agent(body.assistant_id)
        tid = record.session_id
        if body.webhook and self.webhooks is not None:
            # Refused before anything runs: a retry after a 422 must not find a run already started.
            await self.webhooks.check_promise(body.webhook)
        if body.command is None:
            record = await gw.bind(record, body.assistant_id, caller)
        if record.agent != body.assistant_id:
            raise HttpError(
                f"thread {tid!r} runs assistant {record.agent!r}, not {body.assistant_id!r} "
                "(a repertory session has one agent)",
                status=409,
            )
        wanted = body.checkpoint_revision
        head = await gw.head(tid)
        if body.command is not None and wanted is not None and wanted != head:
            raise HttpError(
                "command.resume answers the interrupt at the thread's head checkpoint, not an earlier one",
                status=409,
            )
        handle = await gw.runtime.session(tid, principal)
        seq = start_seq if start_seq is not None else await gw.store.last_event_seq(tid)
        kwargs = {
            "input": body.input,
            "command": body.command.model_dump() if body.command else None,
            "stream_mode": list(body.modes),
            "config": body.config,
            "context": body.context,
        }

        def make(run_id: str, submission_id: str) -> HttpRun:
            return HttpRun(
                run_id=run_id,
                thread_id=tid,
                submission_id=submission_id,
                assistant_id=record.agent,
                start_seq=seq,
                modes=body.modes,
                metadata=dict(body.metadata or {}),
                multitask_strategy=body.multitask_strategy,
                kwargs=kwargs,
            )

        if body.command is not None:
            status, latest = await thread_status(gw.store, record)
            # Busy waiting for a delegated child's human: the resume answers the child (through this
            # thread's handle, which accepts a descendant's token), and this thread's turn goes on.
            nested = await nested_wait(gw.store, tid) if status == "busy" else None
            if status == "busy" and nested is None and body.multitask_strategy == "reject":
                raise SessionBusy(f"thread {tid!r} is busy", session_id=tid)
            if nested is not None:
                latest, agent = nested[0], gw.agent(nested[1].agent)
            if latest is None or (nested is None and latest.status != "suspended"):
                raise HttpError("the thread has no interrupt waiting for a command", status=409)
            # A delegated child's interrupt holds this thread's turn running; the thread's own waits suspended.
            waiting: list[TurnStatus] = ["running"] if nested is not None else ["suspended"]
            turns = await gw.store.list_turns(tid, waiting)
            turn = next((t for t in turns if nested is not None or t.run_id == latest.run_id), None)
            if turn is None:
                raise HttpError("the thread has no interrupt waiting for a command", status=409)
            run = make(turn.run_id, turn.submission_id)
            if body.command.ends:
                run.driver = gw.spawn(handle.get_turn(turn.submission_id).cancel())
            else:
                decisions = parse_resume(body.command.resume, latest, agent, principal.model_dump(mode="json"))
                run.driver = gw.spawn(apply_decisions(handle, gw.store, latest.run_id, decisions))
        else:
            text = None if body.input is None else input_text(body.input)
            if_busy = _IF_BUSY[body.multitask_strategy]
            # A busy thread is set back even to its head: the turn in progress has not committed its
            # input yet (its first commit is its first step), so its head is about to move past it.
            going_back = wanted is not None and (
                text is None or wanted != head or (await thread_status(gw.store, record))[0] == "busy"
            )
            if going_back:
                assert wanted is not None
                if_busy = "enqueue"  # the thread is idle once it has gone back
                text = await self._go_back(handle, record, body, head, wanted, text)
            elif if_busy == "interrupt":
                for other in self.driving(tid):  # a decision in flight is stopped like a running turn
                    await handle.get_turn(other.submission_id).cancel()
            # No text: a regenerate, answered from the checkpoint as it stands (nothing runs twice).
            sent = await (handle.reply(if_busy=if_busy) if text is None else handle.send(text, if_busy=if_busy))
            queued = await gw.store.load_turn(sent.submission_id)
            assert queued is not None
            run = make(queued.run_id, queued.submission_id)
        self._remember(run)
        if body.webhook and self.webhooks is not None:
            await self.webhooks.promise(body.webhook, thread_id=tid, submission_id=run.submission_id, run_id=run.run_id,
                                        assistant_id=record.agent, metadata=run.metadata,
                                        wait=lambda: self.wait_rest(run))  # fmt: skip
        return run

    async def _go_back(
        self,
        handle: SessionHandle,
        record: SessionRecord,
        body: RunCreate,
        head: str | None,
        wanted: str,
        text: str | None,
    ) -> str | None:
        """Set the thread back to checkpoint ``wanted`` (see the module docstring); the text the run sends.

        ``None`` (no input: a regenerate) sends nothing: the run is a reply to the thread as it
        stands at the checkpoint.
        """
        gw, tid = self.gw, record.session_id
        status, _ = await thread_status(gw.store, record)
        if status == "busy" or self.driving(tid):
            if body.multitask_strategy == "reject":
                raise SessionBusy(f"thread {tid!r} is busy", session_id=tid)
            if body.multitask_strategy == "enqueue":
                raise HttpError(
                    f"thread {tid!r} is busy: a run from an earlier checkpoint sets the thread back, so it cannot "
                    "wait behind the run in progress; retry once the thread is idle, or use "
                    "multitask_strategy 'interrupt' or 'rollback'",
                    status=409,
                )
            for other in self.driving(tid):
                await handle.get_turn(other.submission_id).cancel()
            await handle.cancel()
            head = await gw.head(tid)
        target: str | None = None if wanted == EMPTY_CHECKPOINT else wanted
        if text is None:
            target = await self._reply_point(head, target)
        try:
            await rewind(gw.store, tid, target)
        except CommitConflict:
            raise HttpError(
                f"thread {tid!r} moved while it was set back to checkpoint {wanted!r}; retry", status=409
            ) from None
        return text

    async def _reply_point(self, head: str | None, target: str | None) -> str:
        """Where a regenerate goes back to: the checkpoint itself, or just before the final reply it ends with.

        The run then answers from there, so what the checkpoint holds (a user's message, the results
        of calls already run, approvals already given) is never done again: only the model's reply
        and what follows it are made afresh. Going further back, to run a turn's tools again, is a
        fork at an earlier revision, chosen explicitly.
        """
        if target is not None:
            history = await fork_point(self.gw.store, head, target)
            rev = history.revision(target)
            entry = None if rev is None else history.entry(rev.entry_id)
            if rev is not None and entry is not None and _asked_by_someone(history, target):
                message = entry.message
                if message.role == "assistant" and not message.tool_calls and rev.parent_id is not None:
                    return rev.parent_id  # a final reply's own checkpoint: regenerate that reply
                return target
        raise HttpError(
            "a run without input regenerates from a checkpoint, and this one has no human message at or before it",
            status=422,
        )

    # -- finding ------------------------------------------------------------------------------------

    async def locate(self, caller: Caller, thread_id: str, run_id: str) -> HttpRun:
        """A run of a thread the caller may see, from memory or from the thread's turns; 404 otherwise."""
        record = await self.gw.record(thread_id, caller)
        run = self._runs.get(run_id)
        if run is not None and run.thread_id == thread_id:
            return run
        for turn in await self.gw.store.list_turns(thread_id):
            if turn.run_id == run_id:
                found = HttpRun(
                    run_id=run_id,
                    thread_id=thread_id,
                    submission_id=turn.submission_id,
                    assistant_id=record.agent,
                    start_seq=0,
                    created_at=turn.created_at,
                )
                self._remember(found)
                return found
        raise HttpError(f"thread {thread_id!r} has no run {run_id!r}", status=404)

    async def turn(self, run: HttpRun) -> TurnRecord:
        """The run's turn as stored now."""
        turn = await self.gw.store.load_turn(run.submission_id)
        if turn is None:
            raise HttpError(f"run {run.run_id!r} has no turn", status=404)
        return turn

    async def view(self, run: HttpRun) -> Dict:
        """The run as a LangGraph ``Run`` object."""
        return run_view(await self.turn(run), run.assistant_id, run.metadata, run.multitask_strategy, run.kwargs)

    async def list(self, caller: Caller, thread_id: str, *, limit: int, offset: int, status: str | None) -> list[Dict]:
        """A thread's runs, newest first."""
        record = await self.gw.record(thread_id, caller)
        turns = list(reversed(await self.gw.store.list_turns(thread_id)))
        if status is not None:
            turns = [t for t in turns if run_status(t.status) == status]
        out = []
        for turn in turns[offset : offset + limit]:
            known = self._runs.get(turn.run_id)
            if known is not None:
                out.append(run_view(turn, known.assistant_id, known.metadata, known.multitask_strategy, known.kwargs))
            else:
                out.append(run_view(turn, record.agent))
        return out

    # -- waiting and cancelling ---------------------------------------------------------------------

    async def wait_rest(self, run: HttpRun) -> None:
        """Return once the run is at rest: done, failed, cancelled, or waiting for a human.

        Cancelling the caller never cancels the run (a client that stops waiting is not a cancel).
        """
        if run.driver is not None:
            await asyncio.wait({run.driver})
        # A turn waiting in a delegation for a child's human is at rest too (``until_rest``).
        await until_rest(
            self.gw.store, run.thread_id, TurnHandle(self.gw.runtime, run.thread_id, run.submission_id).wait()
        )

    async def outcome(self, run: HttpRun) -> Dict:
        """What ``/wait`` and ``/join`` answer: the thread's values, or ``{"__error__": ...}`` if the run failed."""
        error = run.driver_error()
        if isinstance(error, HttpError):
            raise error
        if error is not None:
            return {"__error__": {"error": type(error).__name__, "message": str(error)}}
        turn = await self.turn(run)
        if turn.status == "error":
            info = turn.error
            return {"__error__": {"error": info.type if info else "Error", "message": info.message if info else ""}}
        record = await self.gw.store.load_session(run.thread_id)
        if record is None:
            raise HttpError(f"thread {run.thread_id!r} was deleted", status=404)
        return self.gw.values(await self.gw.snapshot(record))

    async def cancel(self, principal: Principal, run: HttpRun, *, wait: bool) -> None:
        """Cancel the run: queued, it never runs; running or deciding, it stops; interrupted, it is closed."""
        handle = await self.gw.runtime.session(run.thread_id, principal)
        await handle.get_turn(run.submission_id).cancel()
        if wait:
            await self.wait_rest(run)


def _asked_by_someone(history: MessageHistory, revision_id: str) -> bool:
    """Whether a human message lies at or before ``revision_id`` (something a reply would answer)."""
    current: str | None = revision_id
    while current is not None:
        rev = history.revision(current)
        entry = None if rev is None else history.entry(rev.entry_id)
        if rev is None or entry is None:
            return False
        if entry.message.role == "user" and not entry.message.boundary and entry.message.text:
            return True
        current = rev.parent_id
    return False
