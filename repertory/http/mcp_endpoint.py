"""``/mcp``: the MCP server over streamable HTTP, behind the same keys, tenancy and bounds as every route.

One ``StreamableHTTPSessionManager`` per app, stateless (any process on the store answers any
request: nothing of a conversation lives in a server's memory), in SSE mode so a long call gets
the SDK's keep-alive pings. In front of it, ``McpEndpoint``, per request:

1. DNS-rebinding protection when the server listens on loopback: the ``Host`` must be a loopback
   name and an ``Origin``, when sent, a loopback origin (the SDK's check: 421 / 403), so a web page
   cannot reach a local server through a rebound name. A server on another address is reached
   through names nobody can list in advance; there the keys are the protection.
2. The caller, from ``Authorization: Bearer <key>`` (MCP's own form) or ``x-api-key``, through the
   same ``ApiKeys`` as every route: 401 with ``WWW-Authenticate: Bearer`` without a key, 403 for a
   wrong one, 429 for an address that sent too many. Handlers read it from the request scope.
3. One of the key's stream slots for the whole request (any MCP POST may become an SSE stream):
   429 past ``max_streams_per_key``, like every stream of every protocol.

Bodies meet the app's ``BodyLimit`` and JSON guard before they get here, and the SDK's own cap is
set to the same bound.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request

from repertory.http.auth import ApiKeys, Caller, StreamSlots
from repertory.http.errors import HttpError
from repertory.http.gateway import Gateway
from repertory.http.limits import ServerLimits
from repertory.http.mcp_server import Ctx, TaskHooks, build_server

__all__ = ["CALLER_KEY", "LOOPBACK", "McpEndpoint", "http_caller", "mcp_endpoint"]

CALLER_KEY = "repertory_caller"
"""Where ``McpEndpoint`` leaves the request's ``Caller`` in the ASGI scope's ``state``."""

LOOPBACK = TransportSecuritySettings(
    enable_dns_rebinding_protection=True,
    allowed_hosts=["127.0.0.1", "127.0.0.1:*", "localhost", "localhost:*", "[::1]", "[::1]:*"],
    allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
)
"""The Host and Origin a server on loopback accepts."""


def http_caller(ctx: Ctx) -> Caller:
    """The caller ``McpEndpoint`` found for the request a handler serves."""
    request = ctx.request
    state = request.scope.get("state") if isinstance(request, Request) else None
    caller = state.get(CALLER_KEY) if isinstance(state, dict) else None
    if not isinstance(caller, Caller):  # pragma: no cover - every request comes through McpEndpoint
        raise HttpError("no caller for this request", status=401)
    return caller


def _on_loopback(scope: dict[str, Any]) -> bool:
    server = scope.get("server")
    host = server[0] if isinstance(server, tuple | list) and server else None
    if not isinstance(host, str):
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class McpEndpoint:
    """The ASGI endpoint at ``/mcp``: rebinding check, key, stream slot, then the SDK's transport.

    A class instance, not a function: Starlette's ``Route`` treats a plain function as a
    request-to-response handler, and the SDK's transport is an ASGI app.
    """

    def __init__(self, manager: StreamableHTTPSessionManager, keys: ApiKeys, slots: StreamSlots) -> None:
        self._app = StreamableHTTPASGIApp(manager)
        self._keys = keys
        self._slots = slots
        self._rebinding = TransportSecurityMiddleware(LOOPBACK)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Serve one request (see the module docstring for the checks, in order)."""
        request = Request(scope, receive)
        if _on_loopback(scope):
            refused = await self._rebinding.validate_request(request, is_post=False)
            if refused is not None:
                await refused(scope, receive, send)
                return
        client = scope.get("client")
        try:
            caller = self._keys.caller(request.headers, client[0] if client else None)
            self._slots.take(caller.who)
        except HttpError as exc:
            await _refuse(send, exc)
            return
        try:
            scope.setdefault("state", {})[CALLER_KEY] = caller
            await self._app(scope, receive, send)
        finally:
            self._slots.give_back(caller.who)


async def _refuse(send: Any, exc: HttpError) -> None:
    status = exc.status
    headers = [(b"content-type", b"application/json")]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    if status == 429 and isinstance(exc.details.get("retry_after"), int):
        headers.append((b"retry-after", str(exc.details["retry_after"]).encode()))
    body = json.dumps({"detail": str(exc)}).encode()
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def mcp_endpoint(
    gw: Gateway,
    keys: ApiKeys,
    slots: StreamSlots,
    limits: ServerLimits,
    *,
    state_key: bytes | None,
    tasks: TaskHooks | None = None,
    version: str = "0",
) -> tuple[McpEndpoint, Any]:
    """The ``/mcp`` endpoint and the lifespan context it needs entered (the SDK's task group, one per app)."""
    server = build_server(gw, caller_of=http_caller, tasks=tasks, state_key=state_key, version=version)
    manager = StreamableHTTPSessionManager(
        app=server,
        stateless=True,
        json_response=False,
        max_request_body_size=limits.max_body_bytes,
        security_settings=None,  # checked in McpEndpoint, only where the server is on loopback
    )

    @asynccontextmanager
    async def running() -> AsyncIterator[None]:
        async with manager.run():
            yield

    return McpEndpoint(manager, keys, slots), running
