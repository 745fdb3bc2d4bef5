"""A thread's conversation as AG-UI messages, and what a ``RunAgentInput`` adds to it.

Every stored message keeps one id everywhere: its history entry id, the id its text was streamed
under (``TEXT_MESSAGE_*``) and the id it has in a ``MESSAGES_SNAPSHOT`` (``repertory.http.convert``
gives the LangGraph routes the same ids). A tool message carries a step's results; each becomes
one AG-UI tool message, ``<entry id>`` alone or ``<entry id>.<n>`` when there are several. An
assistant message's reasoning is a reasoning message of its own, ``<entry id>.reasoning``, placed
before it, as it was streamed. A compaction's summary is a system message.

AG-UI clients send the whole conversation with every input. The new part is what follows the last
message whose id the thread knows; ``new_input`` reads it: at most one user message (a run is one
turn) and tool messages answering calls the client ran. A client that has seen no id of the thread
(it never got a snapshot) is taken to add its last user message only. Assistant, system and
developer messages the thread does not know are refused: the runtime writes those, and stamps who
said what; reasoning and activity messages are the client's own display and are ignored.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    FunctionCall,
    Message,
    ReasoningMessage,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from pydantic import JsonValue

from repertory.core.history import MessageHistory
from repertory.core.messages import ModelMessage, ReasoningPart
from repertory.http.convert import lineage, result_text
from repertory.http.errors import HttpError

__all__ = ["NewInput", "agui_messages", "message_messages", "new_input", "reasoning_id", "tool_message_ids"]

_REASONING_SUFFIX = ".reasoning"


def reasoning_id(message_id: str) -> str:
    """The id of the reasoning message streamed for the assistant message ``message_id``."""
    return message_id + _REASONING_SUFFIX


def tool_message_ids(entry_id: str, count: int) -> list[str]:
    """The ids of the AG-UI tool messages one stored tool message (of ``count`` results) becomes."""
    return [entry_id] if count == 1 else [f"{entry_id}.{i}" for i in range(count)]


def message_messages(entry_id: str, message: ModelMessage) -> list[Message]:
    """One stored message as AG-UI messages (a tool message splits per result)."""
    if message.boundary or message.role == "system":
        return [SystemMessage(id=entry_id, content=message.text)]
    if message.role == "user":
        return [UserMessage(id=entry_id, content=message.text)]
    if message.role == "assistant":
        out: list[Message] = []
        reasoning = "".join(p.text for p in message.parts if isinstance(p, ReasoningPart))
        if reasoning:
            out.append(ReasoningMessage(id=reasoning_id(entry_id), content=reasoning))
        calls = [
            ToolCall(id=c.tool_call_id, function=FunctionCall(name=c.tool_name, arguments=json.dumps(c.args)))
            for c in message.tool_calls
        ]
        out.append(AssistantMessage(id=entry_id, content=message.text or None, tool_calls=calls or None))
        return out
    results = message.tool_results
    return [
        ToolMessage(
            id=ident,
            content=result_text(part.result),
            tool_call_id=part.tool_call_id,
            error=result_text(part.result) if part.is_error else None,
        )
        for ident, part in zip(tool_message_ids(entry_id, len(results)), results, strict=True)
    ]


def agui_messages(history: MessageHistory | None, client: Sequence[Message] = ()) -> list[Message]:
    """The conversation at a history's head, oldest first, as AG-UI messages, under the ids ``client`` knows them by.

    The client's own messages keep their ids, so a snapshot replaces nothing it shows (its reducer
    would move a message whose id changed to the end): each stored user message takes the id of the
    client's next user message with the same text, in order, and the result of a call of a tool the
    client runs (the client's answer, stored as the call's result) the id of the client's tool message.
    """
    if history is None:
        return []
    users = [(m.id, _plain(m.content)) for m in client if isinstance(m, UserMessage)]
    tool_ids = {m.tool_call_id: m.id for m in client if isinstance(m, ToolMessage)}
    out: list[Message] = []
    at = 0
    for _, entry in lineage(history):
        message = entry.message
        converted = message_messages(entry.id, message)
        if message.role == "tool" and tool_ids:
            converted = [
                m.model_copy(update={"id": tool_ids[m.tool_call_id]})
                if isinstance(m, ToolMessage) and m.tool_call_id in tool_ids
                else m
                for m in converted
            ]
        elif message.role == "user" and not message.boundary:
            match = next((i for i in range(at, len(users)) if users[i][1] == message.text), None)
            if match is not None:
                converted = [UserMessage(id=users[match][0], content=message.text)]
                at = match + 1
        out += converted
    return out


def _plain(content: str | list[Any]) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.text for p in content if isinstance(p, TextPart))


@dataclass(frozen=True)
class NewInput:
    """What an input adds to a thread: the user's text (``None``: none) and answers to client-run calls."""

    text: str | None = None
    tool_answers: dict[str, JsonValue] = field(default_factory=dict)


def _bad(where: str, message: str) -> HttpError:
    return HttpError(f"{where}: {message}", status=422)


def _user_text(message: UserMessage, where: str) -> str:
    content = message.content
    if isinstance(content, str):
        text = content
    else:
        texts = []
        for j, part in enumerate(content):
            if not isinstance(part, TextPart):
                raise _bad(f"{where}.content[{j}]", f"repertory takes text parts only, not {part.type!r}")
            texts.append(part.text)
        text = "".join(texts)
    if not text:
        raise _bad(f"{where}.content", "the message is empty")
    return text


def _tool_answer(message: ToolMessage) -> JsonValue:
    content = message.content
    if isinstance(content, str):
        return content if message.error is None else {"error": message.error, "content": content}
    return "".join(p.text for p in content if isinstance(p, TextPart))


def new_input(messages: list[Message], known: set[str]) -> NewInput:
    """The new part of an input's ``messages`` (see the module docstring); 422 naming the message if it cannot be."""
    last_known = max((i for i, m in enumerate(messages) if m.id in known), default=-1)
    start = last_known + 1
    if last_known < 0 and known:
        # A client that never saw this thread's ids: only its last user message is new.
        users = [i for i, m in enumerate(messages) if isinstance(m, UserMessage)]
        start = users[-1] if users else len(messages)
    text: str | None = None
    answers: dict[str, JsonValue] = {}
    for i in range(start, len(messages)):
        message, where = messages[i], f"messages[{i}]"
        if isinstance(message, UserMessage):
            if text is not None:
                raise _bad(where, "an input adds at most one user message (a run is one turn)")
            text = _user_text(message, where)
        elif isinstance(message, ToolMessage):
            answers[message.tool_call_id] = _tool_answer(message)
        elif isinstance(message, ReasoningMessage) or message.role == "activity":
            continue
        else:
            raise _bad(
                f"{where}.role",
                f"{message.role!r} message {message.id!r} is not in this thread: the runtime writes "
                "assistant and system messages; a client adds user messages and the results of the tools it runs",
            )
    return NewInput(text=text, tool_answers=answers)
