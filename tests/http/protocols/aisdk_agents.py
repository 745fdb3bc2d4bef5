"""Agents the AI SDK tests serve (``repertory serve --agents tests.http.protocols.aisdk_agents:make_agents``).

``StreamingModel`` streams its replies word by word, ``REPERTORY_TEST_WORD_DELAY`` seconds apart
(0.02 unless set), as a real model's server does, so a reader can join, leave and come back in the
middle of a reply. The prompt's first word picks the plan:

- ``hello ...``: one short reply.
- ``slow N``: a reply of N words after a line of reasoning; each reply carries a nonce made at
  request time, so a reply asked again after a crash differs from the abandoned one.
- ``research X``: a lookup (with reasoning), then a reply.
- ``delete X``: a tool that needs approval, then a reply quoting its result (or the rejection).
- ``ask``: a tool that calls ``suspend()``; the reply quotes the value it was resumed with.
- ``fail``: the model raises.

``chat`` stores its deltas (the default window); ``live`` keeps them live-only (``delta_window=None``).
"""

from __future__ import annotations

import asyncio
import collections
import os
import secrets
from collections.abc import AsyncIterator

from repertory import Agent, ToolContext, suspend, tool
from repertory.core.ids import new_id
from repertory.core.messages import ModelMessage, Part, ReasoningPart, TextPart, ToolCallPart
from repertory.core.model import ModelEvent, ModelResponse, ModelSettings, ReasoningDelta, TextDelta, ToolSpec
from repertory.errors import ModelError

DELETED: collections.Counter[str] = collections.Counter()
"""How many times ``delete_account`` really ran, per account (in-process servers only)."""


@tool(idempotent=True)
async def lookup(q: str) -> str:
    """Look something up."""
    return f"facts about {q}"


@tool(requires_approval=True)
async def delete_account(ctx: ToolContext, account_id: str) -> str:
    """Delete an account (needs a human's approval; not idempotent)."""
    DELETED[account_id] += 1
    return f"deleted {account_id}"


@tool
async def ask_human(question: str) -> str:
    """Ask the human a question (the run waits for the answer)."""
    suspend(reason="need input", payload={"question": question})


def _prompt(messages: list[ModelMessage]) -> int:
    """The index of the turn's prompt: the last user message that is not an answer to ``ask_human``."""
    for i in range(len(messages) - 1, -1, -1):
        answers = i > 0 and any(r.tool_name == "ask_human" for r in messages[i - 1].tool_results)
        if messages[i].role == "user" and not answers:
            return i
    return 0


def _words(text: str) -> list[str]:
    words = text.split(" ")
    return [w + " " for w in words[:-1]] + words[-1:]


class StreamingModel:
    """A model that streams each reply a word at a time (see the module docstring)."""

    def __init__(self) -> None:
        self.delay = float(os.environ.get("REPERTORY_TEST_WORD_DELAY", "0.02"))

    async def request(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        """Stream the plan's next step for this conversation."""
        at = _prompt(messages)
        prompt, since = messages[at].text, messages[at + 1 :]
        done = sum(1 for m in since if m.role == "assistant")
        results = [r for m in since for r in m.tool_results]
        word, _, rest = prompt.partition(" ")
        reasoning, text, calls = "", "", []
        if word == "fail":
            raise ModelError("the model is down")
        if word == "slow":
            reasoning = "thinking it over"
            count = int(rest or "20")
            text = f"[{secrets.token_hex(3)}] " + " ".join(f"w{i}" for i in range(count))
        elif word == "research" and done == 0:
            reasoning, calls = "a lookup first", [("lookup", {"q": rest})]
        elif word == "research":
            text = f"research done: {results[-1].result}"
        elif word == "ask" and done == 0:
            calls = [("ask_human", {"question": "which color?"})]
        elif word == "ask":
            text = f"you said {messages[-1].text}"
        elif word == "delete" and done == 0:
            calls = [("delete_account", {"account_id": rest})]
        elif word == "delete":
            last = results[-1]
            text = f"finished: {last.result}" + (" (refused)" if last.is_error else "")
        else:
            text = "Hello there, friend." if word == "hello" else f"echo: {prompt}"
        parts: list[Part] = []
        if reasoning:
            parts.append(ReasoningPart(text=reasoning))
            for piece in _words(reasoning):
                yield ReasoningDelta(text=piece)
                await asyncio.sleep(self.delay)
        if text:
            parts.append(TextPart(text=text))
            for piece in _words(text):
                yield TextDelta(text=piece)
                await asyncio.sleep(self.delay)
        parts += [ToolCallPart(tool_call_id=f"call_{new_id()}", tool_name=n, args=a) for n, a in calls]
        yield ModelResponse(message=ModelMessage(role="assistant", parts=parts, model="streaming"))


def make_agents() -> dict[str, Agent]:
    """``chat`` (durable deltas) and ``live`` (live-only deltas), on the same model and tools."""
    tools = [lookup, delete_account, ask_human]
    return {
        "chat": Agent(name="chat", model=StreamingModel(), tools=tools),
        "live": Agent(name="live", model=StreamingModel(), tools=tools, delta_window=None),
    }
