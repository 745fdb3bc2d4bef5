"""A loopback OTLP/HTTP collector: what another process exports, decoded, for the test to await.

Spans made in other processes (a child that is SIGKILLed, a Ray session host) travel the way they
do in production: the SDK's OTLP/HTTP exporter posts protobuf batches to ``/v1/traces``. This
collector is a minimal HTTP/1.1 server on the test's own event loop, so a test awaits the spans it
needs (``wait_for``) instead of polling.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = ["Collector", "GotSpan"]


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind is None:
        return None
    return getattr(v, kind)


def _attributes(kvs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    kv: KeyValue
    for kv in kvs:
        out[kv.key] = _value(kv.value)
    return out


@dataclass
class GotSpan:
    """One exported span, with ids as hex strings."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    attributes: dict[str, Any]
    resource: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    links: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    status_code: int = 0


class Collector:
    """``async with Collector() as c``: ``c.endpoint`` is the base URL, ``c.spans`` what arrived so far."""

    def __init__(self) -> None:
        self.spans: list[GotSpan] = []
        self._changed = asyncio.Condition()
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()
        self.endpoint = ""

    @property
    def traces_url(self) -> str:
        """The full ``/v1/traces`` URL (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``)."""
        return self.endpoint + "/v1/traces"

    def env(self) -> dict[str, str]:
        """Variables that make a process repertory starts export here, promptly."""
        return {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": self.traces_url, "OTEL_BSP_SCHEDULE_DELAY": "20"}

    async def __aenter__(self) -> Collector:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._connections):  # exporters keep their connections alive
            writer.close()
        await self._server.wait_closed()

    async def wait_for(self, predicate: Callable[[list[GotSpan]], bool], within: float = 60.0) -> list[GotSpan]:
        """Return the spans once ``predicate(spans)`` holds; ``TimeoutError`` (with what came) otherwise."""

        async def until() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: predicate(self.spans))

        try:
            await asyncio.wait_for(until(), within)
        except TimeoutError:
            got = [(s.name, s.attributes.get("repertory.drive.cause")) for s in self.spans]
            raise AssertionError(f"spans not received in {within} s; got {got}") from None
        return list(self.spans)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {
                    k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)
                }
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                if lines[0].split(" ")[1].endswith("/v1/traces"):
                    await self._take(body)
                    reply = ExportTraceServiceResponse().SerializeToString()
                    status = "200 OK"
                else:
                    reply, status = b"", "404 Not Found"
                writer.write(
                    f"HTTP/1.1 {status}\r\nContent-Type: application/x-protobuf\r\n"
                    f"Content-Length: {len(reply)}\r\n\r\n".encode()
                    + reply
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._connections.discard(writer)
            writer.close()

    async def _take(self, body: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        got: list[GotSpan] = []
        for rs in request.resource_spans:
            resource = _attributes(rs.resource.attributes)
            for ss in rs.scope_spans:
                for s in ss.spans:
                    got.append(
                        GotSpan(
                            name=s.name,
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_id=s.parent_span_id.hex() or None,
                            attributes=_attributes(s.attributes),
                            resource=resource,
                            events=[(e.name, _attributes(e.attributes)) for e in s.events],
                            links=[(lk.trace_id.hex(), lk.span_id.hex(), _attributes(lk.attributes)) for lk in s.links],
                            status_code=s.status.code,
                        )
                    )
        async with self._changed:
            self.spans.extend(got)
            self._changed.notify_all()
