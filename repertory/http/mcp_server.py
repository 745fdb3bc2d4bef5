"""``build_server``: the runtime's agents and sessions as an MCP server, on the official SDK's lowlevel ``Server``.

Tools: one per served agent (``{"task", "session_id"?}``: one turn, its final text as content and
``{"session_id", "text"}`` as structured content), ``sessions_list`` (the caller's sessions),
``session_send`` (a message to one of the caller's sessions, whatever its agent) and
``session_fork`` (a new session sharing one's conversation so far). Every tool's annotations tell
the truth: an agent's call is never read-only, and it is destructive when any of the agent's own
tools is not idempotent (its side effects are not safe to repeat). Resources are the caller's
sessions (``repertory.http.mcp_resources``).

Every call reaches sessions through the session tree (``Gateway`` and its handles) as the
caller: on HTTP the caller the key names (``repertory.http.mcp_endpoint``), on stdio the one the
CLI gives. A turn that waits for a human answers the call with MRTR's "input required" and the
elicitations of ``repertory.http.mcp_input``; the client's retry carries the answers and the
sealed ``requestState`` naming the turn, and is decided exactly once through the run's tokens (a
second answer is refused with invalid params). The state is sealed (AES-GCM, the SDK's
``RequestStateBoundary``) under ``state_key``, bound to the tool, its arguments and the caller, and
lives 7 days; without a key each process makes its own, so a retry must reach the same process.
A 2025-11-25 (handshake era) client gets the questions as ``elicitation/create`` requests where it
has a back-channel (stdio), else an error result naming the pending question and the session.

The tasks extension (``tasks``) is a hook, so the task machinery lives in its own module: it
registers its methods on the server and may turn a started call into a task.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import mcp_types as t
from mcp.server.caching import CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from repertory.http.auth import Caller
from repertory.http.errors import HttpError
from repertory.http.gateway import Gateway
from repertory.http.mcp_input import InputRefused, answer
from repertory.http.mcp_resources import list_resources, read_resource, resource_templates, session_entry
from repertory.http.mcp_turns import (
    AgentCall,
    McpCallError,
    StartedTurn,
    TurnOutcome,
    own_session,
    send,
    start_turn,
    tool_result,
    turn_outcome,
)
from repertory.runtime import Agent

__all__ = ["STATE_TTL_S", "TOOL_NAME", "CallerOf", "TaskHooks", "build_server", "state_security"]

Ctx = ServerRequestContext[Any, Any]
CallerOf = Callable[[Ctx], Caller]
"""How a handler learns its caller from the request context (the HTTP endpoint's, or the CLI's one caller)."""

TOOL_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
"""What an MCP tool name may be: an agent with another name is refused when the server is built."""
STATE_TTL_S = 7 * 24 * 3600.0
"""How long a sealed ``requestState`` stays valid: a human may take days to answer."""
AUDIENCE = "repertory"
SESSION_TOOLS = ("sessions_list", "session_send", "session_fork")


class TaskHooks(Protocol):
    """The tasks extension as ``build_server`` uses it (``repertory.http.mcp_tasks`` provides it)."""

    def register(self, server: Server[Any]) -> None:
        """Add the extension's methods and advertisement to ``server``."""

    async def maybe_task(self, ctx: Ctx, started: StartedTurn) -> dict[str, Any] | None:
        """The ``CreateTaskResult`` dict that answers a just-started call as a task, or ``None`` to answer it now."""


def state_security(key: bytes | None) -> RequestStateSecurity:
    """How ``requestState`` is sealed: under ``key`` (>= 32 bytes, shared by every process), else a process's own."""
    if key is None:
        return RequestStateSecurity.ephemeral(ttl=STATE_TTL_S, audience=AUDIENCE)
    return RequestStateSecurity(keys=[key], ttl=STATE_TTL_S, audience=AUDIENCE, bind_principal=None)


