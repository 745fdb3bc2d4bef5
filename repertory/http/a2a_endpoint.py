"""``/a2a/{assistant_id}``: each served agent as an A2A 1.0 agent, behind the keys, tenancy and bounds of every route.

- ``POST /a2a/{assistant_id}``: JSON-RPC, parsed and answered by the SDK's ``JsonRpcDispatcher``
  (the 0.3 method names too, through its compatibility adapter), decided by ``A2aHandler``.
- ``GET /a2a/{assistant_id}/.well-known/agent-card.json``: the agent card
  (``repertory.http.a2a_card``), its interface URL made from the URL it was asked on. The card
  needs a key like every route but ``/info`` (it names the agent's tools), and it says how to send one.

Per request, in order: the agent must be served (404); the caller, from ``x-api-key`` or
``Authorization: Bearer``, through the same ``ApiKeys`` as every route (401, 403, 429); then one of
the key's stream slots for the whole request, since any A2A POST may become an SSE stream (429 past
``max_streams_per_key``), given back when the response has been sent, however it ends. Bodies meet
the app's ``BodyLimit`` and JSON guard before they get here. The caller travels to the handler in
the SDK's ``ServerCallContext`` (``RepertoryTaskStore.CALLER``).
"""

from __future__ import annotations

from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from repertory.http.a2a_card import agent_card
from repertory.http.a2a_handler import A2aHandler
from repertory.http.a2a_push import A2aConfigs
from repertory.http.a2a_tasks import RepertoryTaskStore
from repertory.http.auth import ApiKeys, Caller, StreamSlots
from repertory.http.errors import HttpError
from repertory.http.gateway import Gateway
from repertory.http.webhooks import Webhooks

__all__ = ["A2aEndpoint", "a2a_routes"]


class _Context(DefaultServerCallContextBuilder):
    """The SDK's context, with the caller the endpoint found for the request."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[RepertoryTaskStore.CALLER] = request.scope["state"][RepertoryTaskStore.CALLER]
        return context


class _Holding:
    """A response that gives its stream slot back once it has been sent, however that ends."""

    def __init__(self, response: Response, release: Any) -> None:
        self._response = response
        self._release = release

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await self._response(scope, receive, send)
        finally:
            self._release()


def _refusal(exc: HttpError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    if exc.status == 429 and isinstance(exc.details.get("retry_after"), int):
        headers = {"Retry-After": str(exc.details["retry_after"])}
    return JSONResponse({"detail": str(exc)}, status_code=exc.status, headers=headers)


class A2aEndpoint:
    """The routes' two endpoints, over one dispatcher per served agent."""

    def __init__(
        self, gw: Gateway, keys: ApiKeys, slots: StreamSlots, hooks: Webhooks, configs: A2aConfigs, version: str
    ) -> None:
        self._gw = gw
        self._keys = keys
        self._slots = slots
        self._version = version
        context = _Context()
        self._dispatchers = {
            name: JsonRpcDispatcher(
                A2aHandler(gw, name, hooks, configs), context_builder=context, enable_v0_3_compat=True
            )
            for name in gw.agents
        }

    def _caller(self, request: Request) -> Caller:
        return self._keys.caller(request.headers, request.client.host if request.client else None)

    def _agent(self, request: Request) -> str:
        name = str(request.path_params["assistant_id"])
        if name not in self._dispatchers:
            raise HttpError(f"no assistant {name!r} (served: {', '.join(self._dispatchers)})", status=404)
        return name

    async def rpc(self, request: Request) -> Any:
        """``POST /a2a/{assistant_id}``: one JSON-RPC request, holding a stream slot until its answer is sent."""
        try:
            name = self._agent(request)
            caller = self._caller(request)
            self._slots.take(caller.who)
        except HttpError as exc:
            return _refusal(exc)
        try:
            request.scope.setdefault("state", {})[RepertoryTaskStore.CALLER] = caller
            response = await self._dispatchers[name].handle_requests(request)
        except BaseException:
            self._slots.give_back(caller.who)
            raise
        return _Holding(response, lambda: self._slots.give_back(caller.who))

    async def card(self, request: Request) -> Response:
        """``GET /a2a/{assistant_id}/.well-known/agent-card.json``: the agent card (see the module docstring)."""
        try:
            name = self._agent(request)
            self._caller(request)
        except HttpError as exc:
            return _refusal(exc)
        url = str(request.base_url).rstrip("/") + f"/a2a/{name}"
        card = agent_card(name, self._gw.agents[name], url, keys=self._keys.enabled, version=self._version)
        return JSONResponse(agent_card_to_dict(card))


def a2a_routes(
    gw: Gateway, keys: ApiKeys, slots: StreamSlots, hooks: Webhooks, configs: A2aConfigs, version: str
) -> list[Route]:
    """The A2A routes of every served agent (see the module docstring)."""
    endpoint = A2aEndpoint(gw, keys, slots, hooks, configs, version)
    return [
        Route("/a2a/{assistant_id}", endpoint=endpoint.rpc, methods=["POST"]),
        Route("/a2a/{assistant_id}/.well-known/agent-card.json", endpoint=endpoint.card, methods=["GET"]),
    ]
