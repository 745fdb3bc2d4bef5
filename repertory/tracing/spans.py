"""The spans of a run, after the OpenTelemetry GenAI conventions, and how they stay one trace.

::

    turn {agent}                     one turn of a session (SessionActor); parent: the sender's span
      invoke_agent {agent}           one drive of the run: start, resume, approve, reject, recover
        chat {model}                 one model request
        execute_tool {tool}          one tool call
      approval {tool}                the wait for a human, from the request to the decision
      invoke_agent {agent}           the drive that the decision started, maybe days later, elsewhere

A run keeps one trace for its whole life. Its first drive stores an anchor in
``RunState.traceparent`` (the turn's span when a turn drives the run, else the drive's own span) and
every later drive, in whatever process, is parented to that anchor unless it already runs inside
the run's trace (a turn span re-created after a restart); the span current where the later drive
was asked for (an HTTP request, the approver's own span) becomes a link. A spawned session's turn
is a trace of its own, linked to the span that sent it (the parent session's tool call).

Each helper returns a context manager; without a tracer provider it is a shared object whose
methods do nothing, and the per-step helpers (``chat_span``, ``tool_span``) only read a context
variable that the drive set, so a drive with tracing off costs one provider lookup in all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any, Literal, Protocol

from repertory.core.messages import ModelMessage, ToolResultPart
from repertory.core.model import ModelResponse, ModelSettings
from repertory.core.state import RunState, Usage
from repertory.core.tree import SessionRecord, TurnRecord
from repertory.errors import RunCancelled
from repertory.tracing._otel import otel_context, otel_trace, tracer
from repertory.tracing.content import content_captured, dumps, input_messages, output_messages
from repertory.tracing.context import format_traceparent, parse_traceparent

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Link, Span, SpanContext, Tracer

__all__ = ["DriveCause", "chat_span", "drive_span", "tool_span", "tracing_on", "turn_span"]

DriveCause = Literal["start", "decision", "recover"]
"""Why a drive runs; a ``decision`` is recorded as ``approve``, ``reject`` or ``resume``."""

_LOOKUP: Any = object()  # outside any drive: look the tracer up
# Inside a drive: the tracer it found, or None (tracing off), so per-step spans skip the lookup.
_ACTIVE: ContextVar[Any] = ContextVar("repertory_tracing_active", default=_LOOKUP)
# Inside a turn span: (run id, the turn span's traceparent), the anchor a new run of that turn stores.
_TURN: ContextVar[tuple[str, str] | None] = ContextVar("repertory_tracing_turn", default=None)

_PROVIDERS = {
    "OpenAIChatModel": "openai",
    "AnthropicModel": "anthropic",
    "ScriptedModel": "repertory.testing",
    "ReplayModel": "repertory.testing",
}


def tracing_on() -> bool:
    """Whether a tracer provider is set now (spans started now are recorded)."""
    return tracer() is not None


class AgentLike(Protocol):
    """What a drive span reads of an agent: its name and its model."""

    name: str
    model: Any


class _NoSpan:
    """What the helpers return when nothing is recorded: every method does nothing."""

    __slots__ = ()

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def response(self, response: ModelResponse) -> None:
        """Record a model response (nothing to record)."""

    def outcome(self, result: ToolResultPart, error_type: str | None, suspended: bool) -> None:
        """Record a tool call's outcome (nothing to record)."""


NO_SPAN = _NoSpan()


class _Off:
    """A drive with tracing off: its model requests and tool calls skip the provider lookup."""

    __slots__ = ("_token",)

    def __enter__(self) -> _NoSpan:
        self._token = _ACTIVE.set(None)
        return NO_SPAN

    def __exit__(self, *exc: object) -> None:
        _ACTIVE.reset(self._token)


def _model_name(model: Any) -> str:
    name = getattr(model, "model", None)
    return name if isinstance(name, str) else type(model).__name__


def _provider(model: Any) -> str:
    models = getattr(model, "models", None)  # FallbackModel: named after its primary
    if isinstance(models, tuple) and models:
        model = models[0]
    return _PROVIDERS.get(type(model).__name__, "_OTHER")


def _fail(span: Span, exc: BaseException) -> None:
    """Mark ``span`` failed with ``exc``'s type; its message and stack only when content is captured.

    Error messages often quote what failed (a reply that did not validate, a tool's arguments),
    so they count as content.
    """
    trace = otel_trace()
    assert trace is not None
    name = type(exc).__name__
    span.set_attribute("error.type", name)
    span.set_status(trace.Status(trace.StatusCode.ERROR, name))
    if content_captured():
        span.record_exception(exc)
    else:
        span.add_event("exception", {"exception.type": f"{type(exc).__module__}.{type(exc).__qualname__}"})


