"""The caller's sessions as MCP resources: ``repertory://sessions/{id}`` and its turns.

A session's URI is exactly ``SessionHandle.resource``. Reading it gives two contents: the
conversation as text (one line per message, each tool call and result summarised on one line,
long values cut), and the session's metadata as JSON (agent, title, lineage, status, times, its
own metadata, its latest turns). ``repertory://sessions/{id}/turns/{submission_id}`` reads one turn: its status,
message and reply, as JSON. Listing shows only the caller's sessions (the store's index by owner,
``Gateway.visible``); another owner's session, and a URI that names nothing, are both answered
"Resource not found" with the URI, so ids cannot be probed across tenants.
"""

from __future__ import annotations

import json
import re
from typing import Any

import mcp_types as t
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import JsonValue

from repertory.core.messages import ModelMessage
from repertory.core.result import reply_text
from repertory.core.tree import SessionRecord, TurnRecord
from repertory.http.auth import Caller
from repertory.http.convert import lineage
from repertory.http.errors import HttpError
from repertory.http.gateway import Gateway

__all__ = [
    "PAGE",
    "SESSION_URI",
    "conversation_text",
    "list_resources",
    "read_resource",
    "resource_templates",
    "session_entry",
    "session_uri",
    "turn_uri",
]

SESSION_URI = "repertory://sessions/{session_id}"
TURN_URI = "repertory://sessions/{session_id}/turns/{submission_id}"
PAGE = 100
"""Resources per ``resources/list`` page."""
TURNS = 50
"""The latest turns a session's metadata lists (each with its own resource URI)."""
_CUT = 300
_SESSION = re.compile(r"repertory://sessions/(?P<session>[^/?#]+)(?:/turns/(?P<turn>[^/?#]+))?")


def session_uri(session_id: str) -> str:
    """A session's resource URI (what ``SessionHandle.resource`` is)."""
    return SESSION_URI.format(session_id=session_id)


def turn_uri(turn: TurnRecord) -> str:
    """A turn's resource URI (its submission id is also the id of a task that ran it)."""
    return TURN_URI.format(session_id=turn.session_id, submission_id=turn.submission_id)


def session_entry(record: SessionRecord) -> dict[str, Any]:
    """A session as ``sessions_list`` shows it."""
    return {
        "session_id": record.session_id,
        "agent": record.agent,
        "title": record.title,
        "resource": session_uri(record.session_id),
        "lineage": record.lineage.kind,
        "parent_id": record.lineage.parent_id,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
    }


def resource_templates() -> list[t.ResourceTemplate]:
    """The templates of a session's and a turn's URIs."""
    return [
        t.ResourceTemplate(
            uri_template=SESSION_URI,
            name="session",
            title="A session",
            description="One of your sessions: its conversation (text) and metadata (JSON).",
            mime_type="text/plain",
        ),
        t.ResourceTemplate(
            uri_template=TURN_URI,
            name="turn",
            title="A turn",
            description="One turn of a session (a tool call's submission id): status, message and reply (JSON).",
            mime_type="application/json",
        ),
    ]


async def list_resources(gw: Gateway, caller: Caller, cursor: str | None) -> t.ListResourcesResult:
    """The caller's sessions, oldest first, ``PAGE`` at a time (the cursor is an offset)."""
    start = int(cursor) if cursor is not None and cursor.isdigit() else 0
    if cursor is not None and not cursor.isdigit():
        raise MCPError(INVALID_PARAMS, "Invalid cursor")
    records = await gw.visible(caller)
    page = records[start : start + PAGE]
    resources = [
        t.Resource(
            uri=session_uri(r.session_id),
            name=r.session_id,
            title=r.title or f"{r.agent} session {r.session_id}",
            description=f"A session of {r.agent!r} ({r.lineage.kind}): its conversation and metadata.",
            mime_type="text/plain",
        )
        for r in page
    ]
    more = start + PAGE < len(records)
    return t.ListResourcesResult(resources=resources, next_cursor=str(start + PAGE) if more else None)


def _not_found(uri: str) -> MCPError:
    return MCPError(INVALID_PARAMS, "Resource not found", data={"uri": uri})


async def read_resource(gw: Gateway, caller: Caller, uri: str) -> t.ReadResourceResult:
    """A session's conversation and metadata, or a turn's JSON; "Resource not found" for anything else."""
    match = _SESSION.fullmatch(uri)
    if match is None:
        raise _not_found(uri)
    try:
        record = await gw.record(match["session"], caller)
    except HttpError:
        raise _not_found(uri) from None
    if match["turn"] is not None:
        return await _read_turn(gw, record, match["turn"], uri)
    snap = await gw.snapshot(record)
    messages = [] if snap.history is None else [entry.message for _, entry in lineage(snap.history)]
    meta: dict[str, Any] = {
        **session_entry(record),
        "root_id": record.root_id,
        "status": snap.status,
        "model": record.model,
        "metadata": record.metadata,
        "messages": len(messages),
        "turns": [
            {"submission_id": turn.submission_id, "status": turn.status, "resource": turn_uri(turn)}
            for turn in (await gw.store.list_turns(record.session_id))[-TURNS:]
        ],
    }
    return t.ReadResourceResult(
        contents=[
            t.TextResourceContents(uri=uri, mime_type="text/plain", text=conversation_text(messages)),
            t.TextResourceContents(uri=uri, mime_type="application/json", text=json.dumps(meta)),
        ]
    )


async def _read_turn(gw: Gateway, record: SessionRecord, submission_id: str, uri: str) -> t.ReadResourceResult:
    turn = await gw.store.load_turn(submission_id)
    if turn is None or turn.session_id != record.session_id:
        raise _not_found(uri)
    run = await gw.store.load_run(turn.run_id)
    body = {
        "submission_id": turn.submission_id,
        "session_id": turn.session_id,
        "status": turn.status,
        "message": turn.message.text,
        "reply": reply_text(run) if run is not None else None,
        "error": turn.error.message if turn.error is not None else None,
        "created_at": turn.created_at,
        "updated_at": turn.updated_at,
    }
    return t.ReadResourceResult(
        contents=[t.TextResourceContents(uri=uri, mime_type="application/json", text=json.dumps(body))]
    )


def _short(value: JsonValue) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    text = " ".join(text.split())
    return text if len(text) <= _CUT else text[: _CUT - 1] + "…"


def conversation_text(messages: list[ModelMessage]) -> str:
    """The conversation as text: ``role: text`` per message, a tool call or result as one summarised line."""
    lines: list[str] = []
    for message in messages:
        if message.text:
            lines.append(f"{message.role}: {message.text}")
        for call in message.tool_calls:
            lines.append(f"{message.role}: [tool call {call.tool_name}({_short(call.args)})]")
        for result in message.tool_results:
            flag = " (error)" if result.is_error else ""
            lines.append(f"tool: [{result.tool_name}{flag} -> {_short(result.result)}]")
    return "\n".join(lines) + ("\n" if lines else "")
