"""Loopback servers that speak OpenAI's Responses API as its documentation describes it.

``POST /v1/responses`` with ``"stream": true`` answers with server-sent events, each an ``event:``
line and a ``data:`` line holding the JSON of the same ``type``, numbered by ``sequence_number``
from 0: ``response.created``, ``response.in_progress``, then per output item
``response.output_item.added``, its deltas (``response.output_text.delta`` inside a
``response.content_part.added``/``done`` pair, ``response.reasoning_summary_text.delta`` inside a
``response.reasoning_summary_part.added``/``done`` pair, ``response.function_call_arguments.delta``)
and their ``done`` events, ``response.output_item.done`` with the whole item; last a terminal event,
``response.completed`` (or ``response.incomplete``, ``response.failed``) with the whole response,
its output and its ``usage``. An ``error`` event can come instead. Errors before a stream are JSON
``{"error": {"message", "type", "code"}}`` with their status.

``FakeResponses`` is scripted, as the chat completions fake (``server.py``) is: each request takes
the next queued reply. ``BackgroundResponses`` plays background mode for real: a response created
with ``"background": true`` is generated server-side at its own pace whether anyone reads it or not,
``GET /v1/responses/{id}?stream=true&starting_after=n`` streams its events after ``n`` (those
generated so far, then the rest as they come), ``POST /v1/responses/{id}/cancel`` stops it. Run as
``python -m tests.models.responses_server`` it serves in its own process (for the SIGKILL test) and
prints its URL; ``GET /stats`` says what it saw and ``GET /wait?deltas=n`` answers once ``n`` more
text deltas were sent to a reader.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .server import FakeOpenAI, JSONReply, Request, SSEReply, Stall

__all__ = [
    "MODEL",
    "BackgroundResponses",
    "FakeResponses",
    "Item",
    "JSONReply",
    "Request",
    "SSEReply",
    "Stall",
    "api_error",
    "call",
    "events",
    "message",
    "reasoning",
    "refusal",
    "reply",
    "usage",
]

MODEL = "gpt-test-2025-01-01"


@dataclass
class Item:
    """One output item: its whole form (as ``output_item.done`` and the final response carry it) and its deltas."""

    whole: dict[str, Any]
    pieces: list[Any] = field(default_factory=list)


def message(*pieces: str, id: str = "msg_1") -> Item:
    text = "".join(pieces)
    whole = {
        "type": "message",
        "id": id,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    return Item(whole, list(pieces))


def refusal(text: str, id: str = "msg_1") -> Item:
    whole = {
        "type": "message",
        "id": id,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": text}],
    }
    return Item(whole, [])


def reasoning(*summary: list[str], encrypted: str | None = "enc-1", id: str = "rs_1") -> Item:
    """A reasoning item whose summary parts stream as the given pieces (none: no summary, as by default)."""
    whole: dict[str, Any] = {"type": "reasoning", "id": id, "summary": [], "status": "completed"}
    whole["summary"] = [{"type": "summary_text", "text": "".join(part)} for part in summary]
    if encrypted is not None:
        whole["encrypted_content"] = encrypted
    return Item(whole, [list(part) for part in summary])


def call(call_id: str, name: str, args: dict[str, Any], *, id: str | None = None) -> Item:
    arguments = json.dumps(args)
    whole = {
        "type": "function_call",
        "id": id or f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }
    half = len(arguments) // 2
    return Item(whole, [arguments[:half], arguments[half:]])


def usage(inp: int = 10, out: int = 5, *, cached: int = 0, reasoning_tokens: int = 0) -> dict[str, Any]:
    return {
        "input_tokens": inp,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "total_tokens": inp + out,
    }


def _response(response_id: str, status: str, output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": 1,
        "status": status,
        "model": extra.pop("model", MODEL),
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "error": None,
        "incomplete_details": None,
        **extra,
    }


def events(
    items: list[Item],
    *,
    response_id: str = "resp_1",
    status: str = "completed",
    usage_: dict[str, Any] | None = None,
    incomplete: str | None = None,
    model: str = MODEL,
    terminal: bool = True,
) -> list[dict[str, Any]]:
    """The whole documented event sequence of one response, numbered from 0."""
    out: list[dict[str, Any]] = []

    def emit(kind: str, **data: Any) -> None:
        out.append({"type": kind, "sequence_number": len(out), **data})

    emit("response.created", response=_response(response_id, "in_progress", [], model=model))
    emit("response.in_progress", response=_response(response_id, "in_progress", [], model=model))
    for index, item in enumerate(items):
        whole, kind = item.whole, item.whole["type"]
        item_id = whole["id"]
        start = {**whole, "status": "in_progress"}
        if kind == "message":
            start["content"] = []
        elif kind == "reasoning":
            start["summary"] = []
        elif kind == "function_call":
            start["arguments"] = ""
        emit("response.output_item.added", output_index=index, item=start)
        if kind == "message":
            for c, content in enumerate(whole["content"]):
                empty = {**content, "text": ""} if content["type"] == "output_text" else {**content, "refusal": ""}
                emit("response.content_part.added", item_id=item_id, output_index=index, content_index=c, part=empty)
                if content["type"] == "output_text":
                    for piece in item.pieces:
                        emit(
                            "response.output_text.delta",
                            item_id=item_id,
                            output_index=index,
                            content_index=c,
                            delta=piece,
                            logprobs=[],
                        )
                    emit(
                        "response.output_text.done",
                        item_id=item_id,
                        output_index=index,
                        content_index=c,
                        text=content["text"],
                        logprobs=[],
                    )
                else:
                    emit(
                        "response.refusal.delta",
                        item_id=item_id,
                        output_index=index,
                        content_index=c,
                        delta=content["refusal"],
                    )
                    emit(
                        "response.refusal.done",
                        item_id=item_id,
                        output_index=index,
                        content_index=c,
                        refusal=content["refusal"],
                    )
                emit("response.content_part.done", item_id=item_id, output_index=index, content_index=c, part=content)
        elif kind == "reasoning":
            for s, part in enumerate(item.pieces):
                text = "".join(part)
                empty = {"type": "summary_text", "text": ""}
                emit(
                    "response.reasoning_summary_part.added",
                    item_id=item_id,
                    output_index=index,
                    summary_index=s,
                    part=empty,
                )
                for piece in part:
                    emit(
                        "response.reasoning_summary_text.delta",
                        item_id=item_id,
                        output_index=index,
                        summary_index=s,
                        delta=piece,
                    )
                emit(
                    "response.reasoning_summary_text.done",
                    item_id=item_id,
                    output_index=index,
                    summary_index=s,
                    text=text,
                )
                done = {"type": "summary_text", "text": text}
                emit(
                    "response.reasoning_summary_part.done",
                    item_id=item_id,
                    output_index=index,
                    summary_index=s,
                    part=done,
                )
        elif kind == "function_call":
            for piece in item.pieces:
                emit("response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=piece)
            emit(
                "response.function_call_arguments.done",
                item_id=item_id,
                output_index=index,
                arguments=whole["arguments"],
            )
        emit("response.output_item.done", output_index=index, item=whole)
    if terminal:
        final = _response(
            response_id,
            status,
            [i.whole for i in items],
            model=model,
            usage=usage_ if usage_ is not None else usage(),
        )
        if incomplete is not None:
            final["incomplete_details"] = {"reason": incomplete}
        kind = {"completed": "response.completed", "incomplete": "response.incomplete"}.get(status, "response.failed")
        emit(kind, response=final)
    return out


def reply(*items: Item, **options: Any) -> SSEReply:
    """A whole, well-formed stream of ``items`` (``events``' options: usage_, status, incomplete...)."""
    return SSEReply(list(events(list(items), **options)), done=False)


def api_error(
    status: int, message: str, *, kind: str = "invalid_request_error", retry_after: str | None = None
) -> JSONReply:
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return JSONReply(body, status=status, headers=headers)


def _frame(event: dict[str, Any] | str) -> bytes:
    if isinstance(event, str):  # sent as given (malformed data)
        data = f"event: response.output_text.delta\ndata: {event}\n\n"
    else:
        data = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
    raw = data.encode()
    return b"%x\r\n%s\r\n" % (len(raw), raw)


class FakeResponses(FakeOpenAI):
    """The scripted Responses server: each request (create, retrieve, cancel, count) takes the next reply."""

    async def start(self, port: int = 0) -> FakeResponses:
        await super().start(port)
        return self

    async def _sse(self, writer: asyncio.StreamWriter, reply: SSEReply) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
            b"x-request-id: req_1\r\nConnection: close\r\n\r\n"
        )
        for event in reply.events:
            writer.write(_frame(event))
            await writer.drain()
        if reply.cut:
            writer.transport.abort()  # the connection drops mid-body: no terminating chunk
            return
        if reply.stall:
            await self._stop.wait()
            return
        writer.write(b"0\r\n\r\n")
        await writer.drain()


