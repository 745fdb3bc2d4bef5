"""``MCPTool``: one tool of an MCP server, an ordinary repertory ``Tool`` to the engine.

Its JSON schema goes to the model exactly as the server wrote it, and the model's arguments are
validated against that schema before a call (invalid arguments are an error result the model can
correct, as for a ``@tool``). Approval and idempotency are the server's policies applied to this
tool (``repertory.mcp.server``), so approvals, edits at approval, rejections, suspension and
crash recovery take the engine's one path. Every failure to get an answer (the server cannot
start, exits, times out, breaks the protocol) is a ``ToolError`` naming the server and the tool:
the model reads it and the run goes on.

Every ``tools/call`` carries the call's identity in its request ``_meta`` (``call_meta``):
``repertory/tool_call_id``, ``repertory/session_id`` and ``repertory/run_id``. The call id is the
idempotency key of a call repertory never runs twice: a server that performs side effects can
record it with the effect and refuse (or answer from its record) a call id it has already seen,
so a side effect stays single even where a server cannot trust its client. Call ids come from the
model and are unique within a session; the pair (session id, call id) is unique everywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types
from jsonschema import SchemaError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from pydantic import BaseModel, ConfigDict, JsonValue

from repertory.core.model import ToolSpec
from repertory.errors import ToolError
from repertory.mcp._connection import CallFailed
from repertory.mcp._results import convert_result
from repertory.runtime.tools import ApprovalPolicy, Tool, ToolContext

if TYPE_CHECKING:
    from repertory.mcp.server import MCPServer

__all__ = ["MCPTool", "META_RUN_ID", "META_SESSION_ID", "META_TOOL_CALL_ID", "OUTCOME_UNKNOWN", "call_meta"]

_MAX_ERRORS = 5
OUTCOME_UNKNOWN = "outcome unknown"
"""How the error result of a call sent but never answered begins (it may have run; it is not sent again)."""
META_TOOL_CALL_ID = "repertory/tool_call_id"
"""The ``_meta`` key of a ``tools/call`` holding the call's id (``ToolCallPart.tool_call_id``): its idempotency key."""
META_SESSION_ID = "repertory/session_id"
"""The ``_meta`` key holding the id of the session (its thread) whose run makes the call."""
META_RUN_ID = "repertory/run_id"
"""The ``_meta`` key holding the id of the run that makes the call."""


def call_meta(ctx: ToolContext) -> dict[str, str]:
    """The ``_meta`` of one call's ``tools/call`` request: its call id, session id and run id.

    Keys carry repertory's own prefix (MCP reserves ``modelcontextprotocol``/``mcp`` prefixes for the
    protocol); a server reads them from its request context (the ``mcp`` SDK: ``ctx.request_context.meta``).
    """
    return {META_TOOL_CALL_ID: ctx.call_id, META_SESSION_ID: ctx.thread_id, META_RUN_ID: ctx.run_id}


class _AnyArguments(BaseModel):
    """``Tool.args_model`` of an MCP tool: any object (the server's JSON schema is the contract)."""

    model_config = ConfigDict(extra="allow")


class MCPTool(Tool):
    """A tool an MCP server offers, as the model sees it (``name`` may carry the server's prefix).

    ``remote_name`` is the tool's name on the server, ``annotations`` its MCP hints. ``Tool``'s
    constructor builds an argument model from a Python signature; an MCP tool has a JSON schema
    instead, so it sets the same attributes itself and overrides ``spec``, ``validate`` and
    ``invoke`` (a test checks it keeps every attribute a ``Tool`` has).
    """

    def __init__(
        self,
        server: MCPServer,
        remote: mcp_types.Tool,
        *,
        name: str,
        requires_approval: ApprovalPolicy,
        idempotent: bool,
    ) -> None:
        self.server = server
        self.remote_name = remote.name
        self.annotations = remote.annotations
        self.input_schema: dict[str, Any] = dict(remote.input_schema)
        self.name = name
        self.description = (remote.description or remote.title or "").strip()
        self.requires_approval = requires_approval
        self.idempotent = idempotent
        self.fn = self._call
        self.is_async = True
        self._ctx_param = None
        self.args_model = _AnyArguments
        self._validator = _compile(self.input_schema)

    def spec(self) -> ToolSpec:
        """The tool as the model sees it: the server's description and input schema, unchanged."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.input_schema)

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Check arguments against the server's input schema; ``ToolError`` lists what is wrong."""
        if self._validator is not None:
            errors = sorted(self._validator.iter_errors(args), key=lambda e: [str(p) for p in e.absolute_path])
            if errors:
                lines = [f"{'/'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message}" for e in errors]
                more = f" (and {len(lines) - _MAX_ERRORS} more)" if len(lines) > _MAX_ERRORS else ""
                raise ToolError(
                    f"invalid arguments for tool {self.name!r}: " + "; ".join(lines[:_MAX_ERRORS]) + more
                ) from None
        return dict(args)

    async def invoke(self, args: dict[str, Any], ctx: ToolContext) -> JsonValue:
        """Validate, send one ``tools/call`` with the call's ids in ``_meta``, and turn the answer into the result."""
        return await self._send(self.validate(args), call_meta(ctx))

    async def _call(self, **arguments: Any) -> JsonValue:
        # ``fn`` (a direct call, ``tool(**args)``): no run, so no call id to send.
        return await self._send(arguments, None)

    async def _send(self, arguments: dict[str, Any], meta: dict[str, str] | None) -> JsonValue:
        server = self.server
        where = f"MCP server {server.name!r}, tool {self.remote_name!r}"
        try:
            answer = await server.connection().call_tool(
                self.remote_name,
                arguments,
                answer_within=server.timeout,
                connect_within=server.connect_timeout,
                meta=meta,
            )
        except CallFailed as exc:
            # Sent and unanswered, it may have run: said first, in the words of the engine's own rule.
            unknown = f"{OUTCOME_UNKNOWN}: " if exc.sent else ""
            raise ToolError(f"{unknown}{where}: {exc}") from None
        except ToolError as exc:  # the server could not be (re)started: nothing was sent
            raise ToolError(f"{where}: the call was not sent: {exc.message}") from None
        result, is_error = convert_result(answer)
        if is_error:
            raise ToolError(str(result))
        return result

    def __getstate__(self) -> dict[str, Any]:
        # A compiled validator (and the bound call) are not configuration: rebuilt after unpickling.
        state = dict(self.__dict__)
        state.pop("_validator", None)
        state.pop("fn", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.fn = self._call
        self._validator = _compile(self.input_schema)

    def __repr__(self) -> str:
        flags = [f for f, on in (("approval", self.requires_approval), ("idempotent", self.idempotent)) if on]
        return f"MCPTool({self.name!r} of {self.server.name!r}{', ' + ', '.join(flags) if flags else ''})"


def _compile(schema: dict[str, Any]) -> Validator | None:
    """A validator for the server's input schema; ``None`` (the server validates) if the schema is broken."""
    cls = validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError:
        return None
    validator: Validator = cls(schema)
    return validator
