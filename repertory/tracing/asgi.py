"""``TraceRequests``: a server span per HTTP request, continuing the caller's ``traceparent``.

A client that sends W3C trace context (``traceparent``, ``tracestate``, ``baggage``: whatever the
configured propagators read) gets its trace continued by the server: the request's span is a
child of the caller's, and a turn queued or a decision made while handling it is parented to (or
linked to) that span. Plain ASGI, so it wraps any app and needs no web framework; without a
tracer provider every request passes straight through.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from repertory.tracing._otel import otel_trace, tracer

__all__ = ["TraceRequests"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]  # any ASGI app, whatever its own annotations


class TraceRequests:
    """ASGI middleware: ``{method} {route}`` SERVER spans, parented to the incoming trace context.

    Records the method, the route template, the path and the response status; never headers,
    query strings or bodies (they carry API keys and content).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = tracer() if scope.get("type") == "http" else None
        if found is None:
            await self.app(scope, receive, send)
            return
        from opentelemetry import context, propagate

        trace = otel_trace()
        assert trace is not None
        carrier = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or ()}
        method = str(scope.get("method", "GET"))
        span = found.start_span(
            method,
            context=propagate.extract(carrier),
            kind=trace.SpanKind.SERVER,
            attributes={
                "http.request.method": method,
                "url.path": str(scope.get("path", "")),
                "url.scheme": str(scope.get("scheme", "http")),
            },
        )
        status: list[int] = []

        async def send_traced(message: Message) -> None:
            if message.get("type") == "http.response.start":
                status.append(int(message.get("status", 0)))
                span.set_attribute("http.response.status_code", status[-1])
            await send(message)

        token = context.attach(trace.set_span_in_context(span))
        try:
            await self.app(scope, receive, send_traced)
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__name__)
            span.set_status(trace.Status(trace.StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            template = getattr(scope.get("route"), "path", None)
            if isinstance(template, str):
                span.set_attribute("http.route", template)
                span.update_name(f"{method} {template}")
            if status and status[-1] >= 500:
                span.set_attribute("error.type", str(status[-1]))
                span.set_status(trace.Status(trace.StatusCode.ERROR))
            context.detach(token)
            span.end()
