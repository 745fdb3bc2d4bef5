"""Agents the HTTP tests serve (also loaded by ``repertory serve --agents tests.http.agents:make_agents``).

The model is scripted by the turn's prompt, so many tests share one server without sharing a
script: the first word of the prompt picks a plan, and the number of assistant messages since
the prompt picks the step.

- ``hello ...``: one reply.
- ``research X``: two lookups (the second with reasoning), then a reply; several checkpoints.
- ``delete X``: a tool that needs approval, then a reply quoting its result.
- ``ask``: a tool that calls ``suspend()``; the reply quotes the answer.
- ``stepwise NAME``: a lookup, then waits for ``gate(NAME)``, then another lookup and a reply.
- ``block NAME``: waits until the test opens ``gate(NAME)`` (a threading event, because the
  server runs on its own thread), then replies.
- ``halfway NAME``: a reply streamed in 8 deltas that stops after the first 4 until ``gate(NAME)``
  opens (a reply a cancel cuts off mid-stream).
- ``fail``: the model raises.

``compacting`` is another assistant: it echoes each prompt at length, under a small token budget,
so its threads compact every few turns (``Agent(compaction=...)``).
``lead`` delegates every prompt to ``assistant`` (``agent_tool``): a child session runs the plan.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import Any

from repertory import Agent, Compaction, GuardrailContext, ToolContext, agent_tool, suspend, tool
from repertory.core.messages import ModelMessage
from repertory.core.model import ToolSpec
from repertory.errors import ModelError
from repertory.testing import ScriptedModel

_GATES: dict[str, threading.Event] = {}
_GATES_LOCK = threading.Lock()


def gate(name: str) -> threading.Event:
    """The event a ``block NAME`` turn waits for."""
    with _GATES_LOCK:
        return _GATES.setdefault(name, threading.Event())


@tool(idempotent=True)
async def lookup(q: str) -> str:
    """Look something up."""
    return f"facts about {q}"


DELETED: collections.Counter[str] = collections.Counter()
"""How many times ``delete_account`` really ran, per account: the side effect a test counts."""


@tool(requires_approval=True)
async def delete_account(ctx: ToolContext, account_id: str) -> str:
    """Delete an account (needs a human's approval; not idempotent)."""
    DELETED[account_id] += 1
    approval: Any = ctx.approval
    by = approval.get("principal", {}).get("id") if isinstance(approval, dict) else None
    return f"deleted {account_id} (approved by {by})"


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
        answers = previous is not None and any(r.tool_name == "ask_human" for r in previous.tool_results)
        if not answers:
            return message.text, messages[i + 1 :]
    return "", messages


async def _step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    prompt, since = _turn(messages)
    done = sum(1 for m in since if m.role == "assistant")
    word, _, rest = prompt.partition(" ")
    results = [r for m in since for r in m.tool_results]
    if word == "hello":
        return {"text": "Hello! How can I help?"}
    if word == "research":
        plan: list[dict[str, Any]] = [
            {"tool": "lookup", "args": {"q": rest}},
            {"tool": "lookup", "args": {"q": f"{rest} again"}, "reasoning": "one more look"},
            {"text": "research done"},
        ]
        return plan[min(done, 2)]
    if word == "delete":
        if done == 0:
            return {"tool": "delete_account", "args": {"account_id": rest}}
        return {"text": f"finished: {results[-1].result}" + (" (error)" if results[-1].is_error else "")}
    if word == "ask":
        if done == 0:
            return {"tool": "ask_human", "args": {"question": "which color?"}}
        return {"text": f"you said {since[-1].text}"}
    if word == "paint":  # pick_color is a tool the client declares and runs (AG-UI's RunAgentInput.tools)
        if done == 0:
            return {"tool": "pick_color", "args": {"of": rest or "wall"}}
        return {"text": f"painted {results[-1].result}"}
    if word == "stepwise":
        if done == 1:
            await asyncio.to_thread(gate(rest).wait, 60)
        plan = [
            {"tool": "lookup", "args": {"q": rest}},
            {"tool": "lookup", "args": {"q": f"{rest} 2"}},
            {"text": "stepwise done"},
        ]
        return plan[min(done, 2)]
    if word == "block":
        await asyncio.to_thread(gate(rest).wait, 60)
        return {"text": f"unblocked {rest}"}
    if word == "halfway":

        async def midway() -> None:
            await asyncio.to_thread(gate(rest).wait, 60)

        return {"text": f"a reply about {rest} that stops halfway through", "chunks": 8, "midway": midway}
    if word == "fail":
        raise ModelError("the model is down")
    return {"text": f"echo: {prompt}"}


def _compacting_step(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    last = messages[-1]
    if last.origin is not None and last.origin.id == "compaction":
        return {"text": f"summary of {len(last.text)} characters"}
    return {"text": f"echo: {last.text} " + "and more " * 20}


def _lead(messages: list[ModelMessage], tools: list[ToolSpec]) -> dict[str, Any]:
    """Delegates its prompt to ``assistant`` and reports what came back."""
    if messages[-1].role == "user":
        return {"tool": "delegate", "args": {"task": messages[-1].text}}
    return {"text": f"lead: {messages[-1].tool_results[0].result}"}


def no_secrets(ctx: GuardrailContext, text: str) -> str | None:
    """``second``'s input guardrail: a text with a secret in it is refused."""
    return "secrets stay out of the thread" if "forbidden-secret" in text else None


def make_agents() -> dict[str, Agent]:
    """The served agents: ``assistant`` (every plan above), ``second``, ``compacting`` and ``lead`` (see above)."""
    tools = [lookup, delete_account, ask_human]
    return {
        "assistant": Agent(name="assistant", model=ScriptedModel(_step), tools=tools),
        "second": Agent(
            name="second", model=ScriptedModel([{"text": "second here"}] * 100), input_guardrails=[no_secrets]
        ),
        "compacting": Agent(
            name="compacting",
            model=ScriptedModel(_compacting_step),
            compaction=Compaction(max_input_tokens=1200, keep_last=4),
        ),
        "lead": Agent(name="lead", model=ScriptedModel(_lead), tools=[agent_tool("assistant", name="delegate")]),
    }
