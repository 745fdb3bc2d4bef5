"""``create_app``: the ASGI app that serves a runtime over the Agent Protocol, LangGraph's flavour.

    from repertory.http import create_app
    app = create_app(runtime, api_keys={"alice-key-0123456789": Principal.user("alice")})

The app does not own the runtime: whoever started it closes it (``repertory serve`` does).
Errors are JSON ``{"detail": "..."}`` with a 4xx status for anything a client can get wrong; a
malformed body is 422 with every problem spelled out, never a 500.
"""

import inspect
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import replace
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.routing import Route

from repertory._extras import installed
from repertory.core.principal import Principal
from repertory.errors import MissingExtra, RepertoryError, RevisionNotFound
from repertory.http.agui import agui_routes
from repertory.http.aisdk import aisdk_routes
from repertory.http.auth import ApiKeys, BodyLimit, Caller, StreamSlots
from repertory.http.crons import cron_routes
from repertory.http.docs import AssistantOut, responses
from repertory.http.errors import status_for
from repertory.http.events import event_routes
from repertory.http.gateway import Gateway, contains
from repertory.http.json_guard import JsonGuard
from repertory.http.limits import DEFAULT_LIMITS, ServerLimits
from repertory.http.runbook import RunBook
from repertory.http.runs import run_routes
from repertory.http.schemas import AssistantSearch
from repertory.http.threads import thread_routes
from repertory.http.ui import WebUI
from repertory.http.views import assistant_view
from repertory.http.webhooks import Webhooks, WebhookSettings
from repertory.tracing import TraceRequests
from repertory.tree.runtime import Runtime

__all__ = ["create_app"]


def _version() -> str:
    try:
        return version("repertory")
    except PackageNotFoundError:  # pragma: no cover - running from a checkout that was never installed
        return "0"


_NO_CHECKPOINT = "no such checkpoint on this thread's lineage"


def _readable(exc: RequestValidationError) -> str:
    """Every validation problem on one line: ``body.assistant_id: Field required; ...``."""
    problems = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error.get("loc", ()))
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        problems.append(f"{where}: {message}" if where else message)
    return "; ".join(problems) or "invalid request"