_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "minLength": 1, "description": "What to ask the agent: one message, one turn."},
        "session_id": {
            "type": ["string", "null"],
            "description": "Continue this session (one of yours, of this agent); a new session when absent.",
        },
    },
    "required": ["task"],
    "additionalProperties": False,
}
_TURN_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "session_id": {"type": "string", "description": "The session the turn ran in (pass it to continue)."},
        "text": {"type": "string", "description": "The agent's final reply."},
    },
    "required": ["session_id", "text"],
}
_SESSION_ITEM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "session_id": {"type": "string"},
        "agent": {"type": "string"},
        "title": {"type": ["string", "null"]},
        "resource": {"type": "string"},
        "lineage": {"type": "string"},
        "parent_id": {"type": ["string", "null"]},
        "created_at": {"type": "integer"},
        "updated_at": {"type": "integer"},
    },
    "required": ["session_id", "agent", "resource", "lineage", "created_at", "updated_at"],
}


class _ListArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    agent: str | None = None


class _SendArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    session_id: str = Field(min_length=1)
    message: str = Field(min_length=1)


class _ForkArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    session_id: str = Field(min_length=1)
    title: str | None = None


def _destructive(agent: Agent) -> bool:
    """Whether a turn of ``agent`` may do what is not safe to repeat: any of its own tools is not idempotent."""
    return any(not tool.idempotent for tool in agent.tools.values())


def _describe(name: str, agent: Agent) -> str:
    first = (agent.instructions or "").strip().splitlines()
    about = f" ({first[0][:200]})" if first else ""
    return (
        f"Hand a task to the durable agent {name!r}{about}: one turn, answered with its final reply. "
        "Pass the returned session_id to continue the same conversation."
    )


def _tools(gw: Gateway) -> list[t.Tool]:
    """Every tool, in a fixed order: the agents as served, then the session tools."""
    tools = [
        t.Tool(
            name=name,
            title=f"Agent {name}",
            description=_describe(name, agent),
            input_schema=_INPUT_SCHEMA,
            output_schema=_TURN_OUTPUT,
            annotations=t.ToolAnnotations(
                read_only_hint=False, destructive_hint=_destructive(agent), idempotent_hint=False, open_world_hint=True
            ),
        )
        for name, agent in gw.agents.items()
    ]
    any_destructive = any(_destructive(a) for a in gw.agents.values())
    tools += [
        t.Tool(
            name="sessions_list",
            title="List sessions",
            description="Your sessions (all agents, or one agent's), oldest first, each with its resource URI.",
            input_schema={
                "type": "object",
                "properties": {"agent": {"type": ["string", "null"], "description": "Only this agent's sessions."}},
                "additionalProperties": False,
            },
            output_schema={
                "type": "object",
                "properties": {"sessions": {"type": "array", "items": _SESSION_ITEM}},
                "required": ["sessions"],
            },
            annotations=t.ToolAnnotations(
                read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
            ),
        ),
        t.Tool(
            name="session_send",
            title="Send to a session",
            description="Send a message to one of your sessions (any agent's): one turn, answered with its reply.",
            input_schema={
                "type": "object",
                "properties": {
                    "session_id": {"type": "string", "minLength": 1, "description": "One of your sessions."},
                    "message": {"type": "string", "minLength": 1, "description": "The message: one turn."},
                },
                "required": ["session_id", "message"],
                "additionalProperties": False,
            },
            output_schema=_TURN_OUTPUT,
            annotations=t.ToolAnnotations(
                read_only_hint=False, destructive_hint=any_destructive, idempotent_hint=False, open_world_hint=True
            ),
        ),
        t.Tool(
            name="session_fork",
            title="Fork a session",
            description=(
                "A new session that shares one of your sessions' conversation so far (nothing is copied); "
                "what either says afterwards stays its own."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "session_id": {"type": "string", "minLength": 1, "description": "The session to fork."},
                    "title": {"type": ["string", "null"], "description": "The new session's title."},
                },
                "required": ["session_id"],
                "additionalProperties": False,
            },
            output_schema={
                "type": "object",
                "properties": {
                    "session_id": {"type": "string", "description": "The new session."},
                    "forked_from": {"type": "string"},
                    "resource": {"type": "string"},
                },
                "required": ["session_id", "forked_from", "resource"],
            },
            annotations=t.ToolAnnotations(
                read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
            ),
        ),
    ]
    return tools


