"""The agent the browser tests drive: its model answers by the first word of the turn's prompt.

- ``hello``: one reply (with a little usage and cost, for the plots);
- ``research X``: a lookup (with reasoning), then a reply;
- ``delete X``: ``delete_account`` (needs approval), then a reply quoting its result;
- ``ask``: ``ask_human`` suspends; the reply quotes the answer;
- ``stream NAME``: writes a first delta, waits for ``gate(NAME)``, then finishes the reply;
- ``fail``: the model raises;
- anything else is echoed back.

``lead`` delegates each prompt to ``assistant`` (``agent_tool``): a ``delete X`` prompt leaves the
approval in the child while the lead's turn waits for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from repertory import Agent, ToolContext, agent_tool, suspend, tool
from repertory.core.messages import ModelMessage
from repertory.core.model import ModelEvent, ModelResponse, ModelSettings, TextDelta, ToolSpec
from repertory.core.state import Usage
from repertory.errors import ModelError
from repertory.testing import ScriptedModel

_GATES: dict[str, asyncio.Event] = {}


def gate(name: str) -> asyncio.Event:
    """The event a ``stream NAME`` turn waits for (the server runs on the test's own loop)."""
    return _GATES.setdefault(name, asyncio.Event())


@tool(idempotent=True)
async def lookup(q: str) -> str:
    """Look something up."""
    return f"facts about {q}"


@tool(requires_approval=True)
async def delete_account(ctx: ToolContext, account_id: str) -> str:
    """Delete an account (needs a human's approval)."""
    return f"deleted {account_id}"


@tool
async def ask_human(question: str) -> str:
    """Ask the human a question."""
    suspend(reason="need input", payload={"question": question})


def _turn(messages: list[ModelMessage]) -> tuple[str, list[ModelMessage]]:
    """The turn's prompt and what followed it (a resume answer is not a prompt)."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if message.role != "user":
            continue
        previous = messages[i - 1] if i else None
        if previous is None or not any(r.tool_name == "ask_human" for r in previous.tool_results):
            return message.text, messages[i + 1 :]
    return "", messages


USAGE = {"input_tokens": 120, "output_tokens": 30}


def _step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    prompt, since = _turn(messages)
    done = sum(1 for m in since if m.role == "assistant")
    word, _, rest = prompt.partition(" ")
    results = [r for m in since for r in m.tool_results]
    if word == "hello":
        return {"text": "Hello! How can I help?", "usage": USAGE}
    if word == "research":
        plan: list[dict[str, Any]] = [
            {"tool": "lookup", "args": {"q": rest}, "reasoning": "I should look this up first", "usage": USAGE},
            {"text": f"research done: {results[-1].result if results else ''}", "usage": USAGE},
        ]
        return plan[min(done, 1)]
    if word == "delete":
        if done == 0:
            return {"tool": "delete_account", "args": {"account_id": rest}}
        last = results[-1]
        return {"text": f"finished: {last.result}" + (" (error)" if last.is_error else "")}
    if word == "ask":
        if done == 0:
            return {"tool": "ask_human", "args": {"question": "which color?"}}
        return {"text": f"you said {since[-1].text}"}
    if word == "fail":
        raise ModelError("the model is down")
    return {"text": f"echo: {prompt}"}


class GatedModel:
    """``ScriptedModel(_step)``, except that a ``stream NAME`` turn streams and waits for its gate."""

    def __init__(self) -> None:
        self._scripted = ScriptedModel(_step)

    async def request(
        self, messages: list[ModelMessage], tools: list[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        prompt, _ = _turn(messages)
        word, _, name = prompt.partition(" ")
        if word != "stream":
            async for event in self._scripted.request(messages, tools, settings):
                yield event
            return
        yield TextDelta(text="Streaming the first words")
        await gate(name).wait()
        yield TextDelta(text=", and the rest.")
        yield ModelResponse(
            message=ModelMessage.assistant("Streaming the first words, and the rest."),
            usage=Usage(input_tokens=10, output_tokens=8, total_tokens=18, requests=1),
        )


def _lead(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    if messages[-1].role == "user":
        return {"tool": "assistant", "args": {"task": messages[-1].text}}
    return {"text": f"lead: {messages[-1].tool_results[0].result}"}


def make_agents() -> dict[str, Agent]:
    """``assistant`` (every plan above), ``helper`` (a second agent, for the agent filter) and ``lead``."""
    tools = [lookup, delete_account, ask_human]
    return {
        "assistant": Agent(name="assistant", model=GatedModel(), tools=tools),
        "helper": Agent(name="helper", model=ScriptedModel([{"text": "helping"}] * 1000)),
        "lead": Agent(name="lead", model=ScriptedModel(_lead), tools=[agent_tool("assistant")]),
    }
