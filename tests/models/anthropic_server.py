"""A loopback server that speaks Anthropic's Messages API as its docs describe it, scripted per test.

``POST /v1/messages`` with ``"stream": true`` answers with the SSE event stream: every event is an
``event: <type>`` line and a ``data:`` line holding the JSON with the same ``type``; a stream is
``message_start`` (with usage), ``ping``, per content block a ``content_block_start``, its deltas
(``text_delta``, ``thinking_delta`` then ``signature_delta``, ``input_json_delta``) and a
``content_block_stop``, then ``message_delta`` (stop reason, cumulative usage) and
``message_stop``. An ``error`` event can come mid-stream. ``POST /v1/messages/count_tokens``
answers ``{"input_tokens": n}``. Errors are JSON bodies ``{"type": "error", "error": {"type",
"message"}}`` with their status and, for 429 and 529, ``retry-after``.

It is the OpenAI fake's asyncio server with Anthropic's framing (so stalls are awaited events,
never sleeps); replies queue in order, and a reply may be a function of the request.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from .server import FakeOpenAI, JSONReply, Request, SSEReply, Stall

__all__ = [
    "FakeAnthropic",
    "JSONReply",
    "Request",
    "SSEReply",
    "Stall",
    "api_error",
    "error_event",
    "message_delta",
    "message_start",
    "ping",
    "raw",
    "redacted_block",
    "reply",
    "text_block",
    "thinking_block",
    "tool_block",
]

MODEL = "claude-test-4-5-20250101"


def message_start(
    *, model: str = MODEL, input_tokens: int = 10, cache_read: int | None = None, cache_write: int | None = None
) -> dict[str, Any]:
    usage: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": 1}
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    if cache_write is not None:
        usage["cache_creation_input_tokens"] = cache_write
    return {
        "type": "message_start",
        "message": {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": model,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        },
    }


def ping() -> dict[str, Any]:
    return {"type": "ping"}


def _start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def _end(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def text_block(index: int, *pieces: str) -> list[dict[str, Any]]:
    return [
        _start(index, {"type": "text", "text": ""}),
        *[_delta(index, {"type": "text_delta", "text": p}) for p in pieces],
        _end(index),
    ]


def thinking_block(index: int, *pieces: str, signature: str = "sig-1") -> list[dict[str, Any]]:
    return [
        _start(index, {"type": "thinking", "thinking": "", "signature": ""}),
        *[_delta(index, {"type": "thinking_delta", "thinking": p}) for p in pieces],
        _delta(index, {"type": "signature_delta", "signature": signature}),
        _end(index),
    ]


def redacted_block(index: int, data: str) -> list[dict[str, Any]]:
    return [_start(index, {"type": "redacted_thinking", "data": data}), _end(index)]


def tool_block(index: int, id: str, name: str, *json_pieces: str) -> list[dict[str, Any]]:
    return [
        _start(index, {"type": "tool_use", "id": id, "name": name, "input": {}}),
        *[_delta(index, {"type": "input_json_delta", "partial_json": p}) for p in json_pieces],
        _end(index),
    ]


def message_delta(stop_reason: str | None = "end_turn", output_tokens: int = 5, **usage: int) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens, **usage},
    }


def error_event(kind: str = "overloaded_error", message: str = "Overloaded") -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def raw(event: str, data: str) -> str:
    """An SSE frame sent exactly as given (for malformed data)."""
    return f"event: {event}\ndata: {data}"


def reply(
    *blocks: list[dict[str, Any]],
    stop_reason: str | None = "end_turn",
    input_tokens: int = 10,
    output_tokens: int = 5,
    cache_read: int | None = None,
    cache_write: int | None = None,
    model: str = MODEL,
) -> SSEReply:
    """A whole, well-formed stream holding ``blocks`` (each from ``text_block`` and friends)."""
    events: list[dict[str, Any] | str] = [
        message_start(model=model, input_tokens=input_tokens, cache_read=cache_read, cache_write=cache_write),
        ping(),
    ]
    for block in blocks:
        events.extend(block)
    events += [message_delta(stop_reason, output_tokens), {"type": "message_stop"}]
    return SSEReply(events)


def api_error(status: int, kind: str, message: str, retry_after: str | None = None) -> JSONReply:
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    return JSONReply({"type": "error", "error": {"type": kind, "message": message}}, status=status, headers=headers)


class FakeAnthropic(FakeOpenAI):
    """The scripted Messages API server. ``url`` is the base URL to give a model (no ``/v1``: the SDK adds it)."""

    async def start(self, port: int = 0) -> FakeAnthropic:
        await super().start(port)
        self.url = self.url.removesuffix("/v1")
        return self

    async def _sse(self, writer: asyncio.StreamWriter, reply: SSEReply) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
            b"request-id: req_01\r\nConnection: close\r\n\r\n"
        )

        async def send(frame: str) -> None:
            data = f"{frame}\n\n".encode()
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await writer.drain()

        for event in reply.events:
            await send(event if isinstance(event, str) else raw(str(event["type"]), json.dumps(event)))
        if reply.cut:
            writer.transport.abort()  # the connection drops mid-body: no terminating chunk
            return
        if reply.stall:
            await self._stop.wait()
            return
        writer.write(b"0\r\n\r\n")
        await writer.drain()
