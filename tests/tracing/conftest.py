"""Fixtures for the tracing tests: an SDK tracer provider with an in-memory exporter, per test.

The provider is set globally, as a user sets it, and taken away again after the test, so no other
test in the run is traced. The OpenTelemetry API allows one ``set_tracer_provider`` per process and
has no public way back; its own test utilities (``opentelemetry.test.globals_test``) reset the two
module globals below, and so does this fixture.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from repertory.tracing import capture_content


class Spans:
    """The spans finished so far in this test, and ways to find them."""

    def __init__(self, exporter: InMemorySpanExporter, provider: TracerProvider) -> None:
        self.exporter = exporter
        self.provider = provider
        self.tracer = provider.get_tracer("tests")

    @property
    def all(self) -> list[ReadableSpan]:
        """Every finished span, in the order they ended."""
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        """Finished spans whose name starts with ``prefix``."""
        return [s for s in self.all if s.name.startswith(prefix)]

    def one(self, prefix: str) -> ReadableSpan:
        """The one finished span whose name starts with ``prefix``."""
        found = self.named(prefix)
        assert len(found) == 1, [s.name for s in self.all]
        return found[0]


def reset_trace_globals() -> None:
    """Forget the global tracer provider (what ``opentelemetry.test.globals_test`` does)."""
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None


@pytest.fixture
def spans() -> Iterator[Spans]:
    """A global SDK tracer provider exporting to memory, synchronously, for this test only."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reset_trace_globals()
    trace.set_tracer_provider(provider)
    try:
        yield Spans(exporter, provider)
    finally:
        capture_content(False)
        provider.shutdown()
        reset_trace_globals()
