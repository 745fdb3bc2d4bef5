"""The options several ``repertory`` commands share, and the console they print on.

One definition each, so ``--store``, ``--agents`` and ``--otlp-endpoint`` read the same (name,
default, help) on every command that takes them, and no command module imports another's for them.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer
from rich.console import Console

from repertory._extras import require
from repertory.errors import RepertoryError
from repertory.runtime import Agent
from repertory.tree.agent_specs import import_agents

__all__ = [
    "AgentsOption",
    "DEFAULT_AGENTS",
    "DEFAULT_STORE",
    "MIN_STATE_KEY_BYTES",
    "McpStateKeyOption",
    "OtlpEndpointOption",
    "PIPE_WIDTH",
    "StoreOption",
    "WideOption",
    "check_mcp_state_key",
    "check_otlp_endpoint",
    "load_agents",
    "otlp_runtime_options",
    "stdout_console",
]

DEFAULT_STORE = "sqlite:///.repertory/repertory.db"
"""Where every command's ``--store`` points unless told: the demo's SQLite file under ``.repertory/``."""
DEFAULT_AGENTS = "repertory.demo.agents:make_agents"
"""The agents ``--agents`` names unless told: the demo's."""

StoreOption = Annotated[str, typer.Option("--store", help="Store URL (sqlite:///path.db, postgresql://..., a path).")]
AgentsOption = Annotated[
    str, typer.Option("--agents", help="module:attr naming a dict of agents, a function returning one, or an agent.")
]
WideOption = Annotated[
    bool,
    typer.Option("--wide", help="Show ids whole in any terminal (columns are dropped to make room)."),
]
OtlpEndpointOption = Annotated[
    str | None,
    typer.Option(
        "--otlp-endpoint",
        help="Send OpenTelemetry spans to this OTLP/HTTP collector (http://localhost:4318); "
        "default: OTEL_EXPORTER_OTLP_ENDPOINT, else no export.",
    ),
]

McpStateKeyOption = Annotated[
    str | None,
    typer.Option(
        "--mcp-state-key",
        envvar="REPERTORY_MCP_STATE_KEY",
        help="A secret of at least 32 bytes that seals the MCP server's multi-round-trip state (approvals "
        "answered on a retry); give every process the same one. Without it each process makes its own, "
        "and an answer must reach the process that asked.",
    ),
]
MIN_STATE_KEY_BYTES = 32


PIPE_WIDTH = 220
"""The width tables are laid out for when the output is not a terminal: wide enough for whole ids."""


def stdout_console() -> Console:
    """The console commands print on: the terminal's width, or ``PIPE_WIDTH`` for a pipe or a file.

    A script reading a pipe gets every table's first layout, with whole ids. A terminal is told by
    ``isatty()`` or by rich's own ``TTY_COMPATIBLE=1`` (which tests use to print as an 80-column
    terminal would, with ``COLUMNS=80``); ``FORCE_COLOR`` alone keeps a pipe's width, so a CI that
    sets it for colours still reads whole ids.
    """
    terminal = sys.stdout.isatty() or os.environ.get("TTY_COMPATIBLE") == "1"
    return Console() if terminal else Console(width=PIPE_WIDTH)


def load_agents(path: str) -> dict[str, Agent]:
    """Import ``module:attr`` and turn it into ``{name: Agent}``."""
    module, _, attr = path.partition(":")
    if not module or not attr:
        raise RepertoryError(f"--agents must look like module:attr, not {path!r}")
    return import_agents(path)


def check_mcp_state_key(key: str | None) -> bytes | None:
    """``--mcp-state-key`` as bytes, or a one-line error when it is shorter than 32 bytes; ``None`` when not given."""
    if key is None or key == "":
        return None
    raw = key.encode()
    if len(raw) < MIN_STATE_KEY_BYTES:
        raise RepertoryError(
            f"--mcp-state-key has {len(raw)} bytes; it needs at least {MIN_STATE_KEY_BYTES} "
            "(make one with: python -c 'import secrets; print(secrets.token_hex(32))')"
        )
    return raw


def check_otlp_endpoint(endpoint: str) -> None:
    """``--otlp-endpoint`` is an http(s) URL and the ``otel`` extra is installed, else a one-line error."""
    from repertory.tracing import traces_url

    try:
        traces_url(endpoint)
    except ValueError as exc:
        raise RepertoryError(f"--otlp-endpoint: {exc}") from None
    require("--otlp-endpoint", "otel")


def otlp_runtime_options(backend: str, endpoint: str | None) -> dict[str, Any]:
    """Export this process's spans (``--otlp-endpoint``, else ``OTEL_EXPORTER_OTLP_*``); Ray hosts get the same.

    Returns the ``Runtime.start`` options that hand the exporter settings to Ray session hosts
    (other processes, which configure their own exporter from them).
    """
    from repertory.tracing import configure_from_env, configure_otlp, otlp_env

    configured = configure_otlp(endpoint) if endpoint is not None else configure_from_env()
    env = otlp_env(endpoint)
    if backend != "ray" or (configured is None and endpoint is None) or not env:
        return {}
    return {"host_options": {"runtime_env": {"env_vars": env}}}
