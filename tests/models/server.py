"""A loopback server that speaks OpenAI's chat completions protocol (JSON and SSE), scripted per test.

Each test queues replies; each HTTP request takes the next one (a reply may also be a function
of the request, to act like a model reading the conversation). Replies can misbehave on purpose:
error statuses with ``Retry-After``, a stall, a malformed chunk, a stream cut off mid-way. It is an
asyncio server on the test's own loop, so a stall is an awaited event, never a sleep.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["JSONReply", "FakeOpenAI", "Request", "SSEReply", "Stall", "chunk", "completion", "tool_piece"]


@dataclass
class Request:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class JSONReply:
    """A whole JSON response (a non-streamed completion, or an error body)."""

    body: dict[str, Any]
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class SSEReply:
    """A streamed reply: each event is a chunk dict (sent as JSON) or a raw ``data:`` payload string.

    ``done`` ends with ``data: [DONE]``; ``cut`` drops the connection after the events without
    finishing the chunked body; ``stall`` stops sending after the events and never finishes.
    """

    events: list[dict[str, Any] | str]
    done: bool = True
    cut: bool = False
    stall: bool = False


@dataclass
class Stall:
    """Read the request and never answer."""


Reply = JSONReply | SSEReply | Stall
Script = Reply | Callable[[Request], Reply]


def chunk(
    content: str | None = None,
    *,
    reasoning: str | None = None,
    reasoning_field: str = "reasoning_content",
    tool_calls: list[dict[str, Any]] | None = None,
    finish: str | None = None,
    usage: dict[str, int] | None = None,
    model: str = "test-model",
    no_choices: bool = False,
) -> dict[str, Any]:
    """A ``chat.completion.chunk`` with one choice (or none, as the final usage chunk has)."""
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta[reasoning_field] = reasoning
    if tool_calls is not None:
        delta["tool_calls"] = tool_calls
    body: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model}
    body["choices"] = [] if no_choices else [{"index": 0, "delta": delta, "finish_reason": finish}]
    if usage is not None:
        body["usage"] = {
            "prompt_tokens": usage["prompt"],
            "completion_tokens": usage["completion"],
            "total_tokens": usage["prompt"] + usage["completion"],
        }
    return body


def tool_piece(index: int, *, id: str | None = None, name: str | None = None, args: str = "") -> dict[str, Any]:
    """One streamed piece of a tool call: the first carries id and name, later ones only argument text."""
    function: dict[str, Any] = {"arguments": args}
    if name is not None:
        function["name"] = name
    piece: dict[str, Any] = {"index": index, "function": function}
    if id is not None:
        piece.update(id=id, type="function")
    return piece


def completion(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    reasoning: str | None = None,
    usage: dict[str, int] | None = None,
    model: str = "test-model",
) -> dict[str, Any]:
    """A whole ``chat.completion`` (the non-streamed reply)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
    }
    if usage is not None:
        body["usage"] = {
            "prompt_tokens": usage["prompt"],
            "completion_tokens": usage["completion"],
            "total_tokens": usage["prompt"] + usage["completion"],
        }
    return body


class FakeOpenAI:
    """The scripted server. ``url`` is the base URL to give a model (it ends in ``/v1``)."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.script: deque[Script] = deque()
        self.problems: list[str] = []  # requests the script did not expect
        self._server: asyncio.Server | None = None
        self._stop = asyncio.Event()
        self._writers: set[asyncio.StreamWriter] = set()
        self.url = ""

    def add(self, *replies: Script) -> None:
        """Queue replies; each request takes the next one."""
        self.script.extend(replies)

    async def start(self, port: int = 0) -> FakeOpenAI:
        """Listen on ``port`` of the loopback interface (0: any free port)."""
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", port)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    async def close(self) -> None:
        self._stop.set()  # stalled replies return and close their connections
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for writer in list(self._writers):
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            request = await self._read(reader)
            if request is None:
                return
            self.requests.append(request)
            if not self.script:
                self.problems.append(f"unexpected request #{len(self.requests)}")
                await self._json(writer, JSONReply({"error": {"message": "script exhausted"}}, status=400))
                return
            step = self.script.popleft()
            reply = step(request) if callable(step) else step
            if isinstance(reply, Stall):
                await self._stop.wait()
            elif isinstance(reply, JSONReply):
                await self._json(writer, reply)
            else:
                await self._sse(writer, reply)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away (it timed out, or gave up on a broken stream)
        finally:
            self._writers.discard(writer)
            writer.close()
            try:
                await writer.wait_closed()
            except ConnectionError:
                pass

    async def _read(self, reader: asyncio.StreamReader) -> Request | None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        raw = await reader.readexactly(length) if length else b""
        return Request(method, path, headers, json.loads(raw) if raw else {})

    async def _json(self, writer: asyncio.StreamWriter, reply: JSONReply) -> None:
        data = json.dumps(reply.body).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in reply.headers.items())
        writer.write(
            f"HTTP/1.1 {reply.status} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
            f"Connection: close\r\n{extra}\r\n".encode()
            + data
        )
        await writer.drain()

    async def _sse(self, writer: asyncio.StreamWriter, reply: SSEReply) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
            b"Connection: close\r\n\r\n"
        )

        async def send(payload: str) -> None:
            data = f"data: {payload}\n\n".encode()
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
        if reply.done:
            await send("[DONE]")
        writer.write(b"0\r\n\r\n")
        await writer.drain()
