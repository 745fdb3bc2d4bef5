"""The step loop: one drive of one run, from its committed state to done, suspended, error or cancelled.

There is one loop and no second engine for recovery: a fresh start, a resume, a decision and a
crash recovery all enter the same ``Drive.run()``. It first settles the calls of the last
assistant message that have no result (after a crash some may have started: only idempotent tools
run again, others get "outcome unknown"), then asks the model, step after step, committing a
checkpoint after every step.

The model sees the thread's context (``MessageHistory.context_messages()``: from the latest
compaction summary on), which the drive keeps in memory beside the history; with
``Agent(compaction=...)`` each request is first fitted to the budget (``_compact``).

The drive owns the run and its history while it runs, and is the only one that changes them. Its
helpers decide from values and return what they decided: ``_settle`` a call plan for the
unanswered calls, ``_compact`` a summary to insert, ``guardrails`` a verdict, ``_decisions`` what
a human decided; the drive applies each (appends, records, commits, emits). Why one module past
600 lines: applying those is the step loop itself, one state machine over one run and its commits;
what can be decided without the run's state lives in those helpers.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from repertory.core.clock import Clock, SystemClock
from repertory.core.history import MessageHistory
from repertory.core.ids import new_id, now_ms
from repertory.core.memory import Memory
from repertory.core.messages import ModelMessage, Origin, TextPart, ToolResultPart
from repertory.core.model import (
    CallCanceller,
    ModelCall,
    ModelResponse,
    ModelSettings,
    ReasoningDelta,
    StreamRestart,
    TextDelta,
    TokenCounter,
)
from repertory.core.result import RunResult
from repertory.core.state import (
    SCHEMA_VERSION,
    ErrorInfo,
    ModelCallRecord,
    RunState,
    ThreadState,
    detached,
)
from repertory.core.store import SessionStore
from repertory.core.tree import SessionRecord, TurnRecord
from repertory.core.trusted import share_fields_sets, trusted
from repertory.errors import (
    BudgetExceeded,
    CommitConflict,
    ModelError,
    OutputValidationError,
    RunCancelled,
    StepBudgetExceeded,
    StoreError,
)
from repertory.runtime._calls import CallOutcome, error_result, run_calls, tool_message, unanswered_calls
from repertory.runtime._compact import MAX_PASSES, plan_compaction
from repertory.runtime._decisions import Decided
from repertory.runtime._settle import (
    CallJob,
    approval_record,
    new_delegations,
    plan_calls,
    queue_pending,
    settle_outcomes,
    suspension,
)
from repertory.runtime.agent import Agent
from repertory.runtime.budgets import RUN_SCOPE, BudgetGate
from repertory.runtime.compaction import CompactionResult, estimate_tokens, message_tokens
from repertory.runtime.deltas import RETRACTED, Batch, ReplyDeltas
from repertory.runtime.events import Outbox
from repertory.runtime.guardrails import GuardrailContext, GuardrailStage, check_guardrails, run_input
from repertory.runtime.output import parse_output
from repertory.runtime.services import SessionServices
from repertory.runtime.signals import AbortSignal
from repertory.runtime.timekeeper import TimerArm
from repertory.runtime.tools import Tool, ToolContext
from repertory.tracing import chat_span

__all__ = ["CommitRider", "Drive", "DriveDeps", "OUTPUT_RETRIES", "Riding", "parse_output"]  # parse_output: see .output

MODEL_ORIGIN = Origin(kind="model")
FEEDBACK_ORIGIN = Origin(kind="system", id="output-validation")
SYSTEM_ORIGIN = Origin(kind="system")
OUTPUT_RETRIES = 2
_SYSTEM_CLOCK = SystemClock()


@dataclass(slots=True)
class Riding:
    """What a checkpoint carries beside the run: the turn's and the session's rows, events after the checkpoint's."""

    turn: TurnRecord | None = None
    session: SessionRecord | None = None
    events: Sequence[tuple[str, dict[str, Any]]] = ()


class CommitRider(Protocol):
    """The bookkeeping that rides a drive's commits (the session actor's turn), so it costs no commit of its own.

    ``ride`` is asked before every commit with the run as it is about to be written and says
    what goes with it (``None``: nothing); ``landed`` hears that exactly that was committed. A
    commit that fails never calls ``landed``, so the next commit is asked again.
    """

    def ride(self, run: RunState) -> Riding | None:
        """What the commit of ``run`` carries besides."""

    def landed(self, riding: Riding) -> None:
        """The commit carrying ``riding`` is durable."""


_CANCELLING: set[asyncio.Task[None]] = set()
"""Cancellations of server-side model calls under way (held so they are not collected mid-way)."""
_log = logging.getLogger("repertory.runtime")


def _cancelled_call(task: asyncio.Task[None]) -> None:
    _CANCELLING.discard(task)
    if not task.cancelled() and task.exception() is not None:
        _log.warning("stopping a cancelled run's model call failed", exc_info=task.exception())


