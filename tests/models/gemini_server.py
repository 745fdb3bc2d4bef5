"""A loopback server that speaks the Gemini API's REST format as Google documents it, scripted per test.

``POST /{version}/models/{model}:streamGenerateContent?alt=sse`` (SDK 3.x asks for ``v1``) answers
with server-sent events, each ``data: <GenerateContentResponse JSON>`` and a blank line
(``\\r\\n\\r\\n``, as Google's server frames them): ``candidates[0].content`` with
``role: "model"`` and ``parts`` (``text``,
``thought: true`` for thought summaries, ``functionCall`` with ``name``, ``args`` and ``id``, and a
base64 ``thoughtSignature`` on the part it belongs to), ``finishReason`` and ``safetyRatings`` on
the last chunk, ``usageMetadata`` (``promptTokenCount``, ``cachedContentTokenCount``,
``candidatesTokenCount``, ``thoughtsTokenCount``, ``totalTokenCount``) and ``modelVersion``. A
blocked prompt is a chunk with ``promptFeedback.blockReason`` and no candidates. Errors are JSON
bodies ``{"error": {"code", "message", "status", "details"}}``, a 429's details holding a
``google.rpc.RetryInfo`` with its ``retryDelay``; an error can also come as an event mid-stream.

It is the OpenAI fake's asyncio server with Gemini's framing (so stalls are awaited events, never
sleeps); replies queue in order, and a reply may be a function of the request.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from .server import FakeOpenAI, JSONReply, Request, SSEReply, Stall

__all__ = [
    "MODEL_VERSION",
    "FakeGemini",
    "JSONReply",
    "Request",
    "SSEReply",
    "Stall",
    "api_error",
    "call",
    "chunk",
    "reply",
    "sig",
    "text",
    "thought",
    "usage",
]

MODEL_VERSION = "gemini-test-001"


def sig(name: str) -> str:
    """A thought signature as the API sends it: opaque bytes, base64 in the JSON."""
    return base64.b64encode(f"signature:{name}".encode()).decode()


def text(value: str, *, signature: str | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"text": value}
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def thought(value: str, *, signature: str | None = None) -> dict[str, Any]:
    return {**text(value, signature=signature), "thought": True}


def call(name: str, args: dict[str, Any], *, id: str | None = None, signature: str | None = None) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name, "args": args}
    if id is not None:
        function["id"] = id
    part: dict[str, Any] = {"functionCall": function}
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def usage(
    prompt: int = 10, candidates: int = 5, *, thoughts: int | None = None, cached: int | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"promptTokenCount": prompt, "candidatesTokenCount": candidates}
    if thoughts is not None:
        meta["thoughtsTokenCount"] = thoughts
    if cached is not None:
        meta["cachedContentTokenCount"] = cached
    meta["totalTokenCount"] = prompt + candidates + (thoughts or 0)
    return meta


def chunk(
    *parts: dict[str, Any],
    finish: str | None = None,
    usage_metadata: dict[str, Any] | None = None,
    safety: list[dict[str, Any]] | None = None,
    finish_message: str | None = None,
) -> dict[str, Any]:
    """One streamed ``GenerateContentResponse`` with one candidate."""
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    if safety is not None:
        candidate["safetyRatings"] = safety
    if finish_message is not None:
        candidate["finishMessage"] = finish_message
    body: dict[str, Any] = {"candidates": [candidate], "modelVersion": MODEL_VERSION, "responseId": "resp-1"}
    if usage_metadata is not None:
        body["usageMetadata"] = usage_metadata
    return body


def reply(*parts: dict[str, Any], finish: str = "STOP", usage_metadata: dict[str, Any] | None = None) -> SSEReply:
    """A whole stream: one chunk per part, the last with the finish reason and the usage."""
    meta = usage_metadata or usage()
    if not parts:
        return SSEReply([chunk(text(""), finish=finish, usage_metadata=meta)])
    events: list[dict[str, Any] | str] = [chunk(p) for p in parts[:-1]]
    events.append(chunk(parts[-1], finish=finish, usage_metadata=meta))
    return SSEReply(events)


def api_error(
    code: int, status: str, message: str, *, retry_delay: str | None = None, retry_after: str | None = None
) -> JSONReply:
    details: list[dict[str, Any]] = []
    if retry_delay is not None:
        details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay})
    body = {"error": {"code": code, "message": message, "status": status, "details": details}}
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    return JSONReply(body, status=code, headers=headers)


class FakeGemini(FakeOpenAI):
    """The scripted Gemini API server. ``url`` is the base URL to give a model (the SDK adds the API version)."""

    async def start(self, port: int = 0) -> FakeGemini:
        await super().start(port)
        self.url = self.url.removesuffix("/v1")
        return self

    async def _sse(self, writer: asyncio.StreamWriter, reply: SSEReply) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
            b"Connection: close\r\n\r\n"
        )

        async def send(payload: str) -> None:
            data = f"data: {payload}\r\n\r\n".encode()
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await writer.drain()

        for event in reply.events:
            await send(event if isinstance(event, str) else json.dumps(event))
        if reply.cut:
            writer.transport.abort()  # the connection drops mid-body: no terminating chunk
            return
        if reply.stall:
            await self._stop.wait()
            return
        writer.write(b"0\r\n\r\n")
        await writer.drain()
