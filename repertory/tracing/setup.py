"""Exporting spans over OTLP/HTTP from the processes repertory starts itself.

A library must not configure telemetry for its user: in your own program you set a tracer provider
(with whatever exporter you use) and repertory's spans join it. ``repertory serve``, ``repertory demo``
and Ray session hosts are programs repertory runs, so they configure one: an OTLP/HTTP exporter to
``--otlp-endpoint`` or to the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` variables. These need the ``otel`` extra (SDK and exporter);
the rest of ``repertory.tracing`` needs only the API, and nothing at all without a provider.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from repertory._extras import require
from repertory.errors import MissingExtra

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

__all__ = ["configure_from_env", "configure_otlp", "otlp_env", "traces_url"]

_log = logging.getLogger("repertory.tracing")
_ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def traces_url(endpoint: str) -> str:
    """The traces URL of an OTLP/HTTP ``endpoint``: ``http://host:4318`` gets ``/v1/traces`` appended.

    The same rule as ``OTEL_EXPORTER_OTLP_ENDPOINT``; a URL that already ends in ``/v1/traces`` is
    kept. Anything but an ``http(s)://host`` URL raises ``ValueError``.
    """
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"an OTLP/HTTP endpoint is an http:// or https:// URL, not {endpoint!r}")
    if parts.path.rstrip("/").endswith("/v1/traces"):
        return endpoint
    return endpoint.rstrip("/") + "/v1/traces"


def configure_otlp(endpoint: str | None = None, *, service_name: str | None = None) -> TracerProvider | None:
    """Set a global tracer provider that batches spans to an OTLP/HTTP collector; returns it.

    ``endpoint`` is the collector's base URL (``http://localhost:4318``, see ``traces_url``); without
    it the exporter reads the standard ``OTEL_EXPORTER_OTLP_*`` variables. The service is named
    ``service_name``, else ``OTEL_SERVICE_NAME``, else ``repertory``; ``process.pid`` says which
    process (which Ray host) a span came from. A provider already set is left alone (``None`` is
    returned): the program's own telemetry setup wins. Needs the ``otel`` extra.
    """
    require("repertory.tracing.configure_otlp", "otel")
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    url = None if endpoint is None else traces_url(endpoint)
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return None
    attributes: dict[str, str | int] = {"process.pid": os.getpid()}
    if service_name is not None:
        attributes["service.name"] = service_name
    resource = Resource.create(attributes)
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "repertory"}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url)))
    trace.set_tracer_provider(provider)
    return provider


def configure_from_env() -> TracerProvider | None:
    """``configure_otlp()`` when an ``OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT`` variable is set, else nothing.

    ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none`` turn it off. Without the ``otel``
    extra it logs a warning and returns ``None``: a Ray host must start even when its tracing cannot.
    """
    env = os.environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    if not any(env.get(name) for name in _ENDPOINT_VARS):
        return None
    try:
        return configure_otlp()
    except MissingExtra as exc:
        _log.warning("OTEL_EXPORTER_OTLP_ENDPOINT is set but spans cannot be exported: %s", exc)
        return None


def otlp_env(endpoint: str | None = None) -> dict[str, str]:
    """The ``OTEL_*`` variables of this process, with ``endpoint`` as the traces URL, for processes it starts.

    Ray session hosts are other processes: handed these (``host_options={"runtime_env": {"env_vars":
    otlp_env(url)}}``), each exports its own spans to the same collector.
    """
    out = {name: value for name, value in os.environ.items() if name.startswith("OTEL_")}
    if endpoint is not None:
        out["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = traces_url(endpoint)
    return out
