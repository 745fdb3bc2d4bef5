"""A loopback webhook receiver for the tests: records every POST and answers with the statuses it is given.

A bare asyncio server (HTTP/1.1, ``Content-Length`` bodies, one request per connection), so the
test loop owns it and awaits deliveries (``next``) instead of sleeping.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Delivery", "Receiver"]


@dataclass
class Delivery:
    """One POST the receiver got."""

    path: str
    headers: dict[str, str]
    body: bytes
    status: int

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """Answers the n-th POST with ``statuses[n]`` (200 once they run out) and ``headers``."""

    statuses: list[int] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    got: list[Delivery] = field(default_factory=list)
    url: str = ""
    _server: asyncio.Server | None = None
    _arrived: asyncio.Queue[Delivery] = field(default_factory=asyncio.Queue)

    async def start(self) -> Receiver:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/hook"
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def next(self, seconds: float = 10.0) -> Delivery:
        """The next delivery (waits for it)."""
        async with asyncio.timeout(seconds):
            return await self._arrived.get()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = (await reader.readline()).decode().split()
        headers: dict[str, str] = {}
        while (line := (await reader.readline()).decode().strip()) != "":
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        status = self.statuses[len(self.got)] if len(self.got) < len(self.statuses) else 200
        delivery = Delivery(request[1] if len(request) > 1 else "", headers, body, status)
        self.got.append(delivery)
        extra = "".join(f"{name}: {value}\r\n" for name, value in self.headers.items())
        writer.write(f"HTTP/1.1 {status} X\r\n{extra}Content-Length: 0\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        writer.close()
        await writer.wait_closed()
        self._arrived.put_nowait(delivery)