def create_app(
    runtime: Runtime,
    api_keys: Mapping[str, Principal] | Iterable[str] | None = None,
    *,
    max_body_bytes: int | None = None,
    max_streams_per_key: int | None = None,
    cors_origins: Iterable[str] | None = None,
    webhooks: WebhookSettings | None = None,
    admin_keys: Mapping[str, Principal] | Iterable[str] | None = None,
    limits: ServerLimits | None = None,
    mcp_state_key: bytes | None = None,
    export_dir: str | os.PathLike[str] | None = None,
) -> Any:
    """An ASGI app serving ``runtime`` as LangGraph's API (threads, runs, SSE streams, interrupts).

    ``api_keys``: ``{key: Principal}``, or keys as ``KEY`` / ``NAME=KEY`` strings (see
    ``repertory.http.auth.parse_api_key``); with none, the server is open. ``max_body_bytes`` caps a
    request body (413 above it); ``max_streams_per_key`` caps the SSE streams one key holds open
    (429 above it; without keys every caller shares one count). ``cors_origins`` lets browsers on
    those origins (``"*"`` for any) call the API directly, as agent-chat-ui does when it is given
    the server's URL; keys travel in headers, never cookies, so no credentials mode is needed.
    ``webhooks`` sets how run webhooks are signed and retried (default: the secret from
    ``REPERTORY_WEBHOOK_SECRET``; without a secret, a run asking for a webhook is refused).
    ``admin_keys`` (same forms as ``api_keys``) see and act on every owner's threads; any other key
    sees only the threads its owner created (``repertory.http.auth``). ``limits`` holds every
    bound a tenant meets (``repertory.http.limits.ServerLimits``); ``max_body_bytes`` and
    ``max_streams_per_key``, when given, replace its two fields of those names. With the ``mcp``
    extra installed the agents are also an MCP server at ``/mcp`` (``repertory.http.mcp_endpoint``);
    ``mcp_state_key`` (>= 32 bytes, the same for every process of a deployment) seals its
    multi-round-trip state, else each process makes its own key. With the ``a2a`` extra each agent
    is also an A2A agent at ``/a2a/{assistant_id}`` (``repertory.http.a2a_endpoint``).
    ``export_dir``: the folder evals wrote their Parquet scores to, shown on the web UI's eval
    pages (``WebUI``).
    """
    limits = _limits(limits, max_body_bytes, max_streams_per_key)
    keys = ApiKeys(api_keys, admin_keys, limits=limits)
    gw = Gateway(runtime)
    runs = RunBook(gw, limits.run_book_bytes)
    slots = StreamSlots(limits.max_streams_per_key)
    # The UI's live views count against the same slots.
    ui = WebUI(runtime, keys, limits=limits, slots=slots, export_dir=export_dir)
    a2a_configs = _a2a_configs(gw)  # -- A2A push configs ride the webhooks, when the a2a extra is there
    kinds = a2a_configs[1] if a2a_configs is not None else None
    hooks = runs.webhooks = Webhooks(gw, webhooks, kinds)  # -- durable time: completion webhooks
    mcp = _mcp(gw, keys, slots, limits, mcp_state_key)  # -- the MCP server at /mcp, when the extra is there

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await hooks.start()
        async with mcp[1]() if mcp is not None else _nothing():
            yield
        await gw.close()
        await ui.close()
        await hooks.close()

    app = FastAPI(
        title="repertory",
        version=_version(),
        summary="Durable agent sessions over the Agent Protocol, as LangGraph's clients speak it.",
        openapi_url=None,  # served below, behind the API key like every route but /info
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )

    async def auth(request: Request) -> Caller:
        return keys.caller(request.headers, request.client.host if request.client else None)

    CallerDep = Annotated[Caller, Depends(auth)]

    @app.exception_handler(RepertoryError)
    async def repertory_error(_: Request, exc: RepertoryError) -> JSONResponse:
        status = status_for(exc)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        if status == 429 and isinstance(exc.details.get("retry_after"), int):
            headers = {"Retry-After": str(exc.details["retry_after"])}
        # One sentence whether a checkpoint id is another thread's or nobody's: ids are not probed across tenants.
        detail = _NO_CHECKPOINT if isinstance(exc, RevisionNotFound) else str(exc) or type(exc).__name__
        return JSONResponse({"detail": detail}, status_code=status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", ""))} for e in exc.errors()]
        return JSONResponse({"detail": _readable(exc), "errors": errors}, status_code=422)

    @app.get("/info", tags=["system"], summary="Server information (no API key needed)")
    async def info() -> dict[str, Any]:
        return {
            "version": _version(),
            "server": "repertory",
            "backend": runtime.backend,
            "auth": keys.enabled,
            "flags": {"assistants": True, "crons": True, "langsmith": False, "strict_resume": True},
            "assistants": list(gw.agents),
        }

    @app.get("/ok", tags=["system"], summary="Liveness")
    async def ok(caller: CallerDep) -> dict[str, bool]:
        return {"ok": True}

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi(caller: CallerDep) -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.post(
        "/assistants/search",
        tags=["assistants"],
        responses=responses(list[AssistantOut]),
        summary="The assistants (agents) this server runs",
    )
    async def search_assistants(body: AssistantSearch, caller: CallerDep) -> JSONResponse:
        found = [assistant_view(name, agent, gw.started_at) for name, agent in gw.agents.items()]
        if body.graph_id is not None:
            found = [a for a in found if a["graph_id"] == body.graph_id]
        if body.name is not None:
            found = [a for a in found if body.name.lower() in a["name"].lower()]
        if body.metadata:
            found = [a for a in found if contains(a["metadata"], body.metadata)]
        if body.sort_by is not None:
            found.sort(key=lambda a: str(a[body.sort_by or "name"]), reverse=body.sort_order == "desc")
        page = found[body.offset : body.offset + body.limit]
        if body.select:
            page = [{k: v for k, v in a.items() if k in body.select} for a in page]
        return JSONResponse(page)

    @app.get(
        "/assistants/{assistant_id}", tags=["assistants"], responses=responses(AssistantOut), summary="One assistant"
    )
    async def get_assistant(assistant_id: str, caller: CallerDep) -> JSONResponse:
        return JSONResponse(assistant_view(assistant_id, gw.agent(assistant_id), gw.started_at))

    app.include_router(thread_routes(gw, auth))
    app.include_router(cron_routes(gw, auth, hooks, limits))  # -- durable time: LangGraph's cron routes
    app.include_router(run_routes(gw, runs, slots, auth))
    app.mount("/ui", ui.app)  # the web UI (repertory.http.ui): its own pages, login and CSRF checks
    app.include_router(event_routes(gw, slots, auth))
    app.include_router(agui_routes(gw, runs, slots, auth))  # AG-UI (repertory.http.agui)
    app.include_router(aisdk_routes(gw, runs, slots, auth))  # the Vercel AI SDK's useChat (repertory.http.aisdk)
    if a2a_configs is not None:  # -- A2A: each agent's JSON-RPC endpoint and card (repertory.http.a2a_endpoint)
        from repertory.http.a2a_endpoint import a2a_routes

        app.router.routes.extend(a2a_routes(gw, keys, slots, hooks, a2a_configs[0], _version()))
    if mcp is not None:  # a Route, not a Mount: a Mount redirects /mcp to /mcp/ and runs no lifespan
        app.router.routes.append(Route("/mcp", endpoint=mcp[0], methods=["GET", "POST", "DELETE"]))
    origins = list(cors_origins or ())
    if origins:
        # Preflights are answered before any route (so before the key check); the SDK reads the
        # run's id from Content-Location and reconnects to Location, so both are exposed.
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["*"],
            allow_headers=["*"],
            expose_headers=["Location", "Content-Location"],
        )
    return _traced(BodyLimit(JsonGuard(app, limits.max_json_depth), limits.max_body_bytes))


@asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield


def _mcp(gw: Gateway, keys: ApiKeys, slots: StreamSlots, limits: ServerLimits, state_key: bytes | None) -> Any:
    """``(endpoint, lifespan)`` of ``/mcp``, or ``None`` without the ``mcp`` extra (a key then is an error)."""
    if not installed("mcp"):
        if state_key is not None:
            raise MissingExtra("an MCP state key needs the mcp extra: pip install 'repertory[mcp]'", extra="mcp")
        return None
    # The extra's modules load only where it is installed.
    from repertory.http.mcp_endpoint import http_caller, mcp_endpoint
    from repertory.http.mcp_tasks import McpTasks

    tasks = McpTasks(gw, caller_of=http_caller)
    return mcp_endpoint(gw, keys, slots, limits, state_key=state_key, tasks=tasks, version=_version())


def _a2a_configs(gw: Gateway) -> Any:
    """``(configs, webhook kinds)`` of the A2A push notifications, or ``None`` without the ``a2a`` extra."""
    if not installed("a2a"):
        return None
    from repertory.http.a2a_push import CONFIG_KIND, EVENT_KIND, A2aConfigs, A2aEvents

    configs = A2aConfigs(gw)
    return configs, {CONFIG_KIND: configs, EVENT_KIND: A2aEvents()}


def _limits(limits: ServerLimits | None, max_body_bytes: int | None, max_streams: int | None) -> ServerLimits:
    """``limits`` (the defaults when ``None``) with the two older keyword arguments applied over it."""
    chosen = limits or DEFAULT_LIMITS
    if max_body_bytes is not None:
        chosen = replace(chosen, max_body_bytes=max_body_bytes)
    if max_streams is not None:
        chosen = replace(chosen, max_streams_per_key=max_streams)
    return chosen


def _traced(app: Any) -> Any:
    """``app`` with a server span per request that continues the caller's ``traceparent``.

    FastAPI releases that trace requests themselves (the ``FastAPI(telemetry=...)`` option) already
    make that span, with the same conventions; older ones get ``repertory.tracing.TraceRequests``.
    Either way a turn sent while handling a request is parented to it (``repertory.tracing``).
    """
    if "telemetry" in inspect.signature(FastAPI).parameters:
        return app
    return TraceRequests(app)