Answer = Callable[[dict[str, Any], str], list[Item]]
"""What a background server answers: the output items for a request body, given the new response's id."""


@dataclass
class _Background:
    """One background response: its whole event list, how much of it exists so far, and its state."""

    id: str
    planned: list[dict[str, Any]]
    made: int = 0
    status: str = "in_progress"
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)


class BackgroundResponses(FakeOpenAI):
    """Background mode: responses generated server-side at ``pace`` seconds an event, readable again from any event."""

    def __init__(self, answer: Answer, pace: float = 0.0) -> None:
        super().__init__()
        self.answer = answer
        self.pace = pace
        self.responses: dict[str, _Background] = {}
        self.posts: list[dict[str, Any]] = []  # the bodies of POST /responses
        self.reads: list[tuple[str, int]] = []  # (response id, starting_after) of each GET stream
        self.cancelled: list[str] = []
        self.cancel_seen = asyncio.Event()
        self.texts: dict[str, str] = {}  # what each response's reply says, as generated
        self.sent_deltas = 0  # text deltas written to readers
        self._sent = asyncio.Condition()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, port: int = 0) -> BackgroundResponses:
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
            pass
        finally:
            self._writers.discard(writer)
            writer.close()
            try:
                await writer.wait_closed()
            except ConnectionError:
                pass

    async def _route(self, request: Request, writer: asyncio.StreamWriter) -> None:
        url = urlsplit(request.path)
        path, query = url.path.removeprefix("/v1"), parse_qs(url.query)
        parts = [p for p in path.split("/") if p]
        if request.method == "POST" and parts == ["responses"]:
            await self._create(request.body, writer)
        elif request.method == "GET" and len(parts) == 2 and parts[0] == "responses":
            found = self.responses.get(parts[1])
            if found is None:
                await self._json(writer, api_error(404, f"No response found with id '{parts[1]}'."))
                return
            after = int(query.get("starting_after", ["-1"])[0])
            self.reads.append((found.id, after))
            await self._stream(found, after, writer)
        elif request.method == "POST" and len(parts) == 3 and parts[0] == "responses" and parts[2] == "cancel":
            found = self.responses.get(parts[1])
            if found is None:
                await self._json(writer, api_error(404, f"No response found with id '{parts[1]}'."))
                return
            self.cancelled.append(found.id)
            self.cancel_seen.set()
            async with found.changed:
                if found.status == "in_progress":
                    found.status = "cancelled"
                found.changed.notify_all()
            await self._json(writer, JSONReply(_response(found.id, found.status, [])))
        elif request.method == "GET" and parts == ["stats"]:
            stats = {"posts": self.posts, "reads": self.reads, "cancelled": self.cancelled, "texts": self.texts}
            stats["problems"] = self.problems
            await self._json(writer, JSONReply(stats))
        elif request.method == "GET" and parts == ["wait"]:
            more = int(query.get("deltas", ["1"])[0])
            async with self._sent:
                target = self.sent_deltas + more
                await self._sent.wait_for(lambda: self.sent_deltas >= target)
            await self._json(writer, JSONReply({"sent": self.sent_deltas}))
        else:
            self.problems.append(f"unexpected request {request.method} {request.path}")
            await self._json(writer, api_error(404, "not found"))

    async def _create(self, body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        self.posts.append(body)
        if not body.get("background") or not body.get("stream") or body.get("store") is False:
            self.problems.append(f"a create that is not a stored, streamed background response: {body!r:.200}")
        response_id = f"resp_{len(self.posts)}"
        try:
            items = self.answer(body, response_id)
        except ValueError as exc:
            self.problems.append(f"{response_id}: {exc}")
            await self._json(writer, api_error(400, str(exc)))
            return
        self.texts[response_id] = "".join(
            c["text"] for i in items if i.whole["type"] == "message" for c in i.whole["content"]
        )
        planned = events(items, response_id=response_id, usage_=usage(20, 30, cached=4, reasoning_tokens=3))
        found = _Background(response_id, planned)
        self.responses[response_id] = found
        task = asyncio.get_running_loop().create_task(self._generate(found))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        await self._stream(found, -1, writer)

    async def _generate(self, found: _Background) -> None:
        """Make the response's events one by one, whoever reads them (the point of background mode)."""
        while found.made < len(found.planned) and found.status == "in_progress":
            if self.pace:
                await asyncio.sleep(self.pace)  # the model's pace of generation
            async with found.changed:
                found.made += 1
                if found.made == len(found.planned):
                    found.status = "completed"
                found.changed.notify_all()

    async def _stream(self, found: _Background, after: int, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
            b"Connection: close\r\n\r\n"
        )
        at = after + 1

        def more() -> bool:
            return found.made > at or found.status != "in_progress"

        while True:
            async with found.changed:
                await found.changed.wait_for(more)
                ready = found.planned[at : found.made]
                over = found.status != "in_progress"  # and everything made is in ready
            for event in ready:
                writer.write(_frame(event))
                await writer.drain()
                if event["type"] == "response.output_text.delta":
                    async with self._sent:
                        self.sent_deltas += 1
                        self._sent.notify_all()
            at += len(ready)
            if over:
                break
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def _crash_answer(body: dict[str, Any], response_id: str) -> list[Item]:
    """The SIGKILL test's model: a reasoned tool call first, then a long reply naming its response."""
    items = body.get("input", [])
    if not any(i.get("type") == "function_call_output" for i in items):
        return [
            reasoning(["Planning"], encrypted=f"enc-{response_id}", id=f"rs_{response_id}"),
            call(f"call_{response_id}", "note", {"n": 1}),
        ]
    returned = [i for i in items if i.get("type") == "reasoning"]
    if not returned or not str(returned[-1].get("encrypted_content", "")).startswith("enc-"):
        raise ValueError(f"the reasoning item did not come back with its encrypted content: {items!r:.300}")
    words = [f"w{n} " for n in range(40)]
    return [message(f"[{response_id}] ", *words, id=f"msg_{response_id}")]


async def _serve() -> None:
    server = await BackgroundResponses(_crash_answer, pace=0.004).start()
    print(server.url, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    if sys.argv[1:] != []:
        raise SystemExit("usage: python -m tests.models.responses_server")
    asyncio.run(_serve())