def _cancelled(exc: BaseException | None) -> bool:
    return isinstance(exc, asyncio.CancelledError | RunCancelled)


def _usage_attributes(out: dict[str, Any], usage: Usage) -> dict[str, Any]:
    out["gen_ai.usage.input_tokens"] = usage.input_tokens
    out["gen_ai.usage.output_tokens"] = usage.output_tokens
    if usage.cache_read_tokens:
        out["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        out["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
    return out


def _unanswered(messages: list[ModelMessage]) -> set[str]:
    """Call ids of the last assistant message without a result (the engine's rule, read-only here)."""
    answered: set[str] = set()
    for message in reversed(messages):
        if message.role == "assistant":
            return {c.tool_call_id for c in message.tool_calls} - answered
        answered.update(p.tool_call_id for p in message.tool_results)
    return set()


# -- invoke_agent: one drive of a run -----------------------------------------------------------------


class _DriveSpan:
    def __init__(
        self, found: Tracer, run: RunState, agent: AgentLike, messages: list[ModelMessage], cause: DriveCause
    ) -> None:
        self._tracer = found
        self._run = run
        self._agent = agent
        self._messages = messages
        self._cause = cause
        self._usage = run.usage
        self._cost = run.cost

    def __enter__(self) -> _NoSpan:
        context = otel_context()
        trace = otel_trace()
        assert trace is not None
        run = self._run
        current = trace.get_current_span().get_span_context()
        anchor = parse_traceparent(run.traceparent)
        links: list[Link] = []
        parent: Context | None = None  # the current context
        if anchor is not None and not (current.is_valid and current.trace_id == anchor.trace_id):
            parent = trace.set_span_in_context(trace.NonRecordingSpan(anchor))
            if current.is_valid:
                links.append(trace.Link(current, {"repertory.link": "caller"}))
        cause: str = self._cause
        if cause == "decision":
            cause = self._approval_waits(parent)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": self._agent.name,
            "gen_ai.conversation.id": run.thread_id,
            "gen_ai.provider.name": _provider(self._agent.model),
            "gen_ai.request.model": _model_name(self._agent.model),
            "repertory.run_id": run.run_id,
            "repertory.session_id": run.thread_id,
            "repertory.drive.cause": cause,
        }
        span = self._tracer.start_span(
            f"invoke_agent {self._agent.name}", context=parent, kind=trace.SpanKind.INTERNAL,
            attributes=attributes, links=links,
        )  # fmt: skip
        self._span = span
        if run.traceparent is None:
            turn = _TURN.get()
            own = span.get_span_context()
            if turn is not None and turn[0] == run.run_id:
                run.traceparent = turn[1]
            elif own.is_valid:
                run.traceparent = format_traceparent(own)
        self._active = _ACTIVE.set(self._tracer)
        self._attached = context.attach(trace.set_span_in_context(span))
        return NO_SPAN

    def _approval_waits(self, parent: Context | None) -> str:
        """Record the wait for each decision this drive carries out; the drive's cause, refined."""
        run = self._run
        open_calls = _unanswered(self._messages)
        decided = [
            a
            for a in run.approvals
            if a.decision in ("approved", "rejected") and a.decided_at is not None and a.tool_call_id in open_calls
        ]
        for record in decided:
            assert record.decided_at is not None
            start = record.requested_at * 1_000_000
            wait = self._tracer.start_span(
                f"approval {record.tool_name}",
                context=parent,
                start_time=start,
                attributes={
                    "gen_ai.tool.name": record.tool_name,
                    "gen_ai.tool.call.id": record.tool_call_id,
                    "repertory.run_id": run.run_id,
                    "repertory.approval.decision": record.decision or "",
                    "repertory.approval.args_replaced": record.args_replaced,
                    "repertory.approval.wait_ms": max(record.decided_at - record.requested_at, 0),
                },
            )
            wait.end(end_time=max(record.decided_at * 1_000_000, start))
        if not decided:
            return "resume"
        return "approve" if decided[-1].decision == "approved" else "reject"

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        context = otel_context()
        span, run = self._span, self._run
        try:
            used, before = run.usage, self._usage
            drive_usage = Usage(
                input_tokens=used.input_tokens - before.input_tokens,
                output_tokens=used.output_tokens - before.output_tokens,
                cache_read_tokens=used.cache_read_tokens - before.cache_read_tokens,
                cache_write_tokens=used.cache_write_tokens - before.cache_write_tokens,
            )
            ending: dict[str, Any] = {"repertory.run.status": run.status, "repertory.run.step_index": run.step_index}
            _usage_attributes(ending, drive_usage)
            if run.cost is not None:
                ending["repertory.cost"] = run.cost - (self._cost or 0.0)
            span.set_attributes(ending)
            waiting = run.suspended_on
            if run.status == "suspended" and waiting is not None:
                event: dict[str, Any] = {"repertory.suspend.kind": waiting.kind}
                if waiting.tool_call_id is not None:
                    event["gen_ai.tool.call.id"] = waiting.tool_call_id
                if run.pending:
                    event["gen_ai.tool.name"] = run.pending[0].tool_name
                if content_captured() and waiting.reason is not None:
                    event["repertory.suspend.reason"] = waiting.reason
                span.add_event("approval.requested" if waiting.kind == "approval" else "run.suspended", event)
            if exc is not None and not _cancelled(exc):
                _fail(span, exc)
        finally:
            context.detach(self._attached)
            _ACTIVE.reset(self._active)
            span.end()


