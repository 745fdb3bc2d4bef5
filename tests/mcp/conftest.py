"""Fixtures of the MCP tests: the call log, servers over either transport, and no connection left open."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from repertory.mcp import MCPServer, close_connections
from tests.mcp.helpers import HttpServer, http_server, tools_server


@pytest.fixture
def log(tmp_path: Path) -> Path:
    """Where the test servers log the calls they receive."""
    return tmp_path / "calls.jsonl"


@pytest.fixture(autouse=True)
async def _close_mcp_connections() -> AsyncIterator[None]:
    """Every connection a test opened on its event loop is closed (the child stopped) before the loop ends."""
    yield
    await close_connections()


@pytest.fixture
def http(log: Path) -> Iterator[HttpServer]:
    """The tools server on streamable HTTP (loopback), logging to ``log``."""
    with http_server(log) as server:
        yield server


@pytest.fixture(params=["stdio", "http"])
def make_server(request: pytest.FixtureRequest, log: Path) -> Callable[..., MCPServer]:
    """``make_server(**options)``: the tools server over stdio or over streamable HTTP (both run)."""
    if request.param == "stdio":
        return lambda **options: tools_server(log, **options)
    server: HttpServer = request.getfixturevalue("http")

    def make(**options: Any) -> MCPServer:
        return server.server(**options)

    return make
