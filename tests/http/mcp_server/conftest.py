"""The MCP server under test: the official ``mcp`` client against ``/mcp`` of a server on loopback.

The servers are ``tests/http/conftest.py``'s (``sqlite_server``: alice's, bob's and an admin's
keys; ``memory_server``: no keys); ``connect`` opens a ``mcp.Client`` over streamable HTTP with a
key in ``Authorization: Bearer`` (MCP's own form) or ``x-api-key``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


@asynccontextmanager
async def connect(url: str, key: str | None = None, *, header: str = "bearer", **options: Any) -> AsyncIterator[Client]:
    """An MCP client of ``url``'s ``/mcp``, with ``key`` sent as ``header`` (``bearer`` or ``x-api-key``)."""
    headers = {}
    if key is not None:
        headers = {"Authorization": f"Bearer {key}"} if header == "bearer" else {"x-api-key": key}
    timeout = httpx2.Timeout(30.0, read=120.0)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http), **options) as client:
            yield client
