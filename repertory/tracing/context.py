"""Trace context that outlives a process: W3C ``traceparent`` strings, and carrying a caller's context.

A run's spans are spread over time and processes (a drive, a suspension, an approval hours later in
another process, a recovery after a crash), so the context that ties them into one trace is
persisted as a ``traceparent`` string (``RunState.traceparent``, ``TurnRecord.traceparent``) and
turned back into a remote parent when the next drive starts.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

from repertory.tracing._otel import otel_context, otel_trace

if TYPE_CHECKING:
    from opentelemetry.trace import SpanContext

__all__ = ["current_traceparent", "format_traceparent", "in_caller_context", "parse_traceparent", "under_traceparent"]

_S = TypeVar("_S")
_R = TypeVar("_R")
_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


def format_traceparent(ctx: SpanContext) -> str:
    """``ctx`` as a W3C ``traceparent`` (version 00): trace id, span id and the sampled flag."""
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags) & 0xFF:02x}"


def parse_traceparent(value: str | None) -> SpanContext | None:
    """A remote ``SpanContext`` from a ``traceparent``; ``None`` for ``None``, a malformed value or no API.

    A malformed value is ignored rather than raised: a trace is worth less than the run it describes.
    """
    trace = otel_trace()
    if trace is None or not value:
        return None
    match = _TRACEPARENT.fullmatch(value)
    if match is None:
        return None
    trace_id, span_id = int(match[1], 16), int(match[2], 16)
    if trace_id == 0 or span_id == 0:
        return None
    ctx: SpanContext = trace.SpanContext(
        trace_id=trace_id, span_id=span_id, is_remote=True, trace_flags=trace.TraceFlags(int(match[3], 16))
    )
    return ctx


def current_traceparent() -> str | None:
    """The ``traceparent`` of the span current here, or ``None`` (no span, or OpenTelemetry not installed).

    What a turn records when it is queued, so its span continues the sender's trace wherever and
    whenever it runs. Cheap without a provider: there is no current span then.
    """
    trace = otel_trace()
    if trace is None:
        return None
    ctx = trace.get_current_span().get_span_context()
    return format_traceparent(ctx) if ctx.is_valid else None


def in_caller_context(fn: Callable[[_S], Awaitable[_R]]) -> Callable[[_S], Awaitable[_R]]:
    """``fn``, to run later in the OpenTelemetry context current now (the caller's).

    A session's decisions run in its mailbox worker, a task made when the session first got work,
    whose context is whatever was current then. Wrapping a decision when it is posted makes its
    drive see the decider's span (an HTTP request, the user's own span) instead.
    """
    trace = otel_trace()
    if trace is None:
        return fn
    context = otel_context()
    captured = context.get_current()

    async def in_context(arg: _S) -> _R:
        token = context.attach(captured)
        try:
            return await fn(arg)
        finally:
            context.detach(token)

    return in_context


@contextlib.contextmanager
def under_traceparent(traceparent: str | None) -> Iterator[None]:
    """Run the block with ``traceparent``'s span current, as if the caller's span were here.

    A Ray session host serves calls from other processes, where the caller's span lives: the client
    sends its ``current_traceparent()`` with the call and the host runs the call under it, so a turn
    queued there records the caller's span as its parent (``TurnRecord.traceparent``) and a decision
    links to it, as they do in the caller's own process. ``None``, a malformed value or no
    OpenTelemetry API: the block runs as it is.
    """
    ctx = parse_traceparent(traceparent)  # None without the API
    trace = otel_trace()
    if ctx is None or trace is None:
        yield
        return
    context = otel_context()
    token = context.attach(trace.set_span_in_context(trace.NonRecordingSpan(ctx)))
    try:
        yield
    finally:
        context.detach(token)
