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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .server import FakeOpenAI, JSONReply, Request, SSEReply, Stall

__all__ = [
    "MODEL_VERSION",
    "BackgroundInteractions",
    "FakeGemini",
    "JSONReply",
    "Request",
    "SSEReply",
    "Stall",
    "Step",
    "api_error",
    "call",
    "call_step",
    "chunk",
    "interaction_events",
    "interaction_usage",
    "output_step",
    "reply",
    "sig",
    "text",
    "thought",
    "thought_step",
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


# -- the Interactions API in background mode ------------------------------------------------------------


@dataclass
class Step:
    """One step of an interaction: its whole form (as ``GET /interactions/{id}`` holds it) and its stream events."""

    whole: dict[str, Any]
    start: dict[str, Any]
    deltas: list[dict[str, Any]] = field(default_factory=list)


def output_step(*pieces: str) -> Step:
    """Text the model writes, streamed piece by piece."""
    whole = {"type": "model_output", "content": [{"type": "text", "text": "".join(pieces)}]}
    return Step(whole, {"type": "model_output"}, [{"type": "text", "text": p} for p in pieces])


def thought_step(*pieces: str, signature: str | None = None) -> Step:
    """A thought: its summary streamed, then its signature (base64)."""
    whole: dict[str, Any] = {"type": "thought", "summary": [{"type": "text", "text": "".join(pieces)}]}
    deltas: list[dict[str, Any]] = [{"type": "thought_summary", "content": {"type": "text", "text": p}} for p in pieces]
    if signature is not None:
        whole["signature"] = signature
        deltas.append({"type": "thought_signature", "signature": signature})
    return Step(whole, {"type": "thought"}, deltas)


def call_step(call_id: str, name: str, args: dict[str, Any]) -> Step:
    """A function call: its name and id at the start, its arguments as JSON text in a delta."""
    whole = {"type": "function_call", "id": call_id, "name": name, "arguments": args}
    start = {"type": "function_call", "id": call_id, "name": name, "arguments": {}}
    return Step(whole, start, [{"type": "arguments_delta", "arguments": json.dumps(args)}])


def interaction_usage(inp: int = 20, out: int = 30, *, thoughts: int = 3, cached: int = 4) -> dict[str, Any]:
    return {
        "total_input_tokens": inp,
        "total_output_tokens": out,
        "total_thought_tokens": thoughts,
        "total_cached_tokens": cached,
        "total_tokens": inp + out + thoughts,
    }


Answer = Callable[[dict[str, Any], str], list[Step]]
"""What the background server's model answers: the steps for a request body, given the new interaction's id."""


@dataclass
class _Interaction:
    """One background interaction: its whole event list, how much of it exists so far, and its state."""

    id: str
    steps: list[Step]
    planned: list[dict[str, Any]]
    usage: dict[str, Any]
    made: int = 0
    status: str = "in_progress"
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)


def interaction_events(interaction_id: str, steps: list[Step], usage_: dict[str, Any]) -> list[dict[str, Any]]:
    """The events of one interaction as Google's server streams them, each with its ``event_id``."""
    head = {"id": interaction_id, "object": "interaction", "model": MODEL_VERSION}
    made: list[dict[str, Any]] = [
        {"event_type": "interaction.created", "interaction": {**head, "status": "in_progress"}},
        {"event_type": "interaction.status_update", "interaction_id": interaction_id, "status": "in_progress"},
    ]
    for index, step in enumerate(steps):
        made.append({"event_type": "step.start", "index": index, "step": step.start})
        made.extend({"event_type": "step.delta", "index": index, "delta": d} for d in step.deltas)
        made.append({"event_type": "step.stop", "index": index})
    final = "requires_action" if any(s.whole["type"] == "function_call" for s in steps) else "completed"
    made.append({"event_type": "interaction.completed", "interaction": {**head, "status": final, "usage": usage_}})
    for n, event in enumerate(made):
        event["event_id"] = f"evt-{interaction_id}-{n:04d}"  # opaque to the client
    return made


