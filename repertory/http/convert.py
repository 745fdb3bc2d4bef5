"""Repertory's conversation as LangChain message dicts, and client input back into a turn.

LangGraph's clients (``langgraph-sdk``, agent-chat-ui) render ``values["messages"]`` as the dicts
LangChain serialises: ``human``, ``system``, ``ai`` (with ``tool_calls``) and ``tool`` (one per
call, paired by ``tool_call_id``). A repertory message id is its history entry id, which is
minted once and shared by every thread that reaches the message, so ids stay stable across
reads, forks and replays. A repertory tool message carries a whole step's results; it becomes
one LangChain tool message per result (``<entry id>.<n>`` when there are several).

A compaction's summary (a context boundary, ``ModelMessage.boundary``) is in the conversation too,
where the model reads it: a ``system`` message with ``additional_kwargs.repertory_boundary`` and an
id starting ``do-not-render-``, the prefix agent-chat-ui hides, so the thread shows what was said.

Input goes the other way: one human message per run, text only (a turn is one message, and the
runtime, not the client, writes assistant and tool messages and stamps who said what). Tool
messages ahead of it are dropped: agent-chat-ui answers every call it sees without a result with
a made-up one ("Successfully handled tool call.") when the user types instead of deciding; here
the new turn supersedes the run waiting on those calls, and the runtime records that as their
results, so nothing the client invents enters the history.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import JsonValue

from repertory.core.history import HistoryEntry, HistoryRevision, MessageHistory
from repertory.core.messages import ModelMessage, ReasoningPart
from repertory.http.errors import HttpError

__all__ = [
    "BOUNDARY_ID_PREFIX",
    "chunk_dict",
    "input_text",
    "iso",
    "lineage",
    "message_dicts",
    "result_text",
    "with_edits",
]

Dict = dict[str, Any]
_HUMAN_ROLES = frozenset({"human", "user"})
BOUNDARY_ID_PREFIX = "do-not-render-"
"""What a boundary message's id starts with (agent-chat-ui's ``DO_NOT_RENDER_ID_PREFIX``)."""


def iso(ms: int | None) -> str | None:
    """Epoch milliseconds as the ISO 8601 timestamp the LangGraph API uses (UTC)."""
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat()


def result_text(result: JsonValue) -> str:
    """A tool result as message content: a string verbatim, anything else as JSON."""
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)


def _base(kind: str, entry_id: str, content: str, message: ModelMessage) -> Dict:
    kwargs: Dict = {}
    if message.origin is not None:
        # Provenance travels with the message: who said it, as the runtime stamped it.
        kwargs["origin"] = message.origin.model_dump(mode="json")
    return {
        "type": kind,
        "id": entry_id,
        "content": content,
        "name": None,
        "additional_kwargs": kwargs,
        "response_metadata": {},
    }


def message_dicts(entry_id: str, message: ModelMessage) -> list[Dict]:
    """One stored message as LangChain message dicts (a tool message splits per result)."""
    if message.boundary:
        out = _base("system", BOUNDARY_ID_PREFIX + entry_id, message.text, message)
        out["additional_kwargs"]["repertory_boundary"] = True
        return [out]
    if message.role == "user":
        return [{**_base("human", entry_id, message.text, message), "example": False}]
    if message.role == "system":
        return [_base("system", entry_id, message.text, message)]
    if message.role == "assistant":
        out = _base("ai", entry_id, message.text, message)
        reasoning = "".join(p.text for p in message.parts if isinstance(p, ReasoningPart))
        if reasoning:
            out["additional_kwargs"]["reasoning_content"] = reasoning
        out.update(
            example=False,
            tool_calls=[
                {"name": c.tool_name, "args": c.args, "id": c.tool_call_id, "type": "tool_call"}
                for c in message.tool_calls
            ],
            invalid_tool_calls=[],
            usage_metadata=None,
        )
        return [out]
    results = message.tool_results
    dicts = []
    for i, part in enumerate(results):
        out = _base("tool", entry_id if len(results) == 1 else f"{entry_id}.{i}", result_text(part.result), message)
        out.update(
            tool_call_id=part.tool_call_id,
            name=part.tool_name,
            artifact=None,
            status="error" if part.is_error else "success",
        )
        if part.ran_with is not None:
            out["additional_kwargs"]["repertory_ran_with"] = part.ran_with
        dicts.append(out)
    return dicts


def with_edits(messages: list[Dict]) -> list[Dict]:
    """``messages`` with each edited call shown with the arguments it ran with.

    A call a human approved with replaced arguments keeps, in the history, the arguments the model
    asked for; its result records what it ran with (``ToolResultPart.ran_with``). A reader of the
    thread's values sees the call as it ran, and the model's request under
    ``additional_kwargs.repertory_requested_args``. The dicts given are not changed (they may be cached).
    """
    ran = {
        m["tool_call_id"]: m["additional_kwargs"]["repertory_ran_with"]
        for m in messages
        if m.get("type") == "tool" and "repertory_ran_with" in m.get("additional_kwargs", {})
    }
    if not ran:
        return messages
    out: list[Dict] = []
    for m in messages:
        calls = m.get("tool_calls") if m.get("type") == "ai" else None
        if calls and any(c["id"] in ran for c in calls):
            requested = {c["id"]: c["args"] for c in calls if c["id"] in ran}
            m = {
                **m,
                "tool_calls": [{**c, "args": ran[c["id"]]} if c["id"] in ran else c for c in calls],
                "additional_kwargs": {**m["additional_kwargs"], "repertory_requested_args": requested},
            }
        out.append(m)
    return out


def chunk_dict(message_id: str, text: str, *, reasoning: bool = False, tool_calls: Sequence[Dict] = ()) -> Dict:
    """A streamed piece of an assistant message, as an ``AIMessageChunk`` dict."""
    return {
        "type": "AIMessageChunk",
        "id": message_id,
        "content": "" if reasoning else text,
        "additional_kwargs": {"reasoning_content": text} if reasoning else {},
        "response_metadata": {},
        "name": None,
        "tool_calls": list(tool_calls),
        "invalid_tool_calls": [],
        "tool_call_chunks": [
            {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i, "type": "tool_call_chunk"}
            for i, c in enumerate(tool_calls)
        ],
        "usage_metadata": None,
    }


def lineage(history: MessageHistory) -> list[tuple[HistoryRevision, HistoryEntry]]:
    """The head's lineage, root first, each revision with the entry it added."""
    out = []
    for rev in history.lineage():
        entry = history.entry(rev.entry_id)
        if entry is not None:
            out.append((rev, entry))
    return out


