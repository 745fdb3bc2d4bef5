"""``repertory serve`` and ``repertory ui`` close connections that send too slowly (issue 39: slowloris).

A real server process, small timeouts (``--header-timeout 1 --body-timeout 2 --keep-alive 1``),
and raw sockets that send half a request head, half a body, or nothing more after a response:
each is closed by the server, where before it was held open for as long as the client liked.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMAND = Path(sys.executable).with_name("repertory")
TIMEOUTS = ("--header-timeout", "1", "--body-timeout", "2", "--keep-alive", "1")
# Far above each timeout: the server closes the socket well before, or never (before the fix).
WITHIN_S = 15.0


async def _start(command: str, store: Path) -> tuple[asyncio.subprocess.Process, tuple[str, int]]:
    """``repertory <command> --port 0`` with the small timeouts; its address, read from its start-up line."""
    proc = await asyncio.create_subprocess_exec(
        str(COMMAND),
        command,
        "--port",
        "0",
        "--agents",
        "tests.http.agents:make_agents",
        "--store",
        f"sqlite:///{store}",
        "--log-level",
        "warning",
        *TIMEOUTS,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    while True:
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        if not line:
            raise AssertionError(f"repertory {command} exited with {await proc.wait()} before it listened")
        if "listening on " in line:
            url = urlsplit(line.split("listening on ")[1].split()[0])
            assert url.hostname is not None and url.port is not None
            return proc, (url.hostname, url.port)


@pytest.fixture(params=["serve", "ui"])
async def server(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[str, int]]:
    """A ``repertory serve`` (or ``repertory ui``) process with one-second timeouts."""
    proc, address = await _start(request.param, tmp_path / "timeouts.db")
    assert proc.stderr is not None
    drain = asyncio.ensure_future(proc.stderr.read())  # a full pipe would stall the server
    try:
        yield address
    finally:
        proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(proc.wait(), 60)
        await drain


async def _until_closed(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection (``TimeoutError`` if it never does)."""
    return await asyncio.wait_for(reader.read(), WITHIN_S)


async def test_half_a_request_head_is_answered_408_and_closed(server: tuple[str, int]) -> None:
    reader, writer = await asyncio.open_connection(*server)
    writer.write(b"GET /ui/static/ui.css HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
    await writer.drain()
    answer = await _until_closed(reader)
    assert answer.startswith(b"HTTP/1.1 408 ")
    writer.close()


async def test_a_connection_that_sends_nothing_is_closed(server: tuple[str, int]) -> None:
    reader, writer = await asyncio.open_connection(*server)
    assert (await _until_closed(reader)).startswith(b"HTTP/1.1 408 ")
    writer.close()


async def test_half_a_body_is_closed_and_a_whole_one_still_served(server: tuple[str, int]) -> None:
    reader, writer = await asyncio.open_connection(*server)
    head = b"POST /ui/login HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\n"
    writer.write(head + b"Content-Length: 100\r\n\r\nkey=only-ten")
    await writer.drain()
    assert await _until_closed(reader) == b""  # closed, nothing answered: the body never came whole
    writer.close()
    # A request that sends its body in time is answered as before (the login form refuses it: no token).
    reader, writer = await asyncio.open_connection(*server)
    writer.write(head + b"Content-Length: 7\r\nConnection: close\r\n\r\nkey=abc")
    await writer.drain()
    assert (await _until_closed(reader)).startswith(b"HTTP/1.1 403 ")
    writer.close()


async def _response(reader: asyncio.StreamReader) -> bytes:
    """One whole response with a ``Content-Length`` (its head and body), read off a kept-alive connection."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WITHIN_S)
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
    )
    return head + await asyncio.wait_for(reader.readexactly(length), WITHIN_S)


async def test_an_idle_kept_alive_connection_is_closed_after_a_response(server: tuple[str, int]) -> None:
    reader, writer = await asyncio.open_connection(*server)
    writer.write(b"GET /ui/static/ui.css HTTP/1.1\r\nHost: localhost\r\n\r\n")
    await writer.drain()
    assert (await _response(reader)).startswith(b"HTTP/1.1 200 ")
    assert await _until_closed(reader) == b""
    writer.close()


async def test_half_a_second_request_head_on_a_kept_alive_connection_is_closed(server: tuple[str, int]) -> None:
    reader, writer = await asyncio.open_connection(*server)
    writer.write(b"GET /ui/static/ui.css HTTP/1.1\r\nHost: localhost\r\n\r\n")
    await writer.drain()
    assert (await _response(reader)).startswith(b"HTTP/1.1 200 ")
    # One byte of the next request stops uvicorn's idle timer; the head's timer closes the connection.
    writer.write(b"G")
    await writer.drain()
    assert (await _until_closed(reader)).startswith(b"HTTP/1.1 408 ")
    writer.close()