def drive_span(run: RunState, agent: AgentLike, messages: list[ModelMessage], cause: DriveCause) -> Any:
    """``invoke_agent {agent}`` around one drive of ``run``; stores the run's trace anchor on its first drive.

    ``messages`` are the drive's history (a decision's drive reads which approvals it carries out);
    ``cause`` is ``start``, ``decision`` or ``recover``. Without a tracer provider nothing is
    recorded, and the drive's model requests and tool calls skip the lookup too.
    """
    found = tracer()
    if found is None:
        return _Off()
    return _DriveSpan(found, run, agent, messages, cause)


# -- chat: one model request --------------------------------------------------------------------------


class _ChatSpan:
    def __init__(
        self, found: Tracer, model: Any, settings: ModelSettings, messages: Callable[[], list[ModelMessage]]
    ) -> None:
        self._tracer = found
        self._model = model
        self._settings = settings
        self._messages = messages

    def __enter__(self) -> _ChatSpan:
        context = otel_context()
        trace = otel_trace()
        assert trace is not None
        name = _model_name(self._model)
        settings = self._settings
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": _provider(self._model),
            "gen_ai.request.model": name,
        }
        if settings.output_schema is not None:  # the conventions ask for it when the request sets a format
            attributes["gen_ai.output.type"] = "json"
        if settings.temperature is not None:
            attributes["gen_ai.request.temperature"] = settings.temperature
        if settings.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = settings.max_tokens
        if content_captured():
            attributes["gen_ai.input.messages"] = input_messages(self._messages())
        self._span = self._tracer.start_span(f"chat {name}", kind=trace.SpanKind.CLIENT, attributes=attributes)
        self._attached = context.attach(trace.set_span_in_context(self._span))
        return self

    def response(self, response: ModelResponse) -> None:
        """Record what came back: the serving model, usage, cost, finish reason (and the reply, with content)."""
        message = response.message
        # A reply that stopped early (length, refusal) is a ModelError in every adapter, so a
        # response that arrives finished either on tool calls or on its own.
        finish = "tool_call" if message.tool_calls else "stop"
        out = _usage_attributes({"gen_ai.response.finish_reasons": (finish,)}, response.usage)
        if message.model is not None:
            out["gen_ai.response.model"] = message.model
        if response.cost is not None:
            out["repertory.cost"] = response.cost
        if content_captured():
            out["gen_ai.output.messages"] = output_messages(message, finish)
        self._span.set_attributes(out)  # one call: each takes the span's lock

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        context = otel_context()
        try:
            if exc is not None and not _cancelled(exc):
                _fail(self._span, exc)
        finally:
            context.detach(self._attached)
            self._span.end()


def chat_span(model: Any, settings: ModelSettings, messages: Callable[[], list[ModelMessage]]) -> Any:
    """``chat {model}`` around one model request; ``.response(r)`` records what came back.

    ``messages`` is called only when content is captured (it builds the request's messages).
    """
    found = _ACTIVE.get()
    if found is _LOOKUP:
        found = tracer()
    if found is None:
        return NO_SPAN
    return _ChatSpan(found, model, settings, messages)


# -- execute_tool: one tool call ----------------------------------------------------------------------