def _text_of(content: JsonValue) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        for block in content:
            if isinstance(block, str):
                texts.append(block)
            elif isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(str(block["text"]))
            else:
                kind = block.get("type") if isinstance(block, dict) else type(block).__name__
                raise HttpError(
                    f"message content blocks must be text; repertory does not take {kind!r} blocks", status=422
                )
        return "".join(texts)
    raise HttpError("message content must be a string or a list of text blocks", status=422)


def _one_message(item: JsonValue) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, list) and len(item) == 2 and isinstance(item[0], str):
        role, content = item[0], item[1]
    elif isinstance(item, dict):
        raw_role = item.get("role", item.get("type", "human"))
        if not isinstance(raw_role, str):
            raise HttpError("a message's role must be a string", status=422)
        role, content = raw_role, item.get("content")
    else:
        raise HttpError("a message is a string, a {'role', 'content'} object or a [role, content] pair", status=422)
    if role not in _HUMAN_ROLES:
        raise HttpError(
            f"input messages must be human messages, not {role!r}: the runtime writes assistant and "
            "tool messages, and stamps who said what",
            status=422,
        )
    return _text_of(content)


def _client_tool_result(item: JsonValue) -> bool:
    """A tool message a client sent ahead of its human message (dropped: see the module docstring)."""
    if not isinstance(item, dict) or item.get("type", item.get("role")) != "tool":
        return False
    if not isinstance(item.get("tool_call_id"), str):
        raise HttpError("a tool message in the input needs a tool_call_id", status=422)
    return True


def input_text(value: JsonValue) -> str:
    """The text of the one human message in a run's ``input`` (``{"messages": [...]}``)."""
    if not isinstance(value, dict) or set(value) != {"messages"}:
        raise HttpError("input must be {'messages': [one human message]}", status=422)
    messages = value["messages"]
    if not isinstance(messages, list):
        messages = [messages]
    messages = [m for m in messages if not _client_tool_result(m)]
    if len(messages) != 1:
        raise HttpError(
            f"input takes exactly one human message per run (a run is one turn), got {len(messages)}", status=422
        )
    text = _one_message(messages[0])
    if not text:
        raise HttpError("the input message is empty", status=422)
    return text
