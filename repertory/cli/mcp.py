"""``repertory mcp``: the agents as an MCP server over stdio, for an MCP client that starts it as a process.

    repertory mcp --store sqlite:///runs.db --agents myapp.agents:AGENTS

Claude Code, Claude Desktop, Cursor or any MCP client runs it as a command and speaks MCP on its
stdin and stdout: the same tools, resources and approvals as ``repertory serve``'s ``/mcp``
(``repertory.http.mcp_server``). There are no keys on a pipe: the process acts for the operator
and sees every session of the store, unless ``--owner NAME`` makes it act as that owner (it then
sees and makes only that owner's sessions, as an HTTP key of that name would). Nothing but MCP
may reach stdout, so every other line (start-up, errors) goes to stderr. Sessions are durable in
the store: a turn a killed process left open is driven again by the next process on the store.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated

import typer

from repertory._extras import require
from repertory.cli._options import (
    DEFAULT_AGENTS,
    DEFAULT_STORE,
    AgentsOption,
    McpStateKeyOption,
    StoreOption,
    check_mcp_state_key,
    load_agents,
)
from repertory.core.principal import Principal
from repertory.errors import RepertoryError
from repertory.runtime import Agent, freeze_startup, tune_gc

__all__ = ["mcp", "register"]


async def _serve(store: str, agents: dict[str, Agent], owner: str | None, state_key: bytes | None) -> None:
    from mcp.server.stdio import stdio_server

    from repertory.http.auth import Caller
    from repertory.http.gateway import Gateway
    from repertory.http.mcp_server import Ctx, build_server
    from repertory.http.mcp_tasks import McpTasks
    from repertory.tree import Runtime

    caller = (
        Caller(Principal.user(), "stdio")
        if owner is None
        else Caller(Principal.user(owner), f"stdio:{owner}", owner=owner)
    )

    def caller_of(ctx: Ctx) -> Caller:
        return caller

    runtime = await Runtime.start(store=store, agents=agents)
    gw = Gateway(runtime)
    try:
        tasks = McpTasks(gw, caller_of=caller_of)
        server = build_server(gw, caller_of=caller_of, tasks=tasks, state_key=state_key)
        freeze_startup()  # what start-up made lives as long as the process (see repertory.runtime.gc_tuning)
        sys.stderr.write(f"repertory mcp: serving {', '.join(agents)} over stdio (store {store})\n")
        sys.stderr.flush()
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        await gw.close()
        await runtime.close()


def mcp(
    store: StoreOption = DEFAULT_STORE,
    agents: AgentsOption = DEFAULT_AGENTS,
    owner: Annotated[
        str | None,
        typer.Option("--owner", help="Act as this owner (see and make only its sessions); default: the operator."),
    ] = None,
    mcp_state_key: McpStateKeyOption = None,
) -> None:
    """Serve the agents as an MCP server over stdio: one tool per agent, sessions as resources."""
    require("repertory mcp", "mcp")
    require("repertory mcp", "http")  # the server is the HTTP face's, without the socket
    state_key = check_mcp_state_key(mcp_state_key)
    registry = load_agents(agents)
    if owner is not None and not owner.strip():
        raise RepertoryError("--owner cannot be empty")
    tune_gc()  # a server process holds many sessions (see repertory.runtime.gc_tuning)
    try:
        asyncio.run(_serve(store, registry, owner, state_key))
    except KeyboardInterrupt:
        pass  # the client closed us: the runtime already closed


def register(app: typer.Typer) -> None:
    """Attach ``mcp`` to the ``repertory`` app."""
    app.command("mcp", short_help="Serve the agents as an MCP server over stdio (for MCP clients).")(mcp)
