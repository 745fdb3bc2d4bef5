"""One MCP connection per server per event loop: shared by every session, started on first use.

An ``MCPServer`` is configuration; what it connects to lives here, in a registry keyed by the
running event loop and the transport (a command line or a URL), so every session, agent and
``MCPServer`` object naming the same server in one process shares one child process or one HTTP
session. The SDK's client is an anyio context that must be entered and left by one task, so each
connection has an owner task that holds it open; calls are made from the callers' own tasks.

The connection notices its own end (a stdio server that exited, an HTTP transport that failed, a
call answered "connection closed") and the next use starts a new one: a call is never sent into a
connection already known to be dead, and a call that was in flight when it died is not re-sent
(that is the engine's decision, made from the tool's idempotency, after a crash). The tool list
is cached and re-read after a ``notifications/tools/list_changed`` (or, on the 2026 protocol, a
``subscriptions/listen`` event) and after every reconnection.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types
from mcp import Client, ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from repertory.errors import ToolError
from repertory.mcp._transport import StderrTail, StdioTransport, Transport, watch_end

__all__ = ["CallFailed", "Connection", "close_loop_connections", "connection_for"]

_log = logging.getLogger(__name__)
_CLIENT_INFO = mcp_types.Implementation(name="repertory", version="0.1.0")
_MAX_PAGES = 1000
_LIST_RETRY_SECONDS = 5.0
# Codes meaning the connection itself is gone (the SDK's CONNECTION_CLOSED), not that the server refused.
_GONE = frozenset({mcp_types.CONNECTION_CLOSED})

_REGISTRY: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Transport, Connection]] = (
    weakref.WeakKeyDictionary()
)


def connection_for(transport: Transport, label: str) -> Connection:
    """This event loop's connection to ``transport`` (made, not yet connected, on first use)."""
    loop = asyncio.get_running_loop()
    conns = _REGISTRY.setdefault(loop, {})
    conn = conns.get(transport)
    if conn is None:
        conn = conns[transport] = Connection(transport, label)
    return conn


