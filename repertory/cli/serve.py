"""``repertory serve``: a runtime over HTTP, speaking LangGraph's API, so its clients work unchanged.

    repertory serve --store sqlite:///runs.db --agents myapp.agents:AGENTS \
        --api-key alice=$ALICE_KEY --admin-key ops=$OPS_KEY
    repertory ui --store sqlite:///runs.db --agents myapp.agents:AGENTS    # the web UI alone, at /ui

The socket is bound before anything else starts, so a port in use is one ``error:`` line and exit
code 2, like every other mistake; then the runtime starts (finishing turns a previous process
left open) and uvicorn serves until Ctrl-C, after which the runtime closes cleanly. Keys may also
come from ``REPERTORY_API_KEYS`` and ``REPERTORY_ADMIN_KEYS`` (whitespace-separated), which keeps
them out of ``ps``. ``--otlp-endpoint URL`` (or ``OTEL_EXPORTER_OTLP_ENDPOINT``) exports OpenTelemetry
spans, the server's own and, with ``--backend ray``, its session hosts' (see ``repertory.tracing``).
A connection that has not sent a whole request head within ``--header-timeout`` (10 s) is answered
408 and closed, one whose body has not arrived within ``--body-timeout`` (30 s) is closed, and an
idle one is closed after ``--keep-alive`` (5 s) (``repertory.http.timeouts``).
Webhooks are posted to public addresses only; ``--allow-webhook-host HOST_OR_CIDR`` (repeatable)
names the others a server may reach: ``--allow-webhook-host 127.0.0.1`` is how tests and
development deliver to a receiver on loopback (``repertory.http.webhook_targets``). Each owner
keeps at most ``--max-crons-per-owner`` (100) crons, each firing at most once every
``--min-cron-interval`` (60) seconds. The agents are an MCP server at ``/mcp`` too (with the ``mcp``
extra); ``--mcp-state-key`` (or ``REPERTORY_MCP_STATE_KEY``) seals its multi-round-trip state, the
same key on every process (``repertory.http.mcp_server``). ``--budget OWNER=max_cost=5,max_tokens=...``
(repeatable) caps what that owner's sessions spend from then on, across restarts (the spend is in
the store; ``OWNER=none`` removes the cap; ``repertory.core.budget``). ``--export DIR`` names the
folder evals wrote their Parquet results to (``repertory eval run --out DIR``): the web UI's eval
pages show their scores beside each case.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from typing import Annotated

import typer

from repertory._extras import require
from repertory.cli._options import (
    DEFAULT_AGENTS,
    DEFAULT_STORE,
    AgentsOption,
    McpStateKeyOption,
    OtlpEndpointOption,
    StoreOption,
    check_mcp_state_key,
    check_otlp_endpoint,
    load_agents,
    otlp_runtime_options,
)
from repertory.core.budget import Budget, owner_scope, parse_owner_budget
from repertory.core.principal import Principal
from repertory.errors import RepertoryError
from repertory.runtime import Agent, freeze_startup, tune_gc

__all__ = ["register", "serve", "ui"]


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``, or a ``RepertoryError`` that says why not."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise RepertoryError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # asyncio turns Nagle off only for sockets created with proto=IPPROTO_TCP (getaddrinfo's
        # does); set it here too, or responses written in two parts wait ~40 ms for a delayed ACK.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise RepertoryError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def _budgets(specs: list[str]) -> tuple[tuple[str, Budget | None], ...]:
    """``--budget`` values as ``(owner, budget)``; a malformed one is one ``error:`` line, before the port is taken."""
    parsed: dict[str, Budget | None] = {}
    for spec in specs:
        try:
            owner, budget = parse_owner_budget(spec)
        except ValueError as exc:
            raise RepertoryError(f"--budget: {exc}") from None
        if owner in parsed:
            raise RepertoryError(f"--budget: owner {owner!r} is given two budgets")
        parsed[owner] = budget
    return tuple(parsed.items())


def _keys(specs: list[str], option: str = "--api-key") -> dict[str, Principal]:
    from repertory.http.auth import parse_api_key

    keys: dict[str, Principal] = {}
    for spec in (s for raw in specs for s in raw.split()):
        try:
            key, principal = parse_api_key(spec)
        except ValueError as exc:
            raise RepertoryError(f"{option}: {exc}") from None
        if keys.setdefault(key, principal) != principal:
            # Never a silent merge of two tenants (the later name would own the earlier's threads).
            raise RepertoryError(f"{option}: one key is given to two owners ({keys[key].id} and {principal.id})")
    return keys


async def _serve(
    sock: socket.socket,
    store: str,
    backend: str,
    agents: dict[str, Agent],
    agents_path: str,
    keys: dict[str, Principal],
    admins: dict[str, Principal],
    cors: list[str],
    max_body_bytes: int,
    max_streams: int,
    log_level: str,
    ui_only: bool = False,
    otlp_endpoint: str | None = None,
    timeouts: tuple[float, float, float] = (10.0, 30.0, 5.0),
    *,
    webhook_hosts: tuple[str, ...] = (),
    crons: tuple[int, int] = (100, 60),
    mcp_state_key: bytes | None = None,
    budgets: tuple[tuple[str, Budget | None], ...] = (),
    export_dir: str | None = None,
) -> None:
    import uvicorn

    from repertory.http import create_app
    from repertory.http.limits import ServerLimits
    from repertory.http.timeouts import http_protocol
    from repertory.http.ui import ui_only_app
    from repertory.http.webhooks import WebhookSettings
    from repertory.tree import Runtime
    from repertory.tree.agent_specs import AgentSpec

    # On Ray each host imports the agents from their path itself (nothing about them must pickle).
    specs: dict[str, AgentSpec] = {name: agents_path for name in agents} if backend == "ray" else dict(agents)
    options = otlp_runtime_options(backend, otlp_endpoint)
    header_s, body_s, keep_alive_s = timeouts
    limits = ServerLimits(
        max_body_bytes=max_body_bytes,
        max_streams_per_key=max_streams,
        header_timeout_s=header_s,
        body_timeout_s=body_s,
        keep_alive_s=keep_alive_s,
        max_crons_per_owner=crons[0],
        min_cron_interval_s=crons[1],
    )
    runtime = await Runtime.start(store=store, backend="ray" if backend == "ray" else "local", agents=specs, **options)
    try:
        for owner, budget in budgets:
            await runtime.set_budget(owner_scope(owner), budget)
        if ui_only:
            app = ui_only_app(runtime, keys or None, admin_keys=admins or None, limits=limits, export_dir=export_dir)
        else:
            hooks = WebhookSettings(allow_hosts=webhook_hosts)
            app = create_app(
                runtime,
                keys or None,
                cors_origins=cors,
                admin_keys=admins or None,
                limits=limits,
                webhooks=hooks,
                mcp_state_key=mcp_state_key,
                export_dir=export_dir,
            )
        freeze_startup()  # what start-up made lives as long as the process (see repertory.runtime.gc_tuning)
        # The request head, body and idle timeouts (repertory.http.timeouts); uvicorn has only the last.
        config = uvicorn.Config(
            app, http=http_protocol(limits), log_level=log_level, timeout_graceful_shutdown=5, lifespan="on"
        )
        server = uvicorn.Server(config)
        host, port = sock.getsockname()[:2]
        what = "repertory ui" if ui_only else "repertory serve"
        sys.stderr.write(
            f"{what}: listening on http://{host}:{port} (store {store}, backend {backend}, "
            f"assistants {', '.join(agents)}, API keys {'required' if keys or admins else 'off'}"
            f"{f', {len(admins)} admin key(s)' if admins else ''}; web UI at /ui/)\n"
        )
        sys.stderr.flush()
        await server.serve(sockets=[sock])
    finally:
        await runtime.close()


HeaderTimeoutOption = Annotated[
    float,
    typer.Option(
        "--header-timeout",
        min=0.1,
        help="Seconds a connection has to send a whole request head (then 408 and closed).",
    ),
]
BodyTimeoutOption = Annotated[
    float,
    typer.Option("--body-timeout", min=0.1, help="Seconds a request has to send its whole body (then closed)."),
]
KeepAliveOption = Annotated[
    float,
    typer.Option("--keep-alive", min=0.1, help="Seconds an idle connection is kept open between requests."),
]
ExportOption = Annotated[
    str | None,
    typer.Option(
        "--export",
        help="The folder evals wrote their results to (repertory eval run --out DIR): the web UI's eval "
        "pages show their scores. Needs the analytics extra.",
    ),
]


def serve(
    store: StoreOption = DEFAULT_STORE,
    agents: AgentsOption = DEFAULT_AGENTS,
    backend: Annotated[str, typer.Option("--backend", help="local (this process) or ray.")] = "local",
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on (0: any free one).")] = 8123,
    api_key: Annotated[
        list[str] | None,
        typer.Option(
            "--api-key",
            envvar="REPERTORY_API_KEYS",
            help="KEY or NAME=KEY (NAME: alice, user:alice, mod:linter); repeat for more. "
            "With any, every route but /info needs x-api-key or Authorization: Bearer, and a key sees "
            "only the threads its owner (NAME) created.",
        ),
    ] = None,
    admin_key: Annotated[
        list[str] | None,
        typer.Option(
            "--admin-key",
            envvar="REPERTORY_ADMIN_KEYS",
            help="KEY or NAME=KEY that sees and acts on every owner's threads; repeat for more.",
        ),
    ] = None,
    cors_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--cors-origin",
            help="An origin whose pages may call the API from a browser (agent-chat-ui's "
            "address, or * for any); repeat for more.",
        ),
    ] = None,
    max_body_bytes: Annotated[int, typer.Option("--max-body-bytes", min=1, help="Largest request body.")] = 1 << 20,
    max_streams: Annotated[int, typer.Option("--max-streams", min=1, help="Open SSE streams per key.")] = 16,
    log_level: Annotated[str, typer.Option("--log-level", help="uvicorn's log level.")] = "info",
    webhook_secret: Annotated[
        str | None,
        typer.Option(
            "--webhook-secret",
            envvar="REPERTORY_WEBHOOK_SECRET",
            help="Signs run webhooks (X-Repertory-Signature, HMAC-SHA256); without it, runs asking for one get 422.",
        ),
    ] = None,
    otlp_endpoint: OtlpEndpointOption = None,
    header_timeout: HeaderTimeoutOption = 10.0,
    body_timeout: BodyTimeoutOption = 30.0,
    keep_alive: KeepAliveOption = 5.0,
    allow_webhook_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-webhook-host",
            help="A host name, address or CIDR webhooks may be posted to although it is not public "
            "(loopback, private, link-local); repeat for more. Tests and development: --allow-webhook-host 127.0.0.1.",
        ),
    ] = None,
    min_cron_interval: Annotated[
        int,
        typer.Option("--min-cron-interval", min=0, help="Shortest time between two firings of a cron, in seconds."),
    ] = 60,
    max_crons_per_owner: Annotated[
        int, typer.Option("--max-crons-per-owner", min=1, help="Most crons one owner (key) may keep.")
    ] = 100,
    mcp_state_key: McpStateKeyOption = None,
    budget: Annotated[
        list[str] | None,
        typer.Option(
            "--budget",
            help="OWNER=max_cost=5,max_tokens=200000 (also max_model_requests, max_tool_calls, warn_at, "
            "on_exceed=cancel_tree): caps what the owner's sessions spend from now on; OWNER=none removes it. "
            "Repeat for more owners.",
        ),
    ] = None,
    export: ExportOption = None,
) -> None:
    """Serve the runtime over HTTP: LangGraph's API (langgraph-sdk, agent-chat-ui) with OpenAPI at /openapi.json.

    The web UI is served beside it at /ui/ (it takes the same API keys).
    """
    _run(
        store,
        agents,
        backend,
        host,
        port,
        api_key or [],
        cors_origin or [],
        max_body_bytes,
        max_streams,
        log_level,
        ui_only=False,
        webhook_secret=webhook_secret,
        admin_key=admin_key or [],
        otlp_endpoint=otlp_endpoint,
        timeouts=(header_timeout, body_timeout, keep_alive),
        webhook_hosts=allow_webhook_host or [],
        crons=(max_crons_per_owner, min_cron_interval),
        mcp_state_key=mcp_state_key,
        budgets=budget or [],
        export=export,
    )


def ui(
    store: StoreOption = DEFAULT_STORE,
    agents: AgentsOption = DEFAULT_AGENTS,
    backend: Annotated[str, typer.Option("--backend", help="local (this process) or ray.")] = "local",
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on (0: any free one).")] = 8123,
    api_key: Annotated[
        list[str] | None,
        typer.Option(
            "--api-key",
            envvar="REPERTORY_API_KEYS",
            help="KEY or NAME=KEY, as for serve; with any, the UI asks for one at its login form, "
            "and a key sees only its owner's (NAME's) sessions.",
        ),
    ] = None,
    admin_key: Annotated[
        list[str] | None,
        typer.Option(
            "--admin-key",
            envvar="REPERTORY_ADMIN_KEYS",
            help="KEY or NAME=KEY that sees and acts on every owner's sessions; repeat for more.",
        ),
    ] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="uvicorn's log level.")] = "info",
    header_timeout: HeaderTimeoutOption = 10.0,
    body_timeout: BodyTimeoutOption = 30.0,
    keep_alive: KeepAliveOption = 5.0,
    export: ExportOption = None,
) -> None:
    """Serve the web UI alone (sessions, approvals, live runs) at /ui/; `serve` has it too, beside the API."""
    _run(
        store,
        agents,
        backend,
        host,
        port,
        api_key or [],
        [],
        1 << 20,
        16,
        log_level,
        ui_only=True,
        admin_key=admin_key or [],
        timeouts=(header_timeout, body_timeout, keep_alive),
        export=export,
    )


def _run(
    store: str,
    agents: str,
    backend: str,
    host: str,
    port: int,
    api_key: list[str],
    cors: list[str],
    max_body_bytes: int,
    max_streams: int,
    log_level: str,
    *,
    ui_only: bool,
    webhook_secret: str | None = None,
    admin_key: list[str] | None = None,
    otlp_endpoint: str | None = None,
    timeouts: tuple[float, float, float] = (10.0, 30.0, 5.0),
    webhook_hosts: list[str] | None = None,
    crons: tuple[int, int] = (100, 60),
    mcp_state_key: str | None = None,
    budgets: list[str] | None = None,
    export: str | None = None,
) -> None:
    """What ``serve`` and ``ui`` share: check, bind, start the runtime, serve until Ctrl-C."""
    if backend not in ("local", "ray"):
        raise RepertoryError(f"--backend must be local or ray, not {backend!r}")
    require("repertory serve", "http")  # before the port is taken; the CLI prints it as one line
    keys = _keys(api_key or [])
    if webhook_secret:  # read by repertory.http.webhooks.WebhookSettings in this process
        os.environ["REPERTORY_WEBHOOK_SECRET"] = webhook_secret
    admins = _keys(admin_key or [], "--admin-key")
    if set(keys) & set(admins):
        raise RepertoryError("a key cannot be both an --api-key and an --admin-key")
    _check_keys(keys, admins)
    allowed = _webhook_hosts(webhook_hosts or [])
    state_key = check_mcp_state_key(mcp_state_key)
    owner_budgets = _budgets(budgets or [])
    registry = load_agents(agents)  # a bad --agents fails before the port is taken
    if otlp_endpoint is not None:
        check_otlp_endpoint(otlp_endpoint)  # a bad URL or a missing otel extra fails before the port is taken
    if export is not None:
        _check_export(export)
    sock = _listen(host, port)
    tune_gc()  # a server process holds many sessions (see repertory.runtime.gc_tuning)
    try:
        asyncio.run(
            _serve(
                sock,
                store,
                backend,
                registry,
                agents,
                keys,
                admins,
                cors,
                max_body_bytes,
                max_streams,
                log_level,
                ui_only,
                otlp_endpoint,
                timeouts,
                webhook_hosts=allowed,
                crons=crons,
                mcp_state_key=state_key,
                budgets=owner_budgets,
                export_dir=export,
            )
        )
    except KeyboardInterrupt:
        pass  # Ctrl-C: uvicorn already shut down gracefully and the runtime closed
    finally:
        sock.close()


def _webhook_hosts(hosts: list[str]) -> tuple[str, ...]:
    """The ``--allow-webhook-host`` values, each a host name, address or CIDR: else one ``error:`` line."""
    from repertory.http.webhook_targets import HostPolicy

    try:
        HostPolicy.parse(hosts)
    except ValueError as exc:
        raise RepertoryError(f"--allow-webhook-host: {exc}") from None
    return tuple(hosts)


def _check_export(folder: str) -> None:
    """``--export``: an existing folder, and the analytics extra to read it: else one ``error:`` line."""
    if not os.path.isdir(folder):
        raise RepertoryError(f"--export: {folder!r} is not a folder")
    require("--export (the web UI's eval scores)", "analytics")


def _check_keys(keys: dict[str, Principal], admins: dict[str, Principal]) -> None:
    """Keys long enough, one owner each, no owner both a tenant and an admin: else one ``error:`` line."""
    from repertory.http.auth import ApiKeys

    try:
        ApiKeys(keys, admins)
    except ValueError as exc:
        raise RepertoryError(str(exc)) from None


def register(app: typer.Typer) -> None:
    """Attach ``serve`` and ``ui`` to the ``repertory`` app."""
    app.command("serve", short_help="Serve sessions over HTTP: LangGraph's API, the web UI at /ui/.")(serve)
    app.command("ui", short_help="Serve the web UI alone (sessions, approvals, live runs).")(ui)