def _check_names(gw: Gateway) -> None:
    """Refuse, at build time, agents whose names cannot be MCP tool names or clash with the session tools."""
    for name in gw.agents:
        if TOOL_NAME.fullmatch(name) is None:
            raise ValueError(f"agent {name!r} cannot be served as an MCP tool: names are 1 to 128 of A-Z a-z 0-9 . _ -")
        if name in SESSION_TOOLS:
            raise ValueError(f"agent {name!r} clashes with the MCP server's own tool of that name; rename the agent")


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e.get('loc', ())) or 'arguments'}: {e.get('msg', 'invalid')}" for e in exc.errors()
    )


def build_server(
    gw: Gateway,
    *,
    caller_of: CallerOf,
    tasks: TaskHooks | None = None,
    state_key: bytes | None = None,
    version: str = "0",
) -> Server[Any]:
    """The MCP server of ``gw``'s runtime: agent and session tools, session resources, MRTR approvals.

    ``caller_of`` names each request's caller; ``tasks`` adds the tasks extension;
    ``state_key`` seals ``requestState`` (see the module docstring). ``ValueError`` for an agent
    name that cannot be a tool name.
    """
    _check_names(gw)
    tools = _tools(gw)
    schemas = {tool.name: tool.input_schema for tool in tools}
    private = CacheHint(ttl_ms=0, scope="private")

    async def list_tools(ctx: Ctx, params: t.PaginatedRequestParams | None) -> t.ListToolsResult:
        return t.ListToolsResult(tools=tools)

    async def call_tool(ctx: Ctx, params: t.CallToolRequestParams) -> t.CallToolResult | t.InputRequiredResult:
        caller = caller_of(ctx)
        try:
            if params.request_state is not None:  # an MRTR retry: the turn is named by the sealed state
                return await _retry(ctx, caller, params)
            if params.name == "sessions_list":
                return await _sessions_list(caller, params.arguments)
            if params.name == "session_fork":
                return await _session_fork(caller, params.arguments)
            if params.name == "session_send":
                args = _SendArgs.model_validate(params.arguments or {})
                record = await own_session(gw, caller, args.session_id)
                started = await send(gw, caller, record.session_id, args.message)
            elif params.name in gw.agents:
                started = await start_turn(gw, caller, params.name, AgentCall.model_validate(params.arguments or {}))
            else:
                raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name}")
            if tasks is not None:
                created = await tasks.maybe_task(ctx, started)
                if created is not None:
                    return created  # type: ignore[return-value]  # a task result: the runner sends dicts as they are
            outcome = await turn_outcome(gw, caller, started.session_id, started.submission_id, wait=True, checked=True)
            return await _answered(ctx, caller, outcome)
        except ValidationError as exc:
            return tool_result("", f"invalid arguments for {params.name}: {_problems(exc)}", is_error=True)
        except McpCallError as exc:
            return tool_result("", str(exc), is_error=True)
        except HttpError as exc:  # the tree refused (a thread id it cannot take, ...): the model reads why
            return tool_result("", str(exc), is_error=True)

    async def _retry(
        ctx: Ctx, caller: Caller, params: t.CallToolRequestParams
    ) -> t.CallToolResult | t.InputRequiredResult:
        state = _parse_state(params.request_state or "")
        session_id, submission_id = state
        turn = await gw.store.load_turn(submission_id)
        if turn is None or turn.session_id != session_id:
            raise MCPError(INVALID_PARAMS, "Invalid or expired requestState")
        if params.input_responses:
            # The questions are the turn's own, or a delegated child's it waits for: answered where they are.
            asked = await turn_outcome(gw, caller, session_id, submission_id, wait=False)
            await _answer(caller, *(asked.asks or (session_id, turn.run_id)), params.input_responses)
        outcome = await turn_outcome(gw, caller, session_id, submission_id, wait=True)
        return await _answered(ctx, caller, outcome)

    async def _answer(caller: Caller, session_id: str, run_id: str, responses: Mapping[str, t.InputResponse]) -> None:
        try:
            await answer(gw, caller, session_id, run_id, responses)
        except InputRefused as exc:
            raise MCPError(INVALID_PARAMS, "already answered" if exc.already_answered else str(exc)) from None

    async def _answered(ctx: Ctx, caller: Caller, outcome: TurnOutcome) -> t.CallToolResult | t.InputRequiredResult:
        """The call's answer for a turn at rest: its result, or its questions in the client's era's way."""
        while outcome.state == "needs_input":
            if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                return t.InputRequiredResult(
                    input_requests=dict(outcome.input_requests), request_state=outcome.request_state()
                )
            if ctx.request is not None:  # handshake era on stateless HTTP: no back-channel to ask on
                keys = ", ".join(outcome.input_requests)
                text = (
                    f"the turn waits for a human ({keys}) in session {outcome.session_id}; "
                    "answer it with a 2026-07-28 client (MRTR) or any other face of the server"
                )
                return tool_result(outcome.session_id, text, is_error=True)
            responses: dict[str, t.InputResponse] = {}
            for key, request in outcome.input_requests.items():
                form = request.params
                assert isinstance(form, t.ElicitRequestFormParams)
                responses[key] = await ctx.session.elicit_form(form.message, form.requested_schema)
            await _answer(caller, *(outcome.asks or (outcome.session_id, outcome.run_id)), responses)
            outcome = await turn_outcome(gw, caller, outcome.session_id, outcome.submission_id, wait=True, checked=True)
        assert outcome.result is not None
        return outcome.result

    async def _sessions_list(caller: Caller, arguments: dict[str, Any] | None) -> t.CallToolResult:
        args = _ListArgs.model_validate(arguments or {})
        records = await gw.visible(caller)
        if args.agent is not None:
            records = [r for r in records if r.agent == args.agent]
        sessions = [session_entry(r) for r in records]
        return t.CallToolResult(
            content=[t.TextContent(type="text", text=json.dumps(sessions))], structured_content={"sessions": sessions}
        )

    async def _session_fork(caller: Caller, arguments: dict[str, Any] | None) -> t.CallToolResult:
        args = _ForkArgs.model_validate(arguments or {})
        record = await own_session(gw, caller, args.session_id)
        handle = await gw.runtime.session(record.session_id, caller.principal)
        child = await handle.fork(title=args.title)
        out = {"session_id": child.id, "forked_from": record.session_id, "resource": child.resource}
        return t.CallToolResult(content=[t.TextContent(type="text", text=json.dumps(out))], structured_content=out)

    async def on_list_resources(ctx: Ctx, params: t.PaginatedRequestParams | None) -> t.ListResourcesResult:
        return await list_resources(gw, caller_of(ctx), params.cursor if params is not None else None)

    async def on_list_templates(ctx: Ctx, params: t.PaginatedRequestParams | None) -> t.ListResourceTemplatesResult:
        return t.ListResourceTemplatesResult(resource_templates=resource_templates())

    async def on_read_resource(ctx: Ctx, params: t.ReadResourceRequestParams) -> t.ReadResourceResult:
        return await read_resource(gw, caller_of(ctx), params.uri)

    server: Server[Any] = Server(
        "repertory",
        version=version,
        instructions="Durable agent sessions: each agent is a tool; sessions are resources (repertory://sessions/{id}).",
        get_tool_input_schema=schemas.get,
        cache_hints={
            "tools/list": private,
            "resources/list": private,
            "resources/templates/list": private,
            "resources/read": private,
        },
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=on_list_resources,
        on_list_resource_templates=on_list_templates,
        on_read_resource=on_read_resource,
    )
    security = state_security(state_key)
    security.bind_principal = lambda ctx: _principal_of(caller_of(ctx))
    server.middleware.append(RequestStateBoundary(security, default_audience=AUDIENCE))
    if tasks is not None:
        tasks.register(server)
    return server


def _principal_of(caller: Caller) -> str:
    """What a sealed ``requestState`` is bound to: the caller's owner and principal (another key cannot use it)."""
    return json.dumps([caller.owner, caller.principal.kind, caller.principal.id, caller.admin])


def _parse_state(state: str) -> tuple[str, str]:
    """``(session_id, submission_id)`` from our own ``requestState`` plaintext (already unsealed by the SDK)."""
    try:
        data = json.loads(state)
        session_id, submission_id = data["session"], data["submission"]
    except (ValueError, KeyError, TypeError):
        raise MCPError(INVALID_PARAMS, "Invalid or expired requestState") from None
    if not isinstance(session_id, str) or not isinstance(submission_id, str):
        raise MCPError(INVALID_PARAMS, "Invalid or expired requestState")
    return session_id, submission_id