async def close_loop_connections(transport: Transport | None = None) -> None:
    """Close this event loop's connections (to ``transport`` only, if given); they reopen on next use."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    conns = _REGISTRY.get(loop, {})
    targets = list(conns) if transport is None else [t for t in conns if t == transport]
    closing = [conns.pop(t) for t in targets]
    await asyncio.gather(*(c.aclose() for c in closing))


class CallFailed(Exception):
    """A ``tools/call`` got no answer from the server: the message says why, for the model to read.

    ``sent`` is true when the request reached the server (it died during the call, or the time ran
    out): the call may have run, so its outcome is unknown.
    """

    def __init__(self, message: str, *, sent: bool = False) -> None:
        super().__init__(message)
        self.sent = sent


@dataclass
class _Live:
    """One connection attempt that succeeded: the client, its owner task, and its end."""

    client: Client
    owner: asyncio.Task[None]
    ended: asyncio.Event
    stderr: StderrTail | None


class Connection:
    """A shared connection to one MCP server, reconnected on the next use after it ended."""

    def __init__(self, transport: Transport, label: str) -> None:
        self.transport = transport
        self.label = label
        self.connects = 0
        self.tools: list[mcp_types.Tool] | None = None
        self._live: _Live | None = None
        self._lock = asyncio.Lock()
        self._list_lock = asyncio.Lock()
        self._stale = True
        self._retry_listing_at = 0.0

    # -- connecting ---------------------------------------------------------------------------------

    async def session(self, within: float) -> ClientSession:
        """The live session, connecting first if there is none (``ToolError`` if the server cannot start)."""
        live = self._live
        if live is not None and not live.ended.is_set():
            return live.client.session
        async with self._lock:
            live = self._live
            if live is not None and not live.ended.is_set():
                return live.client.session
            if live is not None:
                self._live = None
                await _finish(live)
            live = await self._connect(within)
            self._live = live
            self._stale = True  # a new connection may be a restarted (or upgraded) server
            self.connects += 1
            return live.client.session

    async def _connect(self, within: float) -> _Live:
        loop = asyncio.get_running_loop()
        ended = asyncio.Event()
        stderr = StderrTail() if isinstance(self.transport, StdioTransport) else None
        errlog = None if stderr is None else await stderr.open()
        ready: asyncio.Future[Client] = loop.create_future()
        owner = loop.create_task(self._own(ready, ended, stderr, errlog, within), name=f"repertory {self.label}")
        waiting: set[asyncio.Future[Any]] = {ready, owner}
        try:
            done, _ = await asyncio.wait(waiting, timeout=within, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # the caller was cancelled while connecting: leave no connection behind
            owner.cancel()
            await asyncio.wait({owner})
            if stderr is not None:
                stderr.close()
            raise
        if stderr is not None:
            stderr.spawned()  # the child holds its own copy now (or never started)
        if ready in done:
            return _Live(ready.result(), owner, ended, stderr)
        if owner not in done:
            owner.cancel()
            await asyncio.wait({owner})
        why = f"it did not answer within {within:g} s"
        failure = None if owner.cancelled() else owner.exception()
        if failure is not None:
            why = _describe(failure)
        tail = "" if stderr is None else await stderr.text()
        if stderr is not None:
            stderr.close()
        failed = "did not start" if isinstance(self.transport, StdioTransport) else "could not be reached"
        message = f"{self.label} ({self.transport.describe()}) {failed}: {why}"
        if tail:
            message += f"\nits stderr ended with:\n{tail}"
        raise ToolError(message)

    async def _own(
        self,
        ready: asyncio.Future[Client],
        ended: asyncio.Event,
        stderr: StderrTail | None,
        errlog: Any,
        within: float,
    ) -> None:
        """Hold the client open until the connection ends; never raises once it was ready.

        Until it is ready the connecting caller owns ``stderr`` (it reads the tail on failure);
        from then on this task closes it when the connection ends, also when the loop shuts down.
        """
        client = Client(
            watch_end(self.transport.open(errlog), ended.set),
            mode="auto",  # the 2026 protocol where the server speaks it, else the initialize handshake
            cache=None,  # this module caches the tool list itself and refreshes it on change
            read_timeout_seconds=within,  # handshake and listing; each call passes its own timeout
            message_handler=self._on_message,
            client_info=_CLIENT_INFO,
        )
        try:
            async with client:
                ready.set_result(client)
                async with anyio.create_task_group() as tg:
                    if _pushes_list_changes(client):
                        tg.start_soon(self._listen, client)
                    await ended.wait()
                    tg.cancel_scope.cancel()
        except BaseException:
            if not ready.done():
                raise  # the connecting caller reads it from this task
            _log.debug("%s: the connection ended", self.label, exc_info=True)
        finally:
            ended.set()
            if stderr is not None and ready.done():
                stderr.close()

    async def _on_message(self, message: Any) -> None:
        """Server notifications on a 2025-era connection: a changed tool list is read again on next use."""
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._stale = True
        elif isinstance(message, Exception):
            _log.debug("%s: transport error: %r", self.label, message)

    async def _listen(self, client: Client) -> None:
        """On the 2026 protocol change notifications come on a ``subscriptions/listen`` stream.

        The stream has no replay: once it drops (an HTTP server restarted under a live connection),
        the list is read again on next use and a new stream is opened, after a growing pause.
        """
        pause = 0.5
        while True:
            try:
                async with client.listen(tools_list_changed=True) as subscription:
                    pause = 0.5
                    async for _ in subscription:
                        self._stale = True
            except Exception:  # a refused or dropped stream costs live refreshes only
                _log.debug("%s: the tools/list_changed stream ended", self.label, exc_info=True)
            self._stale = True
            await anyio.sleep(pause)
            pause = min(pause * 2, 30.0)

    async def aclose(self) -> None:
        """End the connection (the child is stopped); the next use starts a new one."""
        async with self._lock:
            live, self._live = self._live, None
            if live is not None:
                await _finish(live)

    # -- listing and calling ------------------------------------------------------------------------

    async def list_tools(self, within: float) -> list[mcp_types.Tool]:
        """Every tool the server lists (all pages), cached: the same list object until it changes.

        Once listed, a failure to list again (the server is down) keeps the last listing for a few
        seconds: the model still sees the tools, and its calls get error results until the server is back.
        """
        tools = self.tools
        if tools is not None and not self._stale:
            return tools
        async with self._list_lock:
            if self.tools is not None and (not self._stale or time.monotonic() < self._retry_listing_at):
                return self.tools
            try:
                session = await self.session(within)
                self._stale = False  # a change announced from here on is read on the next listing
                fresh = await self._list_all(session)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._stale = True
                if self.tools is None:
                    if isinstance(exc, ToolError):
                        raise
                    raise ToolError(f"{self.label} could not list its tools: {_describe(exc)}") from None
                self._retry_listing_at = time.monotonic() + _LIST_RETRY_SECONDS
                _log.warning("%s: could not list its tools again (%s); keeping the last list", self.label, exc)
                return self.tools
            if self.tools is None or fresh != self.tools:
                self.tools = fresh
            return self.tools

    async def _list_all(self, session: ClientSession) -> list[mcp_types.Tool]:
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(_MAX_PAGES):
            page = await session.list_tools(params=mcp_types.PaginatedRequestParams(cursor=cursor))
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                return tools
            if cursor in seen:
                raise ToolError(f"{self.label} returned the tools/list cursor {cursor!r} twice")
            seen.add(cursor)
        raise ToolError(f"{self.label} listed more than {_MAX_PAGES} pages of tools")

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        answer_within: float,
        connect_within: float,
        meta: dict[str, str] | None = None,
    ) -> mcp_types.CallToolResult:
        """One ``tools/call``, ``meta`` its ``_meta``; ``CallFailed`` (``ToolError``: cannot connect) if unanswered.

        A call that was sent and got no answer (the server died, or the time ran out) may have run:
        its ``CallFailed`` is ``sent``, and the tool's error result says "outcome unknown", as the
        engine says of a call a crash cut short.
        """
        session = await self.session(connect_within)  # raises before anything is sent
        live = self._live
        try:
            return await session.call_tool(
                name, arguments, read_timeout_seconds=answer_within, meta=None if meta is None else _request_meta(meta)
            )
        except asyncio.CancelledError:
            raise
        except MCPError as exc:
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                raise CallFailed(f"no answer within {answer_within:g} s (the call was cancelled)", sent=True) from None
            if exc.code in _GONE:
                if live is not None:
                    live.ended.set()
                raise CallFailed("the server went away during the call; the next call reconnects", sent=True) from None
            raise CallFailed(f"the server answered with an error: {exc}") from None
        except Exception as exc:  # a malformed answer, a result that breaks the tool's output schema...
            raise CallFailed(_describe(exc)) from None


def _request_meta(meta: dict[str, str]) -> mcp_types.RequestParamsMeta:
    """``meta`` as the SDK's ``_meta`` type (an open ``TypedDict``: any key round-trips)."""
    out: mcp_types.RequestParamsMeta = {}
    out.update(meta)  # type: ignore[typeddict-item]
    return out


def _pushes_list_changes(client: Client) -> bool:
    """A 2026-protocol server that announces tool list changes (they then need a listen stream)."""
    if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    tools = client.server_capabilities.tools
    return tools is not None and bool(tools.list_changed)


async def _finish(live: _Live) -> None:
    """End a connection and wait for its owner to leave the client (the SDK bounds the child's stop)."""
    live.ended.set()
    await asyncio.wait({live.owner})
    if live.stderr is not None:
        live.stderr.close()


def _describe(exc: BaseException) -> str:
    """One line for an error, looking through the exception groups anyio wraps errors in."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"the command was not found ({exc})"
    if isinstance(exc, MCPError) and exc.code == mcp_types.CONNECTION_CLOSED:
        return "the connection closed before the server answered (did it exit?)"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
