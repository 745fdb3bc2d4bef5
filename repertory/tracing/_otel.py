"""Guarded, lazy access to ``opentelemetry-api``: imported on first use, never by ``import repertory``.

The engine calls into ``repertory.tracing`` on every drive, model request and tool call, and it must
work, unchanged and as fast, where OpenTelemetry is not installed. ``anthropic`` depends on
``opentelemetry-api``, so the package being importable says nothing about whether the user wants
spans: only a tracer provider does (the user's own, or the one ``configure_otlp`` sets). So the
tracer is looked up from the global provider each time a drive or turn starts (a provider set after
``import repertory`` is seen at the next drive), and with no provider set the answer is ``None``
and nothing else happens.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

__all__ = ["INSTRUMENTATION", "otel_context", "otel_trace", "tracer"]

INSTRUMENTATION = "repertory"
"""The instrumentation scope name of every span repertory emits."""

_UNKNOWN = object()
_trace: object = _UNKNOWN  # the module opentelemetry.trace, or None when it is not installed
_context: ModuleType | None = None  # opentelemetry.context, imported with it
_cached: tuple[object, Tracer] | None = None  # (provider, its repertory tracer)


def otel_trace() -> ModuleType | None:
    """The ``opentelemetry.trace`` module, imported on the first call; ``None`` when it is not installed."""
    global _trace, _context
    if _trace is _UNKNOWN:
        try:
            import opentelemetry.context as context
            import opentelemetry.trace as module
        except ImportError:
            _trace = None
        else:
            _trace, _context = module, context
    return _trace if isinstance(_trace, ModuleType) else None


def otel_context() -> ModuleType:
    """The ``opentelemetry.context`` module; only for callers that already have ``otel_trace()``.

    Kept as a module reference, not imported in each span's ``__enter__``: an import statement per
    span was a measurable part of a traced step.
    """
    assert _context is not None, "otel_trace() first"
    return _context


def _version() -> str:
    try:
        return version("repertory")
    except PackageNotFoundError:  # a checkout that was never installed
        return "0"


def tracer() -> Tracer | None:
    """repertory's tracer from the provider set now, or ``None`` when no provider is set (nothing is recorded).

    The API's default provider is a proxy that records nothing until a real one is set, and a
    ``NoOpTracerProvider`` records nothing at all: both mean "tracing off". The tracer of a real
    provider is cached by the provider's identity (a provider can be set only once per process,
    but tests swap it).
    """
    global _cached
    trace = otel_trace()
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    cached = _cached
    if cached is not None and cached[0] is provider:
        return cached[1]
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    found: Tracer = provider.get_tracer(INSTRUMENTATION, _version())
    _cached = (provider, found)
    return found