class BackgroundInteractions(FakeGemini):
    """Background interactions generated server-side at ``pace`` seconds an event, readable again after any event.

    ``POST /{v}/interactions`` with ``background``, ``store`` and ``stream`` creates one and streams its
    events; ``GET /{v}/interactions/{id}?stream=true&last_event_id=e`` streams those after ``e`` (made so
    far, then the rest as they come); ``GET /{v}/interactions/{id}`` answers the interaction whole (its
    steps, status and usage); ``POST /{v}/interactions/{id}:cancel`` or ``/cancel`` stops it. Streams are
    ``event:``/``data:`` pairs ending with ``event: done`` / ``data: [DONE]``.
    """

    def __init__(self, answer: Answer, pace: float = 0.0) -> None:
        super().__init__()
        self.answer = answer
        self.pace = pace
        self.interactions: dict[str, _Interaction] = {}
        self.creates: list[dict[str, Any]] = []  # the bodies of POST /interactions
        self.reads: list[tuple[str, str | None]] = []  # (interaction id, last_event_id) of each GET stream
        self.gets: list[str] = []  # whole interactions fetched
        self.cancelled: list[str] = []
        self.cancel_seen = asyncio.Event()
        self.sent_deltas = 0  # text deltas written to readers
        self._sent = asyncio.Condition()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, port: int = 0) -> BackgroundInteractions:
        await super().start(port)
        return self

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await super().close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            request = await self._read(reader)
            if request is not None:
                self.requests.append(request)
                await self._route(request, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away
        finally:
            self._writers.discard(writer)
            writer.close()
            try:
                await writer.wait_closed()
            except ConnectionError:
                pass

    async def _route(self, request: Request, writer: asyncio.StreamWriter) -> None:
        url = urlsplit(request.path)
        query = parse_qs(url.query)
        parts = [p for p in url.path.split("/") if p][1:]  # the API version first
        if request.method == "POST" and parts == ["interactions"]:
            await self._create(request.body, writer)
            return
        if len(parts) < 2 or parts[0] != "interactions":
            self.problems.append(f"unexpected request {request.method} {request.path}")
            await self._json(writer, api_error(404, "NOT_FOUND", "not found"))
            return
        name = parts[1].removesuffix(":cancel")
        found = self.interactions.get(name)
        if found is None:
            await self._json(writer, api_error(404, "NOT_FOUND", f"Interaction {name} not found."))
        elif request.method == "POST" and (parts[1].endswith(":cancel") or parts[2:] == ["cancel"]):
            await self._cancel(found, writer)
        elif request.method == "GET" and query.get("stream") == ["true"]:
            after = query.get("last_event_id", [None])[0]
            self.reads.append((found.id, after))
            at = next((i + 1 for i, e in enumerate(found.planned) if e["event_id"] == after), 0)
            await self._stream(found, at, writer)
        elif request.method == "GET":
            self.gets.append(found.id)
            await self._json(writer, JSONReply(self._whole(found)))
        else:
            self.problems.append(f"unexpected request {request.method} {request.path}")
            await self._json(writer, api_error(404, "NOT_FOUND", "not found"))

    def _whole(self, found: _Interaction) -> dict[str, Any]:
        stopped = {e["index"] for e in found.planned[: found.made] if e["event_type"] == "step.stop"}
        return {
            "id": found.id,
            "object": "interaction",
            "model": MODEL_VERSION,
            "status": found.status,
            "steps": [s.whole for i, s in enumerate(found.steps) if i in stopped],
            "usage": found.usage,
        }

    async def _create(self, body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        self.creates.append(body)
        if not body.get("background") or not body.get("stream") or body.get("store") is False:
            self.problems.append(f"a create that is not a stored, streamed background interaction: {body!r:.200}")
        interaction_id = f"v1_int{len(self.creates)}"
        try:
            steps = self.answer(body, interaction_id)
        except ValueError as exc:
            self.problems.append(f"{interaction_id}: {exc}")
            await self._json(writer, api_error(400, "INVALID_ARGUMENT", str(exc)))
            return
        usage_ = interaction_usage()
        found = _Interaction(interaction_id, steps, interaction_events(interaction_id, steps, usage_), usage_)
        self.interactions[interaction_id] = found
        task = asyncio.get_running_loop().create_task(self._generate(found))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        await self._stream(found, 0, writer)

    async def _generate(self, found: _Interaction) -> None:
        """Make the interaction's events one by one, whoever reads them (the point of background mode)."""
        while found.made < len(found.planned) and found.status == "in_progress":
            if self.pace:
                await asyncio.sleep(self.pace)  # the model's pace of generation
            async with found.changed:
                found.made += 1
                if found.made == len(found.planned):
                    found.status = found.planned[-1]["interaction"]["status"]
                found.changed.notify_all()

    async def _cancel(self, found: _Interaction, writer: asyncio.StreamWriter) -> None:
        self.cancelled.append(found.id)
        self.cancel_seen.set()
        async with found.changed:
            if found.status == "in_progress":
                found.status = "cancelled"
                head = {"id": found.id, "object": "interaction", "model": MODEL_VERSION, "status": "cancelled"}
                ended = {"event_type": "interaction.completed", "interaction": head}
                ended["event_id"] = f"evt-{found.id}-cancelled"
                found.planned[found.made :] = [ended]
                found.made += 1
            found.changed.notify_all()
        await self._json(writer, JSONReply(self._whole(found)))

    async def _stream(self, found: _Interaction, at: int, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
            b"Connection: close\r\n\r\n"
        )

        async def send(kind: str, data: str) -> None:
            raw = f"event: {kind}\ndata: {data}\n\n".encode()
            writer.write(b"%x\r\n%s\r\n" % (len(raw), raw))
            await writer.drain()

        def more() -> bool:
            return found.made > at or found.status != "in_progress"

        while True:
            async with found.changed:
                await found.changed.wait_for(more)
                ready = found.planned[at : found.made]
                over = found.status != "in_progress"  # and everything made is in ready
            for event in ready:
                await send(event["event_type"], json.dumps(event))
                if event["event_type"] == "step.delta" and event["delta"]["type"] == "text":
                    async with self._sent:
                        self.sent_deltas += 1
                        self._sent.notify_all()
            at += len(ready)
            if over:
                break
        await send("done", "[DONE]")
        writer.write(b"0\r\n\r\n")
        await writer.drain()