def _stamped(reply: ModelMessage) -> ModelMessage:
    """The model's reply with the model origin, as the history keeps it, built without validating again.

    The reply is a record the model adapter validated; only the origin is ours. ``model_copy``
    copied the reply's ``model_fields_set`` (a set per message, kept as long as the history is),
    so the copy shares the one full set ``trusted`` gives every record, and the parts, frozen,
    share theirs by content (``share_fields_sets``): each long-lived set was one more tracked object
    for the cyclic collector to scan on every pass.
    """
    share_fields_sets(reply.parts)
    return trusted(
        ModelMessage,
        role=reply.role,
        parts=reply.parts,
        origin=MODEL_ORIGIN,
        model=reply.model,
        boundary=reply.boundary,
    )


@dataclass(frozen=True, slots=True)
class DriveDeps:
    """What a drive works with and never changes while it runs: built once per drive, by its session.

    ``rider`` is a session actor's turn, whose row rides the commits (``CommitRider``); with
    ``durable_input`` the turn row already holds the input, so the run's first commit waits for its
    first step (a crash before it re-drives the turn from the turn row). ``clock`` is what a
    ``sleep()`` reads and ``timers`` who arms its timer; ``services`` the session tree a tool
    reaches (``ToolContext.services``); ``on_commit`` hears every commit with the run as committed.
    ``budget_scopes`` name the stored budgets (ledgers) the drive's spend counts against (its session
    tree's, its owner's, those that exist: ``repertory.core.budget``), beside its agent's own.
    """

    store: SessionStore
    agent: Agent
    memory: Memory | None = None
    output_type: type[BaseModel] | None = None
    outbox: Outbox | None = None
    on_commit: Callable[[RunState], None] | None = None
    signal: AbortSignal | None = None
    services: SessionServices | None = None
    clock: Clock = _SYSTEM_CLOCK
    timers: TimerArm | None = None
    rider: CommitRider | None = None
    durable_input: bool = False
    budget_scopes: tuple[str, ...] = ()


