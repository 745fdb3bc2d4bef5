"""How to reach an MCP server: a child process over stdio, or a streamable-HTTP endpoint.

A transport is plain, hashable, picklable configuration (it travels to Ray hosts inside an agent);
``open()`` gives the MCP SDK's stream pair for one connection. Two helpers make a connection
observable from outside the SDK: ``watch_end`` notices when the server's side of the stream ends
(a stdio server that exited), so a call is never sent into a connection known to be dead, and
``StderrTail`` keeps the last few kilobytes a child wrote to stderr for the error that says why it
did not start. Neither repr shows environment values or header values: they are often secrets.
"""

from __future__ import annotations

import asyncio
import os
import shlex
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import IO, Any, TextIO
from urllib.parse import urlsplit

import anyio
import httpx2
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

__all__ = ["HttpTransport", "StderrTail", "StdioTransport", "Transport", "watch_end"]

_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)  # the SDK's own defaults: a response stream may stay open
_TAIL_BYTES = 4096

Streams = tuple[Any, Any]


@dataclass(frozen=True, slots=True)
class StdioTransport:
    """A server the connection starts as a child process and talks to over its stdin and stdout.

    ``env`` is laid over the small environment the MCP SDK passes to every server (``HOME``,
    ``PATH``, ``USER`` and a few more), never over the whole of this process's environment.
    """

    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] | None = None
    cwd: str | None = None

    def describe(self) -> str:
        """The command line, as a shell would spell it."""
        return shlex.join((self.command, *self.args))

    def default_name(self) -> str:
        """A name for a server nobody named: the command's file name."""
        return os.path.basename(self.command) or self.command

    def open(self, stderr: TextIO | None) -> AbstractAsyncContextManager[Streams]:
        """Start the child and yield its streams; it is stopped (stdin closed, then killed) on exit."""
        params = StdioServerParameters(
            command=self.command,
            args=list(self.args),
            env=None if self.env is None else dict(self.env),
            cwd=self.cwd,
        )
        return stdio_client(params, errlog=stderr) if stderr is not None else stdio_client(params)

    def __repr__(self) -> str:
        env = "" if self.env is None else f", env keys {[k for k, _ in self.env]}"
        return f"StdioTransport({self.describe()!r}{env}, cwd={self.cwd!r})"


@dataclass(frozen=True, slots=True)
class HttpTransport:
    """A server at a streamable-HTTP endpoint; ``headers`` go with every request (authorization)."""

    url: str
    headers: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        """The endpoint's URL."""
        return self.url

    def default_name(self) -> str:
        """A name for a server nobody named: the URL's host and port."""
        return urlsplit(self.url).netloc or self.url

    @asynccontextmanager
    async def open(self, stderr: TextIO | None = None) -> AsyncIterator[Streams]:
        """Open an HTTP client and an MCP session over it; the session is ended (DELETE) on exit."""
        async with (
            httpx2.AsyncClient(headers=dict(self.headers), timeout=_HTTP_TIMEOUT) as http,
            streamable_http_client(self.url, http_client=http) as streams,
        ):
            yield streams

    def __repr__(self) -> str:
        return f"HttpTransport({self.url!r}, header names {[k for k, _ in self.headers]})"


Transport = StdioTransport | HttpTransport


class _EndWatch:
    """The server-to-client stream, calling ``on_end`` once it has ended (the server is gone).

    It implements what the SDK's dispatcher uses of a read stream (``receive``, async iteration,
    ``aclose``, async context); ``last_context`` passes the HTTP stream's context snapshot through.
    """

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    def __aiter__(self) -> _EndWatch:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _EndWatch:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


@asynccontextmanager
async def watch_end(
    streams: AbstractAsyncContextManager[Streams], on_end: Callable[[], None]
) -> AsyncIterator[Streams]:
    """``streams``, with ``on_end`` called when the server's side ends (or the transport closes)."""
    try:
        async with streams as (read, write):
            yield _EndWatch(read, on_end), write
    finally:
        on_end()


class _TailProtocol(asyncio.Protocol):
    def __init__(self, tail: StderrTail) -> None:
        self._tail = tail

    def data_received(self, data: bytes) -> None:
        self._tail.add(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._tail.eof.set()


class StderrTail:
    """A pipe for a child's stderr that keeps only its last few kilobytes (a chatty server costs nothing).

    ``open()`` returns the end to give the child; ``spawned()`` closes this process's copy of it
    once the child holds its own, so the pipe ends when the child exits.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self.eof = asyncio.Event()
        self._writer: IO[str] | None = None
        self._reader: asyncio.ReadTransport | None = None

    def add(self, data: bytes) -> None:
        """Keep ``data``, dropping what is older than the tail."""
        self._buf += data
        if len(self._buf) > 2 * _TAIL_BYTES:
            del self._buf[:-_TAIL_BYTES]

    async def open(self) -> TextIO:
        """The write end for the child's stderr; what it writes is read here as it comes."""
        read_fd, write_fd = os.pipe()
        loop = asyncio.get_running_loop()
        try:
            self._reader, _ = await loop.connect_read_pipe(lambda: _TailProtocol(self), os.fdopen(read_fd, "rb", 0))
        except BaseException:
            os.close(write_fd)
            raise
        writer = os.fdopen(write_fd, "w")
        self._writer = writer
        return writer

    def spawned(self) -> None:
        """Close this process's copy of the write end (the child has its own)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    async def text(self, wait: float = 1.0) -> str:
        """The tail, once the child closed its stderr (waiting at most ``wait`` seconds for that)."""
        self.spawned()
        if not self.eof.is_set():
            try:
                await asyncio.wait_for(self.eof.wait(), wait)
            except TimeoutError:
                pass  # the child still holds its stderr open: report what it wrote so far
        return bytes(self._buf[-_TAIL_BYTES:]).decode(errors="replace").strip()

    def close(self) -> None:
        """Release both ends of the pipe."""
        self.spawned()
        if self._reader is not None:
            self._reader.close()
            self._reader = None
