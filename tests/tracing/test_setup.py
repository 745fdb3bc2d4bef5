"""The exporter set-up of repertory's own processes, and the ``traceparent`` strings runs keep."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from opentelemetry import trace

from repertory.tracing import (
    configure_from_env,
    configure_otlp,
    current_traceparent,
    format_traceparent,
    otlp_env,
    parse_traceparent,
    traces_url,
    tracing_on,
    under_traceparent,
)
from tests.tracing.collector import Collector
from tests.tracing.conftest import reset_trace_globals


@pytest.fixture
def no_otel_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """No OTEL_* variables, and no global provider before or after the test."""
    import os

    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    reset_trace_globals()
    yield monkeypatch
    provider = trace.get_tracer_provider()
    shutdown = getattr(provider, "shutdown", None)
    if shutdown is not None:
        shutdown()
    reset_trace_globals()


def test_traceparent_round_trips_and_bad_ones_are_ignored() -> None:
    value = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    ctx = parse_traceparent(value)
    assert ctx is not None and ctx.is_remote and ctx.trace_flags.sampled
    assert format_traceparent(ctx) == value
    for bad in (None, "", "junk", "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                "00-00000000000000000000000000000000-b7ad6b7169203331-01",
                "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
                "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01"):  # fmt: skip
        assert parse_traceparent(bad) is None, bad


def test_under_traceparent_makes_that_span_current_for_the_block_only() -> None:
    outer, inner = (
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "00-1bf7651916cd43dd8448eb211c80319c-c7ad6b7169203331-00",
    )
    assert current_traceparent() is None
    with under_traceparent(outer):
        assert current_traceparent() == outer
        with under_traceparent(inner):
            assert current_traceparent() == inner
        with under_traceparent(None), under_traceparent("junk"):  # nothing to carry: the block runs as it is
            assert current_traceparent() == outer
        assert not trace.get_current_span().is_recording()  # a parent to record under, not a span of ours
    assert current_traceparent() is None


def test_traces_url_follows_the_otlp_endpoint_rule() -> None:
    assert traces_url("http://collector:4318") == "http://collector:4318/v1/traces"
    assert traces_url("https://otlp.example/base/") == "https://otlp.example/base/v1/traces"
    assert traces_url("http://collector:4318/v1/traces") == "http://collector:4318/v1/traces"
    for bad in ("collector:4318", "grpc://collector:4317", "http://"):
        with pytest.raises(ValueError, match="http:// or https:// URL"):
            traces_url(bad)


def test_otlp_env_hands_on_this_process_settings(no_otel_env: pytest.MonkeyPatch) -> None:
    no_otel_env.setenv("OTEL_SERVICE_NAME", "svc")
    no_otel_env.setenv("PATH_NOT_OTEL", "x")
    assert otlp_env() == {"OTEL_SERVICE_NAME": "svc"}
    assert otlp_env("http://c:4318") == {
        "OTEL_SERVICE_NAME": "svc",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces",
    }


def test_configure_from_env_does_nothing_unless_an_endpoint_is_set(no_otel_env: pytest.MonkeyPatch) -> None:
    assert configure_from_env() is None and not tracing_on()
    no_otel_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    no_otel_env.setenv("OTEL_SDK_DISABLED", "true")
    assert configure_from_env() is None
    no_otel_env.delenv("OTEL_SDK_DISABLED")
    no_otel_env.setenv("OTEL_TRACES_EXPORTER", "none")
    assert configure_from_env() is None and not tracing_on()


async def test_configure_otlp_exports_and_leaves_a_provider_already_set(no_otel_env: pytest.MonkeyPatch) -> None:
    async with Collector() as collector:
        no_otel_env.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", collector.traces_url)
        no_otel_env.setenv("OTEL_SERVICE_NAME", "billing")
        provider = configure_from_env()
        assert provider is not None and tracing_on()
        assert configure_otlp("http://127.0.0.1:9") is None  # the program's provider wins
        with trace.get_tracer("t").start_as_current_span("hello"):
            pass
        await asyncio.to_thread(provider.force_flush)  # the collector runs on this loop: do not block it
        [span] = await collector.wait_for(lambda got: bool(got))
    assert span.name == "hello" and span.resource["service.name"] == "billing"
    assert isinstance(span.resource["process.pid"], int)


def test_the_package_names_are_sorted_and_pinned() -> None:
    import repertory.tracing as tracing

    assert tracing.__all__ == sorted(tracing.__all__)
    assert tracing.__all__ == [
        "DriveCause",
        "TraceRequests",
        "capture_content",
        "chat_span",
        "configure_from_env",
        "configure_otlp",
        "content_captured",
        "current_traceparent",
        "drive_span",
        "format_traceparent",
        "in_caller_context",
        "otlp_env",
        "parse_traceparent",
        "tool_span",
        "traces_url",
        "tracing_on",
        "turn_span",
        "under_traceparent",
    ]
    # DriveCause is a Literal alias: its docstring is in the source, not on the object.
    assert all(getattr(tracing, name).__doc__ for name in tracing.__all__ if name != "DriveCause")