class _ToolSpan:
    def __init__(self, found: Tracer, tool_name: str, call_id: str, args: dict[str, Any]) -> None:
        self._tracer = found
        self._name = tool_name
        self._call_id = call_id
        self._args = args

    def __enter__(self) -> _ToolSpan:
        context = otel_context()
        trace = otel_trace()
        assert trace is not None
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": self._name,
            "gen_ai.tool.call.id": self._call_id,
            "gen_ai.tool.type": "function",
        }
        if content_captured():
            attributes["gen_ai.tool.call.arguments"] = dumps(self._args)
        self._span = self._tracer.start_span(
            f"execute_tool {self._name}", kind=trace.SpanKind.INTERNAL, attributes=attributes
        )
        self._attached = context.attach(trace.set_span_in_context(self._span))
        return self

    def outcome(self, result: ToolResultPart, error_type: str | None, suspended: bool) -> None:
        """Record the call's result: an error result fails the span with the exception's type."""
        trace = otel_trace()
        assert trace is not None
        span = self._span
        if result.is_error:
            kind = error_type or "_OTHER"
            span.set_attribute("error.type", kind)
            span.set_status(trace.Status(trace.StatusCode.ERROR, kind))
        if suspended:
            span.add_event("run.suspended", {"gen_ai.tool.call.id": self._call_id})
        if content_captured():
            span.set_attribute("gen_ai.tool.call.result", dumps(result.result))

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        context = otel_context()
        try:
            if exc is not None and not _cancelled(exc):
                _fail(self._span, exc)
        finally:
            context.detach(self._attached)
            self._span.end()


def tool_span(tool_name: str, call_id: str, args: dict[str, Any]) -> Any:
    """``execute_tool {tool}`` around one tool call; ``.outcome(result, error_type, suspended)`` records it."""
    found = _ACTIVE.get()
    if found is _LOOKUP:
        found = tracer()
    if found is None:
        return NO_SPAN
    return _ToolSpan(found, tool_name, call_id, args)


# -- turn: one message put into a session -------------------------------------------------------------


class _TurnSpan:
    def __init__(self, found: Tracer, record: SessionRecord, turn: TurnRecord, run: RunState | None) -> None:
        self._tracer = found
        self._record = record
        self._turn = turn
        self._run = run

    def __enter__(self) -> _NoSpan:
        context = otel_context()
        trace = otel_trace()
        assert trace is not None
        record, turn = self._record, self._turn
        sender = parse_traceparent(turn.traceparent)
        anchor = parse_traceparent(self._run.traceparent) if self._run is not None else None
        links: list[Link] = []
        # Explicit parents only: the mailbox worker's own context is whatever was current when it
        # was made (the first sender's), never this turn's.
        parent: SpanContext | None
        if anchor is not None:  # a turn re-driven after a restart continues its run's trace
            parent = anchor
            if sender is not None and sender.trace_id != anchor.trace_id:
                links.append(trace.Link(sender, {"repertory.link": "sender"}))
        elif record.lineage.kind == "spawned":
            parent = None
            if sender is not None:
                links.append(trace.Link(sender, {"repertory.link": "parent_session"}))
        else:
            parent = sender
        attributes: dict[str, Any] = {
            "gen_ai.agent.name": record.agent,
            "gen_ai.conversation.id": record.session_id,
            "repertory.session_id": record.session_id,
            "repertory.submission_id": turn.submission_id,
            "repertory.run_id": turn.run_id,
            "repertory.turn.kind": turn.kind,
            "repertory.lineage": record.lineage.kind,
        }
        if record.lineage.parent_id is not None:
            attributes["repertory.parent_session_id"] = record.lineage.parent_id
        root = context.Context()
        span = self._tracer.start_span(
            f"turn {record.agent}",
            context=root if parent is None else trace.set_span_in_context(trace.NonRecordingSpan(parent), root),
            kind=trace.SpanKind.INTERNAL,
            attributes=attributes,
            links=links,
        )
        self._span = span
        own = span.get_span_context()
        self._turn_token: Token[tuple[str, str] | None] | None = (
            _TURN.set((turn.run_id, format_traceparent(own))) if own.is_valid else None
        )
        self._attached = context.attach(trace.set_span_in_context(span))
        return NO_SPAN

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        context = otel_context()
        trace = otel_trace()
        assert trace is not None
        span, turn = self._span, self._turn
        try:
            # Cancelled here means the host is shutting down: the turn stays open and resumes later.
            span.set_attribute("repertory.turn.status", turn.status)
            if turn.status == "error" and turn.error is not None:
                kind = turn.error.type or "_OTHER"
                span.set_attribute("error.type", kind)
                span.set_status(trace.Status(trace.StatusCode.ERROR, kind))
            elif exc is not None and not _cancelled(exc):
                _fail(span, exc)
        finally:
            context.detach(self._attached)
            if self._turn_token is not None:
                _TURN.reset(self._turn_token)
            span.end()


def turn_span(record: SessionRecord, turn: TurnRecord, run: RunState | None = None) -> Any:
    """``turn {agent}`` around one turn of a session, parented to the span that sent it.

    ``run`` is the turn's stored run when a restarted host re-drives it (its anchor keeps the
    trace); a spawned session's turn starts a trace of its own, linked to the sender.
    """
    found = tracer()
    if found is None:
        return NO_SPAN
    return _TurnSpan(found, record, turn, run)