class Drive:
    """Drives one run. Holds the run and its history in memory and commits only what is new.

    Built whole: its dependencies (``DriveDeps``) and the run it drives are given to the
    constructor; afterwards only the drive changes its state, applying what its helpers decided.
    """

    def __init__(
        self,
        deps: DriveDeps,
        *,
        run: RunState,
        history: MessageHistory,
        base_revision_id: str | None,
        thread_created_at: int,
        detach_on_cancel: bool = False,
        recovering: bool = False,
    ) -> None:
        self.deps = deps
        self.agent = agent = deps.agent  # read on every step: one attribute, not two
        self.run_state = run
        self.history = history
        self.base = base_revision_id
        self.thread_created_at = thread_created_at
        # A memory may contribute tools (``Memory``'s docstring): they join the agent's for this drive.
        self.tools, self.tool_specs = agent.with_tools(getattr(deps.memory, "tools", None) or ())
        if run.client_tools:  # the turn's client runs these itself: the model sees them all the same
            self.tool_specs = self.tool_specs + run.client_tools
        self._agent_tools = agent.tools  # what ``tools`` was built from (see ``_sync_tools``)
        self.budgets = BudgetGate(deps.store, agent.budget, deps.budget_scopes)
        # A drive told to detach (the host shutting down) leaves the run as last committed when
        # its task is cancelled, as a crash would, so the next start re-drives it.
        self.detach_on_cancel = detach_on_cancel
        self.cancel_requested = False
        # Calls a decision taken in this drive approved: they run even where a crash would not re-run them.
        self.just_decided: frozenset[str] = frozenset()
        self.committed_once = False
        # Re-driven from its last checkpoint: replies a dead drive streamed past it are retracted first.
        self.recovering = recovering
        self.streamed: list[str] = []  # replies with deltas since the last commit (retracted if dropped)
        self.carried: set[str] = set()  # a re-attached reply whose earlier deltas a dead drive stored
        self.withdrawn = False  # the head was put back before the run's input (a refused input)
        self.messages: list[ModelMessage] = []
        self.context_offset = 0  # messages of the lineage before ``messages`` (summarised ones)
        self.context_tokens = 0  # estimated tokens of ``messages``, kept only with compaction
        self._fixed_tokens: int | None = None
        self._instructions_message: tuple[str, ModelMessage] | None = None
        self.reset_context()
        self.output: BaseModel | None = None
        settings = agent.settings
        if deps.output_type is not None:
            settings = settings.model_copy(update={"output_schema": deps.output_type.model_json_schema()})
        self.settings: ModelSettings = settings

    def will_cancel(self) -> None:
        """The owner is cancelling this drive's task: the run ends ``cancelled``, the drive raises ``RunCancelled``."""
        self.cancel_requested = True

    def will_detach(self) -> None:
        """The owner is letting go of this drive (the host shutting down): the run stays as last committed."""
        self.detach_on_cancel = True

    def decided(self, decision: Decided) -> None:
        """Apply a decision on the live suspension (``repertory.runtime._decisions``): the run goes on.

        Its token is spent by the drive's first commit, which records the decision with it.
        """
        run = self.run_state
        record = decision.record
        if record is not None:
            for i, held in enumerate(run.approvals):
                if held.tool_call_id == record.tool_call_id:
                    run.approvals[i] = record
                    break
            data: dict[str, Any] = {
                "tool_call_id": record.tool_call_id,
                "decision": record.decision,
                "decided_by": record.decided_by,
                "args_replaced": record.args_replaced,
            }
            if record.reason is not None:
                data["reason"] = record.reason
            # Committed with the decision (the commit that spends the token), or not at all.
            self.emit("approval.decided", data)
        if decision.message is not None:
            self.append(decision.message)
        if decision.results:
            self._answer(list(decision.results))
        self.just_decided = frozenset(decision.approved)
        for call_id, answer in decision.answers:
            run.answers[call_id] = answer
        run.pending.pop(0)
        run.to_running()

    # -- plumbing ---------------------------------------------------------------------------------

    def emit(self, kind: str, data: dict[str, Any]) -> None:
        """Hand an event to the outbox (the session actor's event bus), if any."""
        if self.deps.outbox is not None:
            self.deps.outbox.emit(kind, data)

    def is_detaching(self) -> bool:
        """Whether the host is letting go of this drive (``detach_on_cancel``) rather than cancelling it."""
        return self.detach_on_cancel

    def _withdraw_input(self) -> None:
        """Put the head back where the run's input went on (``RunState.input_depth``): the input leaves the thread.

        The revisions stay in the store (history is immutable); the thread's head, and with it every
        later request and reader, no longer reaches them. The ``error`` commit the refusal leads to
        moves the head back, whether or not the input was committed before the guardrail ran.
        """
        depth = self.run_state.input_depth
        if depth is None:
            return  # a run that started no input (or before the field existed) has nothing to withdraw
        target = self.history.revision_id
        while target is not None:
            rev = self.history.revision(target)
            if rev is None or rev.depth <= depth:
                break
            target = rev.parent_id
        self.history = self.history.branch(target) if target is not None else MessageHistory()
        self.withdrawn = True
        self.reset_context()

    def drop_uncommitted(self) -> None:
        """Forget the messages appended since the last commit (a final reply an output guardrail refused)."""
        self.history = self.history.branch(self.base) if self.base is not None else MessageHistory()
        self.messages = self.history.messages
        self.retract(self.streamed)

    def retract(self, message_ids: Sequence[str]) -> None:
        """Say that the replies streamed as ``message_ids`` will never be in the history (``reply.retracted``)."""
        if message_ids:
            self.emit(RETRACTED, {"run_id": self.run_state.run_id, "message_ids": list(message_ids)})
            self.streamed = [m for m in self.streamed if m not in message_ids]

    def append(self, message: ModelMessage, *, entry_id: str | None = None) -> None:
        """Add a message to the run's history (committed with the next checkpoint)."""
        self.history.append(message, entry_id=entry_id)
        self.messages.append(message)
        if self.agent.compaction is not None:
            self.context_tokens += message_tokens(message)

    def reset_context(self) -> None:
        """Read the context again from the history (at the start, and after a compaction moved it)."""
        self.messages = self.history.context_messages()
        self.context_offset = self.history.depth - len(self.messages)
        if self.agent.compaction is not None:
            self.context_tokens = sum(message_tokens(m) for m in self.messages)

    def fixed_tokens(self) -> int:
        """Estimated tokens every request carries beside the context: instructions, recalled memory, tools."""
        if self._fixed_tokens is None:
            fixed = estimate_tokens(self.run_state.context, self.tool_specs)
            if self.agent.instructions:
                fixed += message_tokens(ModelMessage.system(self.agent.instructions))
            self._fixed_tokens = fixed
        return self._fixed_tokens

    def estimated_tokens(self) -> int:
        """The next request's input tokens at about four characters a token."""
        return self.fixed_tokens() + self.context_tokens

    async def input_tokens(self) -> int:
        """The next request's input tokens: the model's own count where it offers one, else the estimate."""
        model = self.agent.model
        if isinstance(model, TokenCounter):
            counted = await model.count_tokens(self.request_messages(), self.tool_specs, self.settings)
            if counted is not None:
                return counted
        return self.estimated_tokens()

    async def compact(self) -> CompactionResult | None:
        """Compact the context now (``Session.compact()``), whatever its size; ``None`` if nothing can be."""
        return await self._compact(await self.input_tokens())

    async def fit_context(self) -> None:
        """Compact until the next request fits ``max_input_tokens`` (no-op without compaction).

        A request that still does not fit after ``MAX_PASSES`` stacked compactions, or that no
        compaction can shrink further, is a ``ModelError``: it is never sent over the budget.
        """
        compaction = self.agent.compaction
        if compaction is None:
            return
        budget = compaction.max_input_tokens
        for passes in range(MAX_PASSES + 1):
            tokens = await self.input_tokens()
            if tokens <= budget:
                return
            if passes == MAX_PASSES:
                break
            if await self._compact(tokens) is None:
                raise ModelError(
                    f"the next request of run {self.run_state.run_id!r} needs about {tokens} input tokens, over "
                    f"max_input_tokens={budget}, and no compaction can shrink it further (what is left is the "
                    "latest summary, the instructions and tools, and what a pending tool call keeps with it)",
                    run_id=self.run_state.run_id,
                )
        raise ModelError(
            f"the next request of run {self.run_state.run_id!r} still needs about {tokens} input tokens after "
            f"{MAX_PASSES} compactions, over max_input_tokens={budget}: the summaries are too long for the budget "
            "(lower Compaction.summary_tokens, or raise max_input_tokens)",
            run_id=self.run_state.run_id,
        )

    async def _compact(self, tokens_before: int) -> CompactionResult | None:
        """Compact the context once as ``plan_compaction`` decides and commit the boundary; ``None`` if no cut helps."""
        compaction = self.agent.compaction
        assert compaction is not None
        if self.history.revision_id != self.base:
            await self.commit()  # what came before the summary is durable first, as it always is
        run = self.run_state
        decided = await plan_compaction(
            compaction,
            compaction.model or self.agent.model,
            self.messages,
            self.history.context_revisions(),
            self.fixed_tokens(),
            run.thread_id,
        )
        if decided is None:
            return None
        inserted = self.history.insert(decided.boundary, after=decided.after.id)
        run.usage = run.usage + decided.usage
        if decided.cost is not None:
            run.cost = (run.cost or 0.0) + decided.cost
        if run.context_depth is not None:
            # Recalled memory is folded at a depth of the lineage: it moves with the message it preceded,
            # or lands right after the summary when that message is now summarised.
            run.context_depth = max(run.context_depth, decided.after.depth) + 1
        self.reset_context()
        result = CompactionResult(
            thread_id=run.thread_id,
            run_id=run.run_id,
            boundary_revision_id=inserted.id,
            summarized=decided.summarized,
            kept=decided.kept,
            tokens_before=tokens_before,
            tokens_after=self.estimated_tokens(),
            usage=decided.usage,
            cost=decided.cost,
        )
        self.emit("context.compacted", result.model_dump(mode="json"))
        await self.commit(compaction=True)
        return result

    async def commit(self, redeem_token: str | None = None, *, compaction: bool = False) -> None:
        """Commit the run, the thread head and the history since the last commit, atomically.

        ``compaction`` marks the commit of a compaction's boundary: its checkpoint event says so
        (the revisions it adds re-point at messages already said, so readers must not show them as
        new) and nothing goes to the memory (the summary was said by nobody; the rest it remembers).
        """
        run = self.run_state
        deps = self.deps
        outbox, rider, memory = deps.outbox, deps.rider, deps.memory
        run.history_revision_id = self.history.revision_id
        run.updated_at = now_ms()
        thread = trusted(
            ThreadState,
            schema_version=SCHEMA_VERSION,
            thread_id=run.thread_id,
            history_revision_id=self.history.revision_id,
            created_at=self.thread_created_at,
            updated_at=run.updated_at,
        )
        riding = None if rider is None else rider.ride(run)
        # No empty lists held across the commit: it can wait long enough for the collector to
        # promote every list this coroutine holds (issue 21).
        fresh: list[ModelMessage] | None = None
        if memory is not None and not compaction and not self.withdrawn:
            fresh = [self.history.entry(r.entry_id).message for r in reversed(self.history.walk_back(self.base))]  # type: ignore[union-attr]
        if outbox is not None:
            # The revisions let a reader (the HTTP server) rebuild the state at this checkpoint and what
            # it added, from the event alone, long after the fact.
            data: dict[str, Any] = {
                "run_id": run.run_id,
                "status": run.status,
                "step_index": run.step_index,
                "history_revision_id": self.history.revision_id,
                "base_revision_id": self.base,
            }
            if compaction:
                data["compacted"] = True
            self.emit("checkpoint", data)
        extra: dict[str, Any] = {}
        ridden = 0  # the rider's events: the last of ``events``, never put back (the next ride says again)
        if riding is not None:
            if outbox is not None:
                for kind, payload in riding.events:
                    self.emit(kind, payload)
                ridden = len(riding.events)
            if riding.turn is not None:
                extra["turn"] = riding.turn
            if riding.session is not None:
                extra["session"] = riding.session
        spend = self.budgets.delta(run)
        if spend is not None:
            extra["spend"] = spend
        events = () if outbox is None else outbox.take()
        try:
            await deps.store.commit_session(
                run=run,
                thread=thread,
                history=self.history,
                base_revision_id=self.base,
                redeem_token=redeem_token,
                events=events,
                **extra,
            )
        except CommitConflict:
            if outbox is not None:
                outbox.restore(events[: len(events) - ridden])
            stored = await deps.store.load_run(run.run_id)
            if stored is not None and stored.status == "cancelled" and redeem_token is None:
                raise RunCancelled(f"run {run.run_id!r} was cancelled elsewhere", run_id=run.run_id) from None
            raise
        except BaseException:
            if outbox is not None:
                outbox.restore(events[: len(events) - ridden])
            raise
        if outbox is not None:
            outbox.committed(events)
        if spend is not None:
            self.budgets.landed(spend)
        self.base = self.history.revision_id
        self.committed_once = True
        if self.streamed:
            # Those in the history now are said; the one still streaming (a turn's first commit) is not.
            self.streamed = [m for m in self.streamed if self.history.entry(m) is None]
        if riding is not None and rider is not None:
            rider.landed(riding)
        if memory is not None and fresh:
            await memory.append(thread_id=run.thread_id, messages=fresh)
        if deps.on_commit is not None:
            deps.on_commit(run)

    def result(self) -> RunResult:
        """The outcome of this drive as the caller sees it."""
        return RunResult.of(detached(self.run_state), self.output)

    def request_messages(self) -> list[ModelMessage]:
        """What the model sees: instructions, then history with recalled context folded in."""
        run = self.run_state
        msgs = self.messages
        if run.context and run.context_depth is not None:
            at = min(max(run.context_depth - self.context_offset, 0), len(msgs))
            msgs = msgs[:at] + run.context + msgs[at:]
        else:
            msgs = list(msgs)
        if self.agent.instructions:
            msgs.insert(0, self._instructions())
        return msgs

    def _instructions(self) -> ModelMessage:
        """The agent's instructions as a system message: one per drive, not one per request."""
        text = self.agent.instructions or ""
        cached = self._instructions_message
        if cached is None or cached[0] != text:
            cached = self._instructions_message = (text, ModelMessage.system(text, origin=SYSTEM_ORIGIN))
        return cached[1]

    async def _sync_tools(self) -> None:
        """Take up a change in the agent's tool sources (an MCP server's list changed) before a request."""
        if not self.agent.tool_sources:
            return
        await self.agent.refresh_tools()
        if self.agent.tools is not self._agent_tools:
            self.tools, self.tool_specs = self.agent.with_tools(getattr(self.deps.memory, "tools", None) or ())
            if self.run_state.client_tools:
                self.tool_specs = self.tool_specs + self.run_state.client_tools
            self._agent_tools = self.agent.tools

    async def request(self) -> tuple[ModelResponse, str]:
        """One model request inside its ``chat`` span (``repertory.tracing``); the reply and its entry id."""
        if self.budgets.active:
            refused = await self._over_budget()
            if refused is not None:
                raise refused
        with chat_span(self.agent.model, self.settings, self.request_messages) as span:
            response, reply_id = await self._request()
            span.response(response)
        return response, reply_id

    async def _request(self) -> tuple[ModelResponse, str]:
        """One model request; deltas go to the outbox, the final response comes back with the id it will have.

        The id is minted before the request, so the deltas name the history entry the reply
        becomes. With a delta window they are gathered and written as they come (``ReplyDeltas``);
        what is still gathering when the response arrives rides the step's next commit. A model
        that says where its call can be found again (``ModelCall``) has that committed before the
        reply is read on; a step re-driven after a crash hands it back (``ModelSettings.attach``)
        and goes on with the same reply.
        """
        if self.agent.compaction is not None:  # a coroutine per request for nothing, otherwise
            await self.fit_context()
        outbox, run = self.deps.outbox, self.run_state
        run_id, settings = run.run_id, self.settings
        held = run.model_call if run.model_call is not None and run.model_call.step == run.step_index else None
        if held is not None:  # a call a dead drive started: attach to it, under the same reply id
            reply_id = held.reply_id
            settings = settings.model_copy(update={"attach": held.state})
        else:
            reply_id = new_id()
        deltas = self._reply_deltas(reply_id)
        response: ModelResponse | None = None
        stream = self.agent.model.request(self.request_messages(), self.tool_specs, settings)
        try:
            async for event in stream:
                if isinstance(event, ModelResponse):
                    response = event
                elif outbox is not None and isinstance(event, TextDelta | ReasoningDelta):
                    kind = "text.delta" if isinstance(event, TextDelta) else "reasoning.delta"
                    if deltas is None:
                        outbox.publish(kind, {"text": event.text, "run_id": run_id, "message_id": reply_id})
                    else:
                        if not self.streamed or self.streamed[-1] != reply_id:
                            self.streamed.append(reply_id)
                        deltas.add(kind, event.text)
                elif isinstance(event, ModelCall):
                    known = run.model_call is not None and run.model_call.reply_id == reply_id
                    run.model_call = ModelCallRecord(step=run.step_index, reply_id=reply_id, state=event.state)
                    if deltas is not None:
                        deltas.call = event.state
                    if not known:
                        await self.commit()  # durable before a byte of the reply is read
                elif isinstance(event, StreamRestart) and outbox is not None:
                    # The answer starts over (a fallback model took over): what was streamed is no reply.
                    if deltas is not None:
                        deltas.rest()
                        await deltas.settle()
                        if deltas.written or reply_id in self.carried:
                            self.retract([reply_id])
                        elif reply_id in self.streamed:
                            self.streamed.remove(reply_id)  # gathered, never written: nothing to take back
                    else:
                        outbox.publish(RETRACTED, {"run_id": run_id, "message_ids": [reply_id]})
                    reply_id = new_id()
                    deltas = self._reply_deltas(reply_id)
            if deltas is not None:
                rest = deltas.rest()
                await deltas.settle()
                for kind, data in rest:
                    self.emit(kind, data)
        except BaseException as exc:
            if deltas is not None:
                deltas.abort()
                # A reply cut off mid-stream never enters the history: its text leaves every reader.
                self.retract([reply_id] if reply_id in self.streamed or reply_id in self.carried else [])
            if isinstance(exc, asyncio.CancelledError) and not self.detach_on_cancel:
                self._cancel_call()  # cancelled, not let go: a call that runs on server-side stops too
            raise
        run.model_call = None  # answered: committed with the step
        if response is None:
            self.retract([reply_id] if reply_id in self.streamed else [])
            raise ModelError("the model's stream ended without a response")
        if response.message.role != "assistant":
            self.retract([reply_id] if reply_id in self.streamed else [])
            raise ModelError(f"the model answered with a {response.message.role!r} message")
        return response, reply_id

    def _cancel_call(self) -> None:
        """Stop the step's server-side model call, in the background (the cancelled drive does not wait)."""
        call, model = self.run_state.model_call, self.agent.model
        if call is None or not isinstance(model, CallCanceller):
            return
        task = asyncio.get_running_loop().create_task(model.cancel_call(dict(call.state)))
        _CANCELLING.add(task)
        task.add_done_callback(_cancelled_call)

    def _reply_deltas(self, reply_id: str) -> ReplyDeltas | None:
        """The gatherer of one reply's deltas, when they are stored (an outbox and a delta window)."""
        window = self.agent.delta_window
        if self.deps.outbox is None or window is None:
            return None
        return ReplyDeltas(window, self._write_deltas, run_id=self.run_state.run_id, message_id=reply_id)

    async def _write_deltas(self, batch: Batch) -> None:
        """Write a window's deltas now; a turn whose first commit is still ahead makes it first.

        That commit (the run, its input, ``turn.started``) would otherwise follow the deltas into
        the log, and a reader would see a reply before the turn that asked for it.
        """
        outbox = self.deps.outbox
        assert outbox is not None
        if self.deps.durable_input and not self.committed_once:
            await self.commit()
        for kind, data in batch:
            outbox.emit(kind, data)
        await outbox.flush()

    # -- the loop ---------------------------------------------------------------------------------

    async def run(self) -> RunResult:
        """Drive to a resting state; errors commit an ``error`` checkpoint, aborts a ``cancelled`` one."""
        from repertory.runtime._control import commit_cancelled

        task = asyncio.current_task()
        signal = self.deps.signal
        if signal is not None and task is not None:
            signal.bind(task)
        try:
            if signal is not None and signal.aborted:
                raise asyncio.CancelledError
            return await self._loop()
        except asyncio.CancelledError:
            if self.detach_on_cancel:
                raise
            ours = self.cancel_requested or (signal is not None and signal.aborted)
            if ours and task is not None:
                task.uncancel()
            if self.deps.durable_input and not self.committed_once:
                await self._commit_cancelled_here("the run was cancelled")  # announced by its commit
            else:
                cancelled = await commit_cancelled(
                    self.deps.store, self.run_state.run_id, "the run was cancelled", self.deps.memory
                )
                if cancelled is not None and cancelled.status == "cancelled" and self.deps.on_commit is not None:
                    self.deps.on_commit(cancelled)
            if ours:
                run_id = self.run_state.run_id
                raise RunCancelled(f"run {run_id!r} was cancelled", run_id=run_id) from None
            raise
        except (RunCancelled, StoreError):
            raise
        except Exception as exc:
            await self._commit_error(exc)
            raise
        finally:
            if signal is not None and task is not None:
                signal.unbind(task)

    async def _commit_cancelled_here(self, reason: str) -> None:
        """Commit a run nothing of which is stored yet as ``cancelled``, from what this drive holds.

        ``commit_cancelled`` works from the store, which holds neither the run nor its input yet
        (``durable_input``): this first commit writes them, the open calls answered with errors,
        as a cancel of a committed run would leave them.
        """
        from repertory.runtime._control import pair_unanswered

        run = self.run_state
        answered = pair_unanswered(self.history, f"cancelled: {reason}")
        if answered is not None:
            self.messages.append(answered)
        run.to_cancelled(reason, now_ms())
        try:
            await self.commit()
        except StoreError:
            pass  # the turn row still holds the input; the turn ends cancelled without a run

    async def _commit_error(self, exc: Exception) -> None:
        """Commit the run ``error`` with ``exc``'s account; a store that fails that commit is what is raised.

        The store then holds the run as its last commit left it, ``running``, as a crash would:
        reporting only ``exc`` would have the caller (a session's actor) end its turn ``error``
        over a run nothing drives again. The ``StoreError`` (``exc`` its cause) says what the store
        holds, and an actor drives the run on from there, as a restarted host would. A
        ``CommitConflict`` (the run was cancelled or moved on elsewhere) leaves ``exc`` the one to report.
        """
        run = self.run_state
        if run.is_terminal:
            # It finished here, and failed in or after the commit that finished it (what hears that
            # commit: the memory, a listener): a finished run takes no error, and the store holds it
            # as that commit left it.
            return
        run.to_error(ErrorInfo.of(exc))
        assert run.error is not None
        self.emit("error", {"run_id": run.run_id, "type": run.error.type, "message": run.error.message})
        try:
            await self.commit()
        except CommitConflict:
            pass  # the original error is the one to report; the run stays as the store says
        except StoreError as failed:
            raise failed from exc

    async def _loop(self) -> RunResult:
        run = self.run_state
        if self.recovering and self.deps.outbox is not None:
            abandoned = await self.deps.outbox.abandoned(run.run_id)
            held = run.model_call
            if held is not None and held.reply_id in abandoned:
                # Its call is re-attached, not asked again: it goes on from the last text the log holds.
                position = abandoned.pop(held.reply_id)
                if position is not None:
                    run.model_call = held.model_copy(update={"state": position})
                self.carried.add(held.reply_id)
            self.retract(list(abandoned))
        run.to_running()
        self.budgets.open(run)
        if await self._settle(fresh=False):
            return self.result()
        if self.history.revision_id != self.base and not (self.deps.durable_input and not self.committed_once):
            await self.commit()  # results of a decision or a recovery are durable before the model sees them
        if run.step_index == 0 and self.agent.input_guardrails:
            await self._guard("input", run_input(self.messages))  # before the first request: no tokens spent
        while True:
            if run.step_index >= self.agent.max_steps:
                raise StepBudgetExceeded(
                    f"run {run.run_id!r} reached max_steps={self.agent.max_steps} model requests",
                    run_id=run.run_id,
                )
            if self.agent.tool_sources:  # only a source's listing can change the tools between steps
                await self._sync_tools()
            response, reply_id = await self.request()
            run.step_index += 1
            run.usage = run.usage + response.usage
            if response.cost is not None:
                run.cost = (run.cost or 0.0) + response.cost
            message = _stamped(response.message)
            self.append(message, entry_id=reply_id)
            calls = message.tool_calls
            if not calls:
                if await self._finish(message):
                    return self.result()
                continue
            for call in calls:
                self.emit(
                    "tool.call", {"tool_call_id": call.tool_call_id, "tool_name": call.tool_name, "args": call.args}
                )
            # A child's ids are durable before it exists.
            minted = new_delegations(calls, self.tools, run.delegations, self.deps.services is not None)
            if minted:
                run.delegations.extend(minted)
            if minted is not None or any(self._needs_early_commit(self.tools.get(c.tool_name), c.args) for c in calls):
                await self.commit()  # a non-idempotent tool must never run before its call is durable
            if await self._settle(fresh=True):
                return self.result()
            await self.commit()

    async def _settle(self, fresh: bool) -> bool:
        """Answer the last assistant message's unanswered calls as ``plan_calls`` decides; True if the run suspended."""
        run = self.run_state
        unanswered = unanswered_calls(self.messages)
        if not unanswered:
            if run.pending:
                await self._suspend()
                return True
            return False
        plan = plan_calls(
            unanswered,
            self.tools,
            run,
            fresh=fresh,
            just_decided=self.just_decided,
            in_tree=self.deps.services is not None,
        )
        errors, ran, suspends = plan.errors, None, None
        if plan.jobs and self.budgets.active:
            refused = await self._over_budget(len(plan.jobs))
            if refused is not None:
                # The run ends here: every open call is answered, so the history stays one a model accepts.
                note = f"not run: {refused.message}"
                self._answer([errors.get(c.tool_call_id) or error_result(c, note) for c in unanswered])
                raise refused
        if plan.jobs:
            run.tool_calls += len(plan.jobs)
            ran, suspends = settle_outcomes(plan.jobs, await self._run_jobs(plan.jobs), self.deps.clock)
            if run.answers:  # delivered: a call that asks again gets its next answer the same way
                for job in plan.jobs:
                    run.answers.pop(job.call.tool_call_id, None)
        if plan.clients:
            suspends = (suspends or []) + plan.clients
        if errors or ran:
            ordered: list[ToolResultPart] = []
            for call in unanswered:
                part = errors.get(call.tool_call_id)
                if part is None and ran is not None:
                    part = ran.get(call.tool_call_id)
                if part is not None:
                    ordered.append(part)
            self._answer(ordered)
        for asked in plan.approvals:
            run.approvals.append(approval_record(asked))
        run.pending = queue_pending(run.pending, plan.approvals, suspends or [])
        if run.pending:
            await self._suspend()
            return True
        return False

    async def _run_jobs(self, jobs: list[CallJob]) -> list[CallOutcome]:
        """Run the planned calls (concurrently); their scratch writes must stay JSON."""
        run = self.run_state
        services, detaching = self.deps.services, self.is_detaching
        # An empty scratch (most runs never use it) needs neither the copy nor the conversion:
        # a JSON round trip and a pydantic walk of ``{}`` on every tool step bought nothing.
        scratch_before = json.loads(json.dumps(run.scratch)) if run.scratch else {}
        outcomes = await run_calls(
            [
                (
                    tool,
                    call,
                    args,
                    ToolContext(
                        call_id=call.tool_call_id,
                        tool_name=tool.name,
                        run_id=run.run_id,
                        thread_id=run.thread_id,
                        approval=approval,
                        scratch=run.scratch,
                        services=services,
                        delegation=delegation,
                        detaching=detaching,
                        answer=run.answers.get(call.tool_call_id),
                    ),
                )
                for tool, call, args, approval, delegation in jobs
            ]
        )
        if run.scratch:
            try:
                # Tools may write anything into ctx.scratch; it must stay JSON (sets become lists).
                run.scratch = to_jsonable_python(run.scratch)
            except Exception as exc:
                run.scratch = scratch_before
                names = ", ".join(sorted({job.tool.name for job in jobs}))
                raise ValueError(f"a tool ({names}) put a value into ctx.scratch that is not JSON: {exc}") from None
        return outcomes

    def _answer(self, results: list[ToolResultPart]) -> None:
        """Append results as one tool message and tell the listeners."""
        self.append(tool_message(results))
        for part in results:
            self.emit(
                "tool.result",
                {
                    "tool_call_id": part.tool_call_id,
                    "tool_name": part.tool_name,
                    "result": part.result,
                    "is_error": part.is_error,
                },
            )

    async def _suspend(self) -> None:
        """Suspend on the first pending call with a fresh token, and commit (a timer is armed first)."""
        run = self.run_state
        first = run.pending[0]
        on = suspension(first)
        run.to_suspended(on)
        timers = self.deps.timers
        if first.kind == "timer" and first.wake_at is not None and timers is not None:
            await timers.arm(run.run_id, run.thread_id, on.token, first.wake_at)
        # Emitted before the commit so they are durable with the suspension itself: emitted after it,
        # they waited in the buffer for the next commit (the decision), so nobody saw the request in time.
        data = {
            "run_id": run.run_id,
            "kind": first.kind,
            "reason": first.reason,
            "payload": on.payload,
            "tool_call_id": first.tool_call_id,
        }
        if first.wake_at is not None:
            data["wake_at"] = first.wake_at
        if first.kind == "approval":
            self.emit("approval.requested", data)
        self.emit("run.suspended", data)
        await self.commit()

    async def _guard(self, stage: GuardrailStage, text: str) -> None:
        """Run the agent's guardrails of ``stage`` on ``text``; a trip is recorded as an event, then raised.

        The event is buffered for the commit the raise leads to (the ``error`` run's). A refused
        final reply is dropped before that commit, so it never enters the history.
        """
        agent, run = self.agent, self.run_state
        ctx = GuardrailContext(
            run_id=run.run_id, thread_id=run.thread_id, agent=agent.name, stage=stage, messages=tuple(self.messages)
        )
        tripped = await check_guardrails(
            agent.input_guardrails if stage == "input" else agent.output_guardrails, ctx, text
        )
        if tripped is None:
            return
        if stage == "output":
            self.drop_uncommitted()
        else:
            self._withdraw_input()
        self.emit(
            "guardrail.tripped",
            {
                "run_id": run.run_id,
                "stage": stage,
                "guardrail": tripped.details.get("guardrail"),
                "message": tripped.message,
            },
        )
        raise tripped

    async def _over_budget(self, tool_calls: int = 0) -> BudgetExceeded | None:
        """The error a crossed budget ends the run with (its event emitted), or ``None`` to go on.

        ``tool_calls``: that many calls are about to start (``0``: a model request). A warning due
        for a budget nearing its cap is emitted once per drive and scope.
        """
        run = self.run_state
        verdict = await self.budgets.check(run, tool_calls=tool_calls)
        for scope, _, near in verdict.warnings:
            self.emit(
                "budget.warning",
                {"run_id": run.run_id, "scope": scope, "limit": near.limit, "allowed": near.allowed, "used": near.used},
            )
        if verdict.crossed is None:
            return None
        scope, budget, crossed = verdict.crossed
        what = f"{tool_calls} tool call{'s' if tool_calls != 1 else ''}" if tool_calls else "a model request"
        whose = "the run's budget" if scope == RUN_SCOPE else f"the budget of {scope}"
        self.emit(
            "budget.exceeded",
            {
                "run_id": run.run_id,
                "scope": scope,
                "limit": crossed.limit,
                "allowed": crossed.allowed,
                "used": crossed.used,
                "on_exceed": budget.on_exceed,
            },
        )
        return BudgetExceeded(
            f"{whose} is spent: {crossed.limit}={crossed.allowed:g}, used {crossed.used:g}; {what} was not started",
            run_id=run.run_id,
            scope=scope,
            limit=crossed.limit,
            allowed=crossed.allowed,
            used=crossed.used,
            on_exceed=budget.on_exceed,
        )

    @staticmethod
    def _needs_early_commit(tool: Tool | None, args: dict[str, Any]) -> bool:
        return tool is not None and (not tool.idempotent or tool.reattaches or tool.needs_approval(args))

    async def _finish(self, message: ModelMessage) -> bool:
        """Handle a final reply; False when it failed output validation and the model gets another try."""
        run = self.run_state
        if self.deps.output_type is not None:
            try:
                self.output = parse_output(self.deps.output_type, message.text)
            except ValidationError as exc:
                if run.output_retries >= OUTPUT_RETRIES:
                    raise OutputValidationError(
                        f"the reply did not validate into {self.deps.output_type.__name__} after "
                        f"{OUTPUT_RETRIES} retries: {exc}",
                        run_id=run.run_id,
                    ) from None
                run.output_retries += 1
                self.append(
                    ModelMessage(
                        role="user",
                        origin=FEEDBACK_ORIGIN,
                        parts=[
                            TextPart(
                                text=f"Your reply did not validate against the required output schema:\n{exc}\n"
                                "Reply again with only a JSON document that matches the schema."
                            )
                        ],
                    )
                )
                await self.commit()
                return False
        if self.agent.output_guardrails:
            await self._guard("output", message.text)
        run.to_done(message.text)
        await self.commit()
        return True
