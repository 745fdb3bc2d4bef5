"""OpenTelemetry spans for repertory, after the GenAI semantic conventions (extra ``otel``).

Set a tracer provider, as for any instrumented library, and every run is traced::

    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    trace.set_tracer_provider(TracerProvider(...))    # before or after `import repertory`

``invoke_agent {agent}`` for each drive of a run (``gen_ai.agent.name``, ``gen_ai.conversation.id``
= the thread id, ``repertory.run_id``, ``repertory.session_id``), ``chat {model}`` for each model
request (``gen_ai.request.model``, ``gen_ai.usage.*``, finish reasons, cost) and ``execute_tool
{tool}`` for each tool call (``gen_ai.tool.name``, ``gen_ai.tool.call.id``), under ``turn {agent}``
when a session's turn drives the run; ``approval {tool}`` spans cover the wait for a human. A run
keeps one trace id for its whole life: its trace context is stored with the run, so a resume, an
approval, a recovery after a crash or a Ray host's re-drive, in any process, continues it
(``repertory.tracing.spans`` draws the tree).

Content (prompts, replies, tool arguments and results) is recorded only after
``capture_content(True)``; resume tokens never are. Without a provider nothing is recorded and
nothing is imported: this package needs ``opentelemetry-api`` only once a provider is set, and
``configure_otlp`` (what ``repertory serve --otlp-endpoint`` calls) needs the ``otel`` extra.
"""

from repertory.tracing.asgi import TraceRequests
from repertory.tracing.content import capture_content, content_captured
from repertory.tracing.context import (
    current_traceparent,
    format_traceparent,
    in_caller_context,
    parse_traceparent,
    under_traceparent,
)
from repertory.tracing.setup import configure_from_env, configure_otlp, otlp_env, traces_url
from repertory.tracing.spans import DriveCause, chat_span, drive_span, tool_span, tracing_on, turn_span

__all__ = [
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
