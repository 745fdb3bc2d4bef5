"""Each model adapter's loopback server and its wire format, behind one interface, for the conformance suite.

An ``Adapter`` pairs a scripted server with a factory of models aimed at it and says, in that
adapter's own wire format, the few replies every adapter must handle alike: streamed text, parallel
tool calls, a stream cut off, one that ends cleanly but unfinished, one that stalls, one with a
malformed event. Adding an adapter to the suite is one more ``Adapter`` here and one more parameter
in ``test_conformance.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from repertory.core.model import Model

from . import anthropic_server as anthropic
from . import gemini_server as gemini
from . import responses_server as responses
from .server import FakeOpenAI, SSEReply, chunk, tool_piece

Call = tuple[str, str, dict[str, Any]]
"""A tool call as the suite scripts it: id, tool name, arguments."""


class Wire(Protocol):
    """The replies of the suite, in one adapter's wire format."""

    def text(self, pieces: list[str], prompt: int, output: int) -> SSEReply:
        """A whole reply streaming ``pieces`` of text, with that usage."""

    def calls(self, calls: list[Call]) -> SSEReply:
        """A whole reply calling every tool of ``calls`` at once."""

    def cut(self, pieces: list[str]) -> SSEReply:
        """``pieces`` of text, then the connection drops mid-body."""

    def unfinished(self, pieces: list[str]) -> SSEReply:
        """``pieces`` of text, then the body ends cleanly without the reply's end marker."""

    def stall(self, pieces: list[str]) -> SSEReply:
        """``pieces`` of text, then nothing, ever."""

    def malformed(self, pieces: list[str]) -> SSEReply:
        """``pieces`` of text, then an event that is not JSON."""


class OpenAIChatWire:
    def text(self, pieces: list[str], prompt: int, output: int) -> SSEReply:
        usage = {"prompt": prompt, "completion": output}
        return SSEReply([*[chunk(p) for p in pieces], chunk(finish="stop"), chunk(no_choices=True, usage=usage)])

    def calls(self, calls: list[Call]) -> SSEReply:
        pieces = [
            chunk(tool_calls=[tool_piece(i, id=id, name=name, args=json.dumps(args))])
            for i, (id, name, args) in enumerate(calls)
        ]
        return SSEReply([*pieces, chunk(finish="tool_calls")])

    def cut(self, pieces: list[str]) -> SSEReply:
        return SSEReply([chunk(p) for p in pieces], cut=True)

    def unfinished(self, pieces: list[str]) -> SSEReply:
        return SSEReply([chunk(p) for p in pieces], done=False)

    def stall(self, pieces: list[str]) -> SSEReply:
        return SSEReply([chunk(p) for p in pieces], stall=True)

    def malformed(self, pieces: list[str]) -> SSEReply:
        return SSEReply([*[chunk(p) for p in pieces], "{not json", chunk(finish="stop")])


class AnthropicWire:
    def _open(self, pieces: list[str]) -> list[dict[str, Any] | str]:
        return [anthropic.message_start(), *anthropic.text_block(0, *pieces)[:-1]]

    def text(self, pieces: list[str], prompt: int, output: int) -> SSEReply:
        return anthropic.reply(anthropic.text_block(0, *pieces), input_tokens=prompt, output_tokens=output)

    def calls(self, calls: list[Call]) -> SSEReply:
        blocks = [anthropic.tool_block(i, id, name, json.dumps(args)) for i, (id, name, args) in enumerate(calls)]
        return anthropic.reply(*blocks, stop_reason="tool_use")

    def cut(self, pieces: list[str]) -> SSEReply:
        return SSEReply(self._open(pieces), cut=True)

    def unfinished(self, pieces: list[str]) -> SSEReply:
        return SSEReply([*self._open(pieces), {"type": "content_block_stop", "index": 0}, anthropic.message_delta()])

    def stall(self, pieces: list[str]) -> SSEReply:
        return SSEReply(self._open(pieces), stall=True)

    def malformed(self, pieces: list[str]) -> SSEReply:
        return SSEReply([*self._open(pieces), anthropic.raw("content_block_delta", "{not json")])


class GeminiWire:
    def _chunks(self, pieces: list[str]) -> list[dict[str, Any] | str]:
        return [gemini.chunk(gemini.text(p)) for p in pieces]

    def text(self, pieces: list[str], prompt: int, output: int) -> SSEReply:
        return gemini.reply(*[gemini.text(p) for p in pieces], usage_metadata=gemini.usage(prompt, output))

    def calls(self, calls: list[Call]) -> SSEReply:
        parts = [gemini.call(name, args, id=id) for id, name, args in calls]
        return SSEReply([gemini.chunk(*parts, finish="STOP", usage_metadata=gemini.usage())])

    def cut(self, pieces: list[str]) -> SSEReply:
        return SSEReply(self._chunks(pieces), cut=True)

    def unfinished(self, pieces: list[str]) -> SSEReply:
        return SSEReply(self._chunks(pieces))

    def stall(self, pieces: list[str]) -> SSEReply:
        return SSEReply(self._chunks(pieces), stall=True)

    def malformed(self, pieces: list[str]) -> SSEReply:
        return SSEReply([*self._chunks(pieces), "{not json"])


class ResponsesWire:
    def _open(self, pieces: list[str]) -> list[dict[str, Any] | str]:
        made = responses.events([responses.message(*pieces)], terminal=False)
        last = max(i for i, e in enumerate(made) if e["type"] == "response.output_text.delta")
        return list(made[: last + 1])

    def text(self, pieces: list[str], prompt: int, output: int) -> SSEReply:
        return responses.reply(responses.message(*pieces), usage_=responses.usage(prompt, output))

    def calls(self, calls: list[Call]) -> SSEReply:
        return responses.reply(*[responses.call(id, name, args) for id, name, args in calls])

    def cut(self, pieces: list[str]) -> SSEReply:
        return SSEReply(self._open(pieces), cut=True)

    def unfinished(self, pieces: list[str]) -> SSEReply:
        return SSEReply(self._open(pieces))

    def stall(self, pieces: list[str]) -> SSEReply:
        return SSEReply(self._open(pieces), stall=True)

    def malformed(self, pieces: list[str]) -> SSEReply:
        return SSEReply([*self._open(pieces), "{not json"])


@dataclass
class Adapter:
    """One adapter under test: its server, a factory of models aimed at it, and its wire format."""

    name: str
    fake: FakeOpenAI
    make: Callable[..., Model]
    wire: Wire


ADAPTERS: dict[str, tuple[str, str, Wire]] = {
    "openai-chat": ("fake", "make_model", OpenAIChatWire()),
    "anthropic": ("fake_anthropic", "make_anthropic", AnthropicWire()),
    "gemini": ("fake_gemini", "make_gemini", GeminiWire()),
    "openai-responses": ("fake_responses", "make_responses", ResponsesWire()),
}
"""Adapter name -> (its server fixture, its model factory fixture, its wire format)."""
